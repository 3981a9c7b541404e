import CloudStoreLogging
import Foundation
import GRDB
import Logging

/// How a store file is opened: first inspected read-only, so that a file that is not a store, a
/// damaged one, or one that cannot be migrated is refused before anything writes to it (a WAL
/// connection would already change its header); then created or migrated in one IMMEDIATE
/// transaction, deciding again there in case another process created or migrated it meanwhile.
/// A store opened for inspection stops after the first step (``openForInspection(_:)``).
struct StoreOpening {
    let path: String
    let schema: Schema
    let migrations: MigrationPlan
    /// What the read-only inspection of the file decided, before anything wrote to it.
    private(set) var inspected = Action.create

    enum Action {
        case create
        case open(StoreMetadata)
        case migrate(StoreMetadata, MigrationWork)
    }

    init(path: String, schema: Schema, migrations: MigrationPlan) throws {
        self.path = path
        self.schema = schema
        self.migrations = migrations
        inspected = try decide(try Self.readMetadata(path: path))
    }

    /// The metadata of the store at `path`, read without modifying the file; nil when there is
    /// no file, an empty one, or an empty database.
    static func readMetadata(path: String) throws -> StoreMetadata? {
        guard let size = (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int, size > 0 else {
            return nil
        }
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw StoreError(.sqlite, "\(path) cannot be read; check its permissions")
        }
        let header = (try? handle.read(upToCount: 16)) ?? Data()
        try? handle.close()
        guard header == Data("SQLite format 3\0".utf8) else {
            throw StoreError(
                .notAStore,
                "\(path) is not a CloudStore store: it is not a SQLite database at all; choose another path (the file was not modified)")
        }
        return try readWithoutWriting(path: path, while: "checking the file before opening it") { db in
            try StoreMetadata.read(db, path: path)
        }
    }

    /// What to do with the store, or why not.
    func decide(_ metadata: StoreMetadata?) throws -> Action {
        guard let metadata else { return .create }
        guard metadata.format <= StoreMetadata.currentFormat else {
            throw StoreError(
                .schemaTooOld,
                "\(path) was written by a newer CloudStore (store format \(metadata.format)); update the app")
        }
        guard metadata.schemaName == schema.name else {
            throw StoreError(
                .schemaMismatch,
                "\(path) holds schema \"\(metadata.schemaName)\", not \"\(schema.name)\"; open it with its own schema or choose another path")
        }
        if metadata.schemaVersion > schema.version {
            throw StoreError(
                .schemaTooOld,
                "\(path) holds version \(metadata.schemaVersion) of schema \(schema.name), newer than this app's version \(schema.version); update the app (the store was not modified)")
        }
        if metadata.schemaVersion == schema.version {
            guard metadata.schemaHash == schema.schemaHash else {
                throw StoreError(
                    .schemaVersionNotBumped,
                    "schema \(schema.name) changed since version \(schema.version) was stored in \(path) (hash \(metadata.schemaHash) → \(schema.schemaHash)) but its version did not; bump the version to \(schema.version + 1) so the store migrates")
            }
            return .open(metadata)
        }
        guard let stored = metadata.schema else {
            throw StoreError(.corrupt, "\(path) lacks the stored schema it needs to migrate; restore it from a backup")
        }
        let work = try MigrationPlanner(from: stored, to: schema, steps: migrations.steps(after: stored.version, through: schema.version))
            .plan()
        return .migrate(metadata, work)
    }

    /// Creates or migrates the store in one transaction; returns the store's identifier.
    func prepare(_ pool: DatabasePool, layout: StoreLayout, logger: Logger) throws -> UUID {
        try pool.writeWithoutTransaction { db in
            // Rebuilding tables during a migration needs foreign keys off, which SQLite only
            // allows outside a transaction; the migration checks them before committing.
            try db.execute(sql: "PRAGMA foreign_keys = OFF")
            defer { try? db.execute(sql: "PRAGMA foreign_keys = ON") }
            var identifier = UUID()
            try db.inTransaction(.immediate) {
                switch try decide(try StoreMetadata.read(db, path: path)) {
                case .create:
                    for statement in StoreMetadata.creationStatements + layout.creationStatements {
                        try db.execute(sql: statement)
                    }
                    let metadata = StoreMetadata(storeIdentifier: identifier, schema: schema)
                    try metadata.write(db)
                    logger.notice("store created", metadata: ["store": "\(path)", "schema": "\(schema.name)", "version": "\(schema.version)"])
                case .open(var metadata):
                    identifier = metadata.storeIdentifier
                    if metadata.schema != schema {
                        // Same shape, other settings the hash leaves out (a duplicate key rule):
                        // the stored schema follows, for the tools that open the store with it.
                        metadata.schema = schema
                        try metadata.write(db)
                    }
                case .migrate(var metadata, let work):
                    let started = ContinuousClock.now
                    try Migrator(work: work, layout: layout, path: path, logger: logger).run(db)
                    metadata.schema = schema
                    metadata.schemaName = schema.name
                    metadata.schemaVersion = schema.version
                    metadata.schemaHash = schema.schemaHash
                    try metadata.write(db)
                    identifier = metadata.storeIdentifier
                    logger.notice(
                        "store migrated",
                        metadata: [
                            "store": "\(path)", "schema": "\(schema.name)", "from": "\(work.fromVersion)",
                            "version": "\(schema.version)", "duration": "\(LogFormat.duration(started.duration(to: .now)))",
                        ])
                }
                return .commit
            }
            return identifier
        }
    }
}

