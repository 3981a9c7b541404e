import CloudStore
import CloudStoreTesting
import Foundation
import GRDB
import Testing

@Suite struct StoreOpeningTests {
    func open(_ url: URL, _ schema: Schema? = nil) throws -> PersistentStore {
        try openStore(url, schema ?? Schema.notes())
    }

    /// The bytes of the file and whether SQLite side files exist.
    func state(of url: URL) throws -> (Data, Bool) {
        let sideFiles = ["-wal", "-shm", "-journal"].contains { FileManager.default.fileExists(atPath: url.path + $0) }
        return (try Data(contentsOf: url), sideFiles)
    }

    @Test func newFile_becomesAStore_andReopens() throws {
        let directory = try TemporaryDirectory()
        let url = directory.file("nested/folder/notes.sqlite")
        let note = Note(title: "kept")
        do {
            let store = try open(url)
            try store.write { try $0.insert(note) }
            try store.close()
        }
        let reopened = try open(url)
        #expect(try reopened.read { try $0.fetch(Note.self, id: note.id) } == note)
    }

    @Test func notSQLite_isRefusedAndUntouched() throws {
        let directory = try TemporaryDirectory()
        let url = directory.file("notes.txt")
        try Data("shopping list: milk, eggs\n".utf8).write(to: url)
        let before = try state(of: url)
        let error = storeError { _ = try open(url) }
        #expect(error?.code == .notAStore)
        #expect(error?.message.contains(url.path) == true)
        #expect(try state(of: url) == before)
    }

    @Test func sqliteWithoutMetadata_isRefusedAndUntouched() throws {
        let directory = try TemporaryDirectory()
        let url = directory.file("other.sqlite")
        do {
            let queue = try DatabaseQueue(path: url.path)
            try queue.write { db in
                try db.execute(sql: "CREATE TABLE player (id INTEGER PRIMARY KEY, name TEXT)")
                try db.execute(sql: "INSERT INTO player (name) VALUES ('Arthur')")
            }
            try queue.close()
        }
        let before = try state(of: url)
        let error = storeError { _ = try open(url) }
        #expect(error?.code == .notAStore)
        #expect(error?.message.contains("player") == true)
        #expect(try state(of: url) == before)
    }

    @Test(arguments: [16..<100, 100..<4096])
    func damagedStore_isRefusedAndUntouched(damaged range: Range<Int>) throws {
        let directory = try TemporaryDirectory()
        let url = directory.file("notes.sqlite")
        do {
            let store = try open(url)
            try store.write { context in
                for index in 0..<50 { try context.insert(Note(title: "\(index)")) }
            }
            try store.close()
        }
        var bytes = try Data(contentsOf: url)
        for index in range { bytes[index] = UInt8(truncatingIfNeeded: index &* 31 &+ 7) }
        try bytes.write(to: url)
        let before = try state(of: url)
        let error = storeError { _ = try open(url) }
        #expect(error?.code == .corrupt)
        #expect(error?.message.contains(url.path) == true)
        #expect(try state(of: url) == before)
    }

    @Test func olderSchemaThanTheStore_isRefusedAndUntouched() throws {
        let directory = try TemporaryDirectory()
        let url = directory.file("notes.sqlite")
        try open(url).close()
        let before = try state(of: url)
        let error = storeError { _ = try open(url, try Schema.load(contentsOf: RepositoryPaths.notesSchemaV1)) }
        #expect(error?.code == .schemaTooOld)
        #expect(error?.message.contains("version 2") == true)
        #expect(try state(of: url) == before)
    }

    @Test func changedSchemaWithoutNewVersion_isRefused() throws {
        let directory = try TemporaryDirectory()
        let url = directory.file("notes.sqlite")
        try open(url).close()
        var changed = try Schema.notes()
        changed.entities[2].attributes.append(AttributeDescription("emoji", .string, optional: true))
        let error = storeError { _ = try open(url, changed) }
        #expect(error?.code == .schemaVersionNotBumped)
        #expect(error?.message.contains("bump the version to 3") == true)

        var renamed = try Schema.notes()
        renamed.name = "Recipes"
        #expect(storeError { _ = try open(url, renamed) }?.code == .schemaMismatch)
    }
}
