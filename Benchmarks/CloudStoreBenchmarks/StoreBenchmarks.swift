import CloudStore
import Foundation
import GRDB
import GRDBSQLite
import Logging

/// Saving and fetching notes through CloudStore, GRDB's Codable records and raw SQLite
/// statements, on the same table layout, with the same journal (WAL) and durability
/// (`synchronous = FULL`) settings.
struct StoreBenchmarks {
    let directory: URL
    let saveCount: Int
    let fetchCount: Int

    static let quietLogger: Logger = {
        var logger = Logger(label: "cloudstore.bench")
        logger.logLevel = .error
        return logger
    }()

    var all: [Benchmark] {
        let notes = BenchNote.make(saveCount)
        let snapshots = notes.map(\.snapshot)
        let models = notes.map(BenchModelNote.init)
        return [
            save("save.cloudstore", "\(saveCount) notes, one unit of work, with history", history: true) { context in
                for note in notes { try context.insert(note) }
            },
            save("save.cloudstore.model", "\(saveCount) @Model notes, one unit of work, with history", history: true) {
                context in for note in models { try context.insert(note) }
            },
            save("save.cloudstore.nohistory", "the same without history", history: false) { context in
                for note in notes { try context.insert(note) }
            },
            save("save.cloudstore.snapshots", "the same from EntitySnapshots, with history", history: true) { context in
                for note in snapshots { try context.insert(note) }
            },
            save("save.cloudstore.snapshots.nohistory", "the same from EntitySnapshots, without history", history: false) {
                context in for note in snapshots { try context.insert(note) }
            },
            commits(.full),
            commits(.normal),
            Benchmark(name: "save.grdb.codable", summary: "GRDB Codable record insert, one transaction") {
                let pool = try newPool()
                return { try pool.write { db in for note in notes { try note.insert(db) } } }
            },
            Benchmark(name: "save.raw", summary: "raw SQLite: one prepared INSERT, one transaction") {
                let pool = try newPool()
                return { try pool.write { db in try Self.rawInsert(notes, db) } }
            },
            Benchmark(name: "fetch.cloudstore", summary: "\(fetchCount) rows into entities") {
                let store = try fetchStore()
                return { _ = try store.read { try $0.fetch(BenchNote.self) } }
            },
            Benchmark(name: "fetch.cloudstore.model", summary: "\(fetchCount) rows into @Model entities") {
                let store = try fetchStore()
                return { _ = try store.read { try $0.fetch(FetchDescriptor<BenchModelNote>()) } }
            },
            Benchmark(name: "fetch.cloudstore.snapshots", summary: "\(fetchCount) rows into EntitySnapshots") {
                let store = try fetchStore()
                return { _ = try store.read { try $0.fetchSnapshots(entityName: "Note") } }
            },
            Benchmark(name: "fetch.grdb.codable", summary: "GRDB Codable record fetch") {
                let pool = try Self.pool(path: fetchPath)
                return { _ = try pool.read { try BenchNote.fetchAll($0) } }
            },
            Benchmark(name: "fetch.raw", summary: "raw SQLite: step and read columns into structs") {
                let pool = try Self.pool(path: fetchPath)
                return { _ = try pool.read { try Self.rawFetch($0) } }
            },
        ]
    }

    /// A save into a new store, as one unit of work.
    func save(
        _ name: String, _ summary: String, history: Bool, _ body: @escaping (WriteContext) throws -> Void
    ) -> Benchmark {
        Benchmark(name: name, summary: summary) {
            let store = try newStore(recordsHistory: history)
            return { try store.write(author: "bench", body) }
        }
    }

    /// How many one-note units of work ``commits(_:)`` times.
    static let commitCount = 200

    /// `commitCount` units of work of one note each, with a durability setting: what an app that
    /// saves after each user action pays per save (an fsync per commit with `FULL`).
    func commits(_ synchronous: PersistentStore.Configuration.Synchronous) -> Benchmark {
        let name = "save.commits.\(synchronous.rawValue.lowercased())"
        return Benchmark(name: name, summary: "\(Self.commitCount) one-note units of work, synchronous = \(synchronous.rawValue)") {
            var configuration = PersistentStore.Configuration()
            configuration.synchronous = synchronous
            let store = try PersistentStore(url: freshFile(), schema: BenchNote.schema, configuration: configuration, logger: Self.quietLogger)
            let notes = BenchNote.make(Self.commitCount)
            return { for note in notes { try store.write(author: "bench") { try $0.insert(note) } } }
        }
    }

    static var configuration: GRDB.Configuration {
        var configuration = GRDB.Configuration()
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        return configuration
    }