/// What the store records about itself in `cloudstore_metadata` (a key-value table).
struct StoreMetadata {
    static let currentFormat = 1

    var format = StoreMetadata.currentFormat
    var storeIdentifier: UUID
    var schemaName: String
    var schemaVersion: Int
    var schemaHash: String
    /// The schema the store was last opened with, so a migration can diff it with the new one.
    var schema: Schema?
    /// All history transactions up to this number were purged.
    var historyPurgedThrough: Int64 = 0

    init(storeIdentifier: UUID, schema: Schema) {
        self.storeIdentifier = storeIdentifier
        self.schemaName = schema.name
        self.schemaVersion = schema.version
        self.schemaHash = schema.schemaHash
        self.schema = schema
    }

    static let creationStatements = [
        "CREATE TABLE cloudstore_metadata (key TEXT PRIMARY KEY NOT NULL, value) WITHOUT ROWID",
        """
        CREATE TABLE cloudstore_history_transaction (\
        token INTEGER PRIMARY KEY AUTOINCREMENT, timestamp INTEGER NOT NULL, author TEXT, context_name TEXT, \
        entities TEXT NOT NULL, change_count INTEGER NOT NULL, changes BLOB NOT NULL)
        """,
        "CREATE INDEX cloudstore_history_transaction_timestamp ON cloudstore_history_transaction(timestamp)",
    ]

    /// The store's metadata; nil for an empty database (no tables yet).
    static func read(_ db: Database, path: String) throws -> StoreMetadata? {
        let names = try String.fetchAll(
            db, sql: "SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name")
        if names.isEmpty { return nil }
        guard names.contains("cloudstore_metadata") else {
            let listed = names.prefix(5).joined(separator: ", ") + (names.count > 5 ? ", …" : "")
            throw StoreError(
                .notAStore,
                "\(path) is not a CloudStore store: it is a SQLite database without CloudStore's metadata (it holds \(listed)); CloudStore does not adopt existing databases, choose another path (the file was not modified)")
        }
        var values: [String: DatabaseValue] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT key, value FROM cloudstore_metadata") {
            values[row["key"]] = row["value"] as DatabaseValue
        }
        func text(_ key: String) throws -> String {
            guard let text = String.fromDatabaseValue(values[key] ?? .null) else {
                throw StoreError(.corrupt, "\(path): CloudStore's metadata lacks \"\(key)\"; restore the file from a backup")
            }
            return text
        }
        func integer(_ key: String) throws -> Int64 {
            guard let number = Int64.fromDatabaseValue(values[key] ?? .null) else {
                throw StoreError(.corrupt, "\(path): CloudStore's metadata lacks \"\(key)\"; restore the file from a backup")
            }
            return number
        }
        guard let identifier = UUID(text: try text("storeIdentifier")) else {
            throw StoreError(.corrupt, "\(path): CloudStore's metadata has a damaged store identifier; restore the file from a backup")
        }
        var schema: Schema?
        if let json = String.fromDatabaseValue(values["schema"] ?? .null) {
            schema = try? Schema.load(Data(json.utf8), source: "the schema stored in \(path)")
        }
        let schemaName = try text("schemaName")
        var metadata = StoreMetadata(
            storeIdentifier: identifier, schema: schema ?? Schema(name: schemaName, version: 1, entities: [EntityDescription]()))
        metadata.schema = schema
        metadata.format = Int(try integer("format"))
        metadata.schemaName = try text("schemaName")
        metadata.schemaVersion = Int(try integer("schemaVersion"))
        metadata.schemaHash = try text("schemaHash")
        metadata.historyPurgedThrough = (try? integer("historyPurgedThrough")) ?? 0
        return metadata
    }

    func write(_ db: Database) throws {
        let values: [(String, (any DatabaseValueConvertible)?)] = [
            ("format", format), ("storeIdentifier", storeIdentifier.uuidString), ("schemaName", schemaName),
            ("schemaVersion", schemaVersion), ("schemaHash", schemaHash),
            ("schema", try schema.map { String(decoding: try $0.fileData(), as: UTF8.self) }),
            ("historyPurgedThrough", historyPurgedThrough),
        ]
        for (key, value) in values {
            try db.execute(
                sql: "INSERT INTO cloudstore_metadata (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                arguments: [key, value])
        }
    }
}
