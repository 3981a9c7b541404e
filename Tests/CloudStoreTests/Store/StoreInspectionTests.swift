import CloudStore
import CloudStoreTesting
import Foundation
import Testing

/// `PersistentStore.fileInfo(at:)` and `migrationChanges(at:schema:migrations:)`: what a store file
/// holds and what opening it would do, read without modifying it.
@Suite struct StoreInspectionTests {
    @Test func fileInfo_readsTheStoredSchemaWithoutTouchingTheFile() throws {
        let directory = try TemporaryDirectory()
        #expect(try PersistentStore.fileInfo(at: directory.file("none.sqlite")) == nil, "no file: nothing to describe")
        let (url, _) = try MigrationTests.v1Store(in: directory)
        let before = try MigrationTests.dump(url)
        let info = try #require(try PersistentStore.fileInfo(at: url))
        #expect(info.schemaName == "Notes")
        #expect(info.schemaVersion == 1)
        #expect(info.schemaHash == (try MigrationTests.notesV1()).schemaHash)
        #expect(info.storedSchema == (try MigrationTests.notesV1()))
        #expect(info.historyPurgedThrough == 0)
        #expect(try MigrationTests.dump(url) == before)

        let text = directory.file("notes.txt")
        try Data("hello".utf8).write(to: text)
        #expect(storeError { _ = try PersistentStore.fileInfo(at: text) }?.code == .notAStore)
    }

    @Test func migrationChanges_listWhatOpeningWouldDoInOrder() throws {
        let directory = try TemporaryDirectory()
        let (url, _) = try MigrationTests.v1Store(in: directory)
        let before = try MigrationTests.dump(url)
        let plan = try MigrationPlan.load(directory: MigrationTests.migrations, schemaName: "Notes")
        let changes = try PersistentStore.migrationChanges(at: url, schema: try Schema.notes(), migrations: plan)
        #expect(changes.first == "rename Note.rank to priority")
        #expect(changes.contains("add Note.created"))
        #expect(changes.last == "step 2 2-clamp-priority.sql", "\(changes)")
        #expect(try MigrationTests.dump(url) == before, "deciding modifies nothing")

        #expect(try PersistentStore.migrationChanges(at: url, schema: try MigrationTests.notesV1()).isEmpty)
        #expect(try PersistentStore.migrationChanges(at: directory.file("new.sqlite"), schema: try Schema.notes()).isEmpty)
        let store = try openStore(url, try Schema.notes(), migrations: plan)
        try store.close()
        #expect(storeError { _ = try PersistentStore.migrationChanges(at: url, schema: try MigrationTests.notesV1()) }?.code == .schemaTooOld)
    }
}