    /// A GRDB pool for the baselines, with `synchronous = FULL` on its writer too: GRDB sets
    /// `NORMAL` there when it turns WAL on, after `prepareDatabase`.
    static func pool(path: String) throws -> DatabasePool {
        let pool = try DatabasePool(path: path, configuration: configuration)
        try pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        return pool
    }

    /// A new empty store; the table is created by the store, as GRDB and raw runs reuse its layout.
    func newStore(recordsHistory: Bool) throws -> PersistentStore {
        var configuration = PersistentStore.Configuration()
        configuration.recordsHistory = recordsHistory
        return try PersistentStore(url: freshFile(), schema: BenchNote.schema, configuration: configuration, logger: Self.quietLogger)
    }

    /// A new empty database with the store's table layout, without the store.
    func newPool() throws -> DatabasePool {
        let url = freshFile()
        try PersistentStore(url: url, schema: BenchNote.schema, logger: Self.quietLogger).close()
        return try Self.pool(path: url.path)
    }

    var fetchPath: String { directory.appendingPathComponent("fetch.sqlite").path }

    func fetchStore() throws -> PersistentStore {
        try PersistentStore(url: URL(fileURLWithPath: fetchPath), schema: BenchNote.schema, logger: Self.quietLogger)
    }

    /// Fills the fetch database once.
    func prepareFetchDatabase() throws {
        let store = try fetchStore()
        let notes = BenchNote.make(fetchCount)
        try store.write { context in for note in notes { try context.insert(note) } }
        try store.close()
    }

    func freshFile() -> URL {
        directory.appendingPathComponent("save-\(UUID().uuidString).sqlite")
    }

    static let insertSQL = """
        INSERT INTO "Note" ("id", "title", "body", "pinned", "created", "modified", "priority", "wordCount", "rating", "color", "archived") \
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """

    static func rawInsert(_ notes: [BenchNote], _ db: Database) throws {
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db.sqliteConnection, insertSQL, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw DatabaseError(message: "prepare failed")
        }
        defer { sqlite3_finalize(statement) }
        func text(_ value: String, _ index: Int32) {
            var value = value
            _ = value.withUTF8 { sqlite3_bind_text(statement, index, $0.baseAddress.map { UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self) }, Int32($0.count), transient) }
        }
        for note in notes {
            text(note.id.uuidString, 1)
            text(note.title, 2)
            text(note.body, 3)
            sqlite3_bind_int64(statement, 4, note.pinned ? 1 : 0)
            sqlite3_bind_int64(statement, 5, Int64((note.created.timeIntervalSince1970 * 1000).rounded()))
            sqlite3_bind_int64(statement, 6, Int64((note.modified.timeIntervalSince1970 * 1000).rounded()))
            sqlite3_bind_int64(statement, 7, note.priority)
            sqlite3_bind_int64(statement, 8, note.wordCount)
            sqlite3_bind_double(statement, 9, note.rating)
            if let color = note.color { text(color, 10) } else { sqlite3_bind_null(statement, 10) }
            sqlite3_bind_int64(statement, 11, note.archived ? 1 : 0)
            guard sqlite3_step(statement) == SQLITE_DONE else { throw DatabaseError(message: "insert failed") }
            sqlite3_reset(statement)
        }
    }

    static func rawFetch(_ db: Database) throws -> [BenchNote] {
        var statement: OpaquePointer?
        let sql = "SELECT \"id\", \"title\", \"body\", \"pinned\", \"created\", \"modified\", \"priority\", \"wordCount\", \"rating\", \"color\", \"archived\" FROM \"Note\""
        guard sqlite3_prepare_v2(db.sqliteConnection, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw DatabaseError(message: "prepare failed")
        }
        defer { sqlite3_finalize(statement) }
        func text(_ index: Int32) -> String { String(cString: sqlite3_column_text(statement, index)) }
        var notes: [BenchNote] = []
        while sqlite3_step(statement) == SQLITE_ROW {
            notes.append(
                BenchNote(
                    id: UUID(uuidString: text(0))!, title: text(1), body: text(2), pinned: sqlite3_column_int64(statement, 3) != 0,
                    created: Date(timeIntervalSince1970: Double(sqlite3_column_int64(statement, 4)) / 1000),
                    modified: Date(timeIntervalSince1970: Double(sqlite3_column_int64(statement, 5)) / 1000),
                    priority: sqlite3_column_int64(statement, 6), wordCount: sqlite3_column_int64(statement, 7),
                    rating: sqlite3_column_double(statement, 8),
                    color: sqlite3_column_type(statement, 9) == SQLITE_NULL ? nil : text(9),
                    archived: sqlite3_column_int64(statement, 10) != 0))
        }
        return notes
    }
}
