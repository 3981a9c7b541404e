import CloudStore
import CloudStoreTesting
import Foundation
import Testing

/// `PersistentStore.fileInfo(at:)` and `migrationChanges(at:schema:migrations:)`: what a store file
/// holds and what opening it would do, read without modifying it; `PersistentStore(inspecting:)`:
/// the store read as it is, which never writes.
@Suite struct StoreInspectionTests {
    /// The bytes of every file in `directory`, by name.
    func contents(of directory: TemporaryDirectory) throws -> [String: Data] {
        var contents: [String: Data] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.url.path) {
            contents[name] = try Data(contentsOf: directory.file(name))
        }
        return contents
    }

    /// A closed store keeps an empty WAL and its index beside it; a copied one may be the main file alone.
    @Test(arguments: [false, true])
    func inspecting_readsTheStoreAsItIs_refusesEveryWrite_andLeavesEveryFileAsItWas(mainFileAlone: Bool) throws {
        let directory = try TemporaryDirectory()
        let url = directory.file("notes.sqlite")
        let note = Note(title: "kept")
        do {
            let store = try openStore(url, try Schema.notes())
            try store.write(author: "app") { try $0.insert(note) }
            try store.close()
        }
        if mainFileAlone {
            for suffix in ["-wal", "-shm"] { try FileManager.default.removeItem(atPath: url.path + suffix) }
        }
        let before = try contents(of: directory)
        #expect(before.keys.sorted() == (mainFileAlone ? ["notes.sqlite"] : ["notes.sqlite", "notes.sqlite-shm", "notes.sqlite-wal"]))

        let store = try PersistentStore(inspecting: url, schema: try Schema.notes(), logger: .quiet)
        #expect(store.isReadOnly)
        #expect(try store.read { try $0.fetch(Note.self, id: note.id) } == note)
        #expect(try store.history(after: nil).map(\.author) == ["app"])
        let generation = try store.makeQueryGeneration()
        #expect(try generation.read { try $0.count(Note.self) } == 1)
        generation.close()

        let write = storeError { try store.write { try $0.insert(Note(title: "refused")) } }
        #expect(write?.code == .readOnly)
        #expect(write?.message.contains("\(url.path) was opened for inspection") == true, "\(write?.message ?? "")")
        let token = try #require(try store.currentHistoryToken())
        #expect(storeError { try store.purgeHistory(through: token) }?.code == .readOnly)
        #expect(storeError { try store.checkpoint() }?.code == .readOnly)
        try store.close()
        #expect(try contents(of: directory) == before)
    }

    @Test func inspecting_neverCreatesNorMigratesAStore() throws {
        let directory = try TemporaryDirectory()
        let missing = storeError { _ = try PersistentStore(inspecting: directory.file("none.sqlite"), schema: try Schema.notes()) }
        #expect(missing?.code == .notAStore)
        #expect(try contents(of: directory).isEmpty, "no file was created")

        let (url, _) = try MigrationTests.v1Store(in: directory)
        let before = try contents(of: directory)
        let newer = storeError { _ = try PersistentStore(inspecting: url, schema: try Schema.notes(), logger: .quiet) }
        #expect(newer?.code == .needsUpgrade)
        #expect(newer?.message.contains("inspecting never migrates") == true, "\(newer?.message ?? "")")
        let asItIs = try PersistentStore(inspecting: url, schema: try MigrationTests.notesV1(), logger: .quiet)
        #expect(try asItIs.read { try $0.count(entityName: "Note") } > 0)
        try asItIs.close()
        #expect(try contents(of: directory) == before)
    }

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

    /// A duplicate key rule is not the store's shape: the store opens with another one without a
    /// new version, and keeps the schema it was opened with for the tools that read it.
    @Test func aChangedDuplicateKeyRule_opensAndIsStored() throws {
        let directory = try TemporaryDirectory()
        var schema = try Schema.notes()
        let tag = try #require(schema.entities.firstIndex { $0.name == "Tag" })
        schema.entities[tag].uniquenessConstraints = [["name"]]
        let url = directory.file("notes.sqlite")
        try PersistentStore(url: url, schema: schema, logger: .quiet).close()
        schema.entities[tag].duplicateKeyRule = .refuse
        try PersistentStore(url: url, schema: schema, logger: .quiet).close()
        let stored = try #require(try PersistentStore.fileInfo(at: url)?.storedSchema)
        #expect(stored.entity(named: "Tag")?.duplicateKeyRule == .refuse)
        #expect(stored == schema)
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
