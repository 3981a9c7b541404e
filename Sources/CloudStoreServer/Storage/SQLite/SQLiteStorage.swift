import CloudStoreWire
import Crypto
import Foundation
import GRDB
import Logging
import ServiceLifecycle
import Synchronization

/// The embedded backend: one SQLite file per container (`<container>.sqlite`) in a directory.
///
/// Each file is a GRDB `DatabasePool` in WAL mode with `synchronous = FULL`, so a write the server
/// acknowledged survives a crash of the process *and* of the machine. GRDB serializes writers, which
/// gives the per-partition serialization ``ServerStorage`` asks for; reads run on a snapshot.
/// One server process owns a data directory: long polls are woken only by writes of this process
/// (run several instances on PostgreSQL instead).
final class SQLiteStorage: ServerStorage {
    let directory: URL
    let logger: Logger
    /// When released assets become removable.
    let assetLifetime: AssetLifetime
    /// The server's clock, for the assets a zone deletion releases.
    let clock: ServerClock
    private let pools = Mutex<[String: DatabasePool]>([:])
    /// Decoded schemas by container and environment (``schema(_:container:_:)``).
    private let schemas = Mutex<[String: CloudSchema]>([:])

    init(directory: URL, logger: Logger, assetLifetime: AssetLifetime = AssetLifetime(), clock: ServerClock = .system) {
        self.directory = directory
        self.logger = logger
        self.assetLifetime = assetLifetime
        self.clock = clock
    }

    func prepare() async throws {
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            throw ServerConfigurationError(
                "cannot create the data directory \(directory.path): \(error.localizedDescription); choose another with --data")
        }
    }

    func run(changes: ChangeBroker) async throws {
        try? await gracefulShutdown()
    }

    var replicaStatuses: [ReplicaStatus] { [] }

    func checkReachable() async throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory), isDirectory.boolValue,
            FileManager.default.isWritableFile(atPath: directory.path)
        else {
            throw ServerConfigurationError("the data directory \(directory.path) is missing or not writable")
        }
    }

    /// The pool of a container's file, opened (and migrated) on first use.
    /// A short read (a few rows by index) on the calling thread: cheaper than the two thread
    /// switches of GRDB's asynchronous read for the reads every long poll and sync request makes.
    /// Reads that may take long (pages of records, queries, assets) stay asynchronous, so they do
    /// not hold one of the few threads that run every request.
    func readNow<T>(_ container: String, _ body: (Database) throws -> T) throws -> T {
        try pool(container).read(body)
    }

    func pool(_ container: String) throws -> DatabasePool {
        try pools.withLock { pools in
            if let pool = pools[container] { return pool }
            var configuration = Configuration()
            configuration.busyMode = .timeout(30)
            let logger = logger
            let tracesSQL = logger.logLevel <= .trace
            configuration.prepareDatabase { db in
                try db.execute(sql: "PRAGMA synchronous = FULL")
                if tracesSQL {
                    db.trace(options: .statement) { event in logger.trace("sql", metadata: ["sql": "\(event)"]) }
                }
            }
            let path = directory.appendingPathComponent("\(container).sqlite").path
            let pool = try DatabasePool(path: path, configuration: configuration)
            // GRDB sets `synchronous = NORMAL` on the writer when it turns WAL on, after
            // `prepareDatabase`: set it again, on the connection whose commits it governs.
            try pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
            try Self.migrator.migrate(pool)
            logger.notice("container opened", metadata: ["container": "\(container)", "path": "\(path)"])
            pools[container] = pool
            return pool
        }
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE cloudstore_partition (
                        id INTEGER PRIMARY KEY,
                        environment TEXT NOT NULL,
                        scope TEXT NOT NULL,
                        owner TEXT NOT NULL,
                        db_seq INTEGER NOT NULL DEFAULT 0,
                        UNIQUE (environment, scope, owner));
                    CREATE TABLE cloudstore_zone (
                        partition_id INTEGER NOT NULL REFERENCES cloudstore_partition(id),
                        name TEXT NOT NULL,
                        seq INTEGER NOT NULL DEFAULT 0,
                        db_seq INTEGER NOT NULL DEFAULT 0,
                        incarnation INTEGER NOT NULL DEFAULT 0,
                        purged_through INTEGER NOT NULL DEFAULT 0,
                        deleted INTEGER NOT NULL DEFAULT 0,
                        PRIMARY KEY (partition_id, name));
                    CREATE INDEX cloudstore_zone_by_db_seq ON cloudstore_zone (partition_id, db_seq);
                    CREATE TABLE cloudstore_record (
                        partition_id INTEGER NOT NULL,
                        zone TEXT NOT NULL,
                        name TEXT NOT NULL,
                        type TEXT NOT NULL,
                        seq INTEGER NOT NULL,
                        deleted INTEGER NOT NULL DEFAULT 0,
                        deleted_at INTEGER,
                        content TEXT,
                        PRIMARY KEY (partition_id, zone, name));
                    CREATE INDEX cloudstore_record_by_seq ON cloudstore_record (partition_id, zone, seq);
                    CREATE INDEX cloudstore_record_by_type ON cloudstore_record (partition_id, zone, type);
                    CREATE INDEX cloudstore_record_tombstones ON cloudstore_record (partition_id, zone, deleted_at)
                        WHERE deleted = 1;
                    CREATE TABLE cloudstore_reference (
                        partition_id INTEGER NOT NULL,
                        zone TEXT NOT NULL,
                        source TEXT NOT NULL,
                        target TEXT NOT NULL,
                        PRIMARY KEY (partition_id, zone, source, target));
                    CREATE INDEX cloudstore_reference_by_target ON cloudstore_reference (partition_id, zone, target);
                    CREATE TABLE cloudstore_schema (
                        environment TEXT PRIMARY KEY,
                        version INTEGER NOT NULL,
                        content TEXT NOT NULL);
                    """)
        }
        migrator.registerMigration("v2-assets") { db in
            try db.execute(
                sql: """
                    CREATE TABLE cloudstore_asset_upload (
                        id TEXT PRIMARY KEY,
                        \(Self.assetBindingColumnsSQL),
                        expires_at INTEGER NOT NULL);
                    CREATE INDEX cloudstore_asset_upload_by_expiry ON cloudstore_asset_upload (expires_at);
                    CREATE TABLE cloudstore_asset (
                        id TEXT PRIMARY KEY,
                        \(Self.assetBindingColumnsSQL),
                        receipt TEXT UNIQUE,
                        checksum TEXT NOT NULL DEFAULT '',
                        size INTEGER NOT NULL DEFAULT 0,
                        state TEXT NOT NULL,
                        expires_at INTEGER NOT NULL,
                        removable_at INTEGER);
                    CREATE INDEX cloudstore_asset_by_record ON cloudstore_asset (environment, scope, owner, zone, record)
                        WHERE state = 'saved';
                    CREATE INDEX cloudstore_asset_removable ON cloudstore_asset (removable_at)
                        WHERE removable_at IS NOT NULL;
                    """)
        }
        registerShareMigration(&migrator)
        registerUniqueKeyMigration(&migrator)
        registerSubscriptionMigration(&migrator)
        migrator.registerMigration("v6-secrets") { db in
            try db.execute(sql: "CREATE TABLE cloudstore_secret (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
        }
        return migrator
    }

    func secret(_ name: String, container: String) async throws -> [UInt8]? {
        let made = Data(SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }).base64EncodedString()
        let stored = try await pool(container).write { db in
            try db.execute(sql: "INSERT OR IGNORE INTO cloudstore_secret (name, value) VALUES (?, ?)", arguments: [name, made])
            return try String.fetchOne(db, sql: "SELECT value FROM cloudstore_secret WHERE name = ?", arguments: [name])
        }
        guard let stored, let bytes = Data(base64Encoded: stored), bytes.count == 32 else {
            throw DatabaseError(message: "the stored secret \(name) is not 32 bytes in base64")
        }
        return Array(bytes)
    }

    // MARK: - Partitions and zones

    /// The partition's row ID, or nil when nothing was ever written to it.
    func partitionID(_ db: Database, _ partition: DatabasePartition) throws -> Int64? {
        try Int64.fetchOne(
            db.cachedStatement(sql: "SELECT id FROM cloudstore_partition WHERE environment = ? AND scope = ? AND owner = ?"),
            arguments: [partition.environment.rawValue, partition.scope.rawValue, partition.owner])
    }

    /// The partition's row ID, creating the row.
    func ensurePartition(_ db: Database, _ partition: DatabasePartition) throws -> Int64 {
        try db.cachedStatement(
            sql: "INSERT INTO cloudstore_partition (environment, scope, owner) VALUES (?, ?, ?) ON CONFLICT DO NOTHING"
        ).execute(arguments: [partition.environment.rawValue, partition.scope.rawValue, partition.owner])
        guard let id = try partitionID(db, partition) else { throw DatabaseError(message: "partition row vanished") }
        return id
    }

    /// Raises the partition's database sequence and answers the new value.
    func bumpDatabaseSeq(_ db: Database, _ partitionID: Int64) throws -> Int64 {
        try db.cachedStatement(sql: "UPDATE cloudstore_partition SET db_seq = db_seq + 1 WHERE id = ?")
            .execute(arguments: [partitionID])
        return try Int64.fetchOne(db.cachedStatement(sql: "SELECT db_seq FROM cloudstore_partition WHERE id = ?"), arguments: [partitionID])
            ?? 0
    }

    static let zoneColumns = "name, seq, db_seq, incarnation, purged_through, deleted"

    static func zone(_ row: Row) -> StoredZone {
        StoredZone(
            name: row["name"], seq: row["seq"], dbSeq: row["db_seq"], incarnation: row["incarnation"],
            purgedThrough: row["purged_through"], deleted: row["deleted"])
    }

    /// A zone's row, live or deleted.
    func zoneRow(_ db: Database, _ partitionID: Int64, _ name: String) throws -> StoredZone? {
        try Row.fetchOne(
            db.cachedStatement(sql: "SELECT \(Self.zoneColumns) FROM cloudstore_zone WHERE partition_id = ? AND name = ?"),
            arguments: [partitionID, name]
        ).map(Self.zone)
    }

    /// A live zone; the default zone always, pristine when it has no row.
    func liveZone(_ db: Database, _ partitionID: Int64?, _ name: String) throws -> StoredZone? {
        StoredZone.live(try partitionID.flatMap { try zoneRow(db, $0, name) }, name: name)
    }

    func zones(in partition: DatabasePartition) async throws -> [StoredZone] {
        try await pool(partition.container).read { db in
            var zones: [StoredZone] = []
            if let id = try self.partitionID(db, partition) {
                zones = try Row.fetchAll(
                    db,
                    sql: "SELECT \(Self.zoneColumns) FROM cloudstore_zone WHERE partition_id = ? AND deleted = 0 ORDER BY name",
                    arguments: [id]
                ).map(Self.zone)
            }
            return StoredZone.defaultZoneFirst(zones)
        }
    }

    func zones(named names: [String], in partition: DatabasePartition) async throws -> [String: StoredZone] {
        try await pool(partition.container).read { db in
            let id = try self.partitionID(db, partition)
            var found: [String: StoredZone] = [:]
            for name in Set(names) {
                found[name] = try self.liveZone(db, id, name)
            }
            return found
        }
    }

    func modifyZones(_ changes: [ZoneChange], in partition: DatabasePartition) async throws -> ZonesModification {
        try await pool(partition.container).write { db in
            let id = try self.ensurePartition(db, partition)
            var sharedDatabases = Set<String>()
            let zones = try changes.map { change -> StoredZone? in
                switch change {
                case .create(let name):
                    if let live = try self.liveZone(db, id, name) { return live }
                    let dbSeq = try self.bumpDatabaseSeq(db, id)
                    // A recreated zone keeps its sequence (so change tags never repeat) and starts a new
                    // incarnation (so tokens of the deleted zone expire).
                    try db.execute(
                        sql: """
                            INSERT INTO cloudstore_zone (partition_id, name, seq, db_seq, incarnation, purged_through)
                            VALUES (?, ?, 0, ?, ?, 0)
                            ON CONFLICT (partition_id, name) DO UPDATE SET
                                deleted = 0, db_seq = excluded.db_seq, incarnation = excluded.incarnation,
                                purged_through = seq
                            """,
                        arguments: [id, name, dbSeq, dbSeq])
                    return try self.zoneRow(db, id, name)
                case .delete(let name):
                    guard let live = try self.zoneRow(db, id, name), !live.deleted else { return nil }
                    let dbSeq = try self.bumpDatabaseSeq(db, id)
                    try db.execute(
                        sql: "DELETE FROM cloudstore_record WHERE partition_id = ? AND zone = ?", arguments: [id, name])
                    try db.execute(
                        sql: "DELETE FROM cloudstore_reference WHERE partition_id = ? AND zone = ?", arguments: [id, name])
                    try db.execute(
                        sql: "DELETE FROM cloudstore_record_key WHERE partition_id = ? AND zone = ?", arguments: [id, name])
                    try self.releaseAssets(
                        db, of: partition.zone(name), records: nil, keeping: [],
                        removableAt: self.assetLifetime.removableAt(after: .recordDeleted(at: self.clock.now())))
                    sharedDatabases.formUnion(try self.stopShare(db, id, partition.zone(name)))
                    try db.execute(
                        sql: "UPDATE cloudstore_zone SET deleted = 1, db_seq = ? WHERE partition_id = ? AND name = ?",
                        arguments: [dbSeq, id, name])
                    return try self.zoneRow(db, id, name)
                }
            }
            return ZonesModification(zones: zones, sharedDatabases: sharedDatabases)
        }
    }

    func databaseChanges(in partition: DatabasePartition, after dbSeq: Int64, limit: Int) async throws
        -> DatabaseChangesPage
    {
        try readNow(partition.container) { db in
            guard let id = try self.partitionID(db, partition) else { return DatabaseChangesPage(dbSeq: 0, zones: []) }
            let current = try Int64.fetchOne(db, sql: "SELECT db_seq FROM cloudstore_partition WHERE id = ?", arguments: [id])
            if partition.scope == .shared {
                return DatabaseChangesPage(
                    dbSeq: current ?? 0, zones: try self.sharedDatabaseChanges(db, id, after: dbSeq, limit: limit))
            }
            let zones = try Row.fetchAll(
                db,
                sql: """
                    SELECT \(Self.zoneColumns) FROM cloudstore_zone WHERE partition_id = ? AND db_seq > ?
                    ORDER BY db_seq LIMIT ?
                    """,
                arguments: [id, dbSeq, limit + 1]
            ).map(Self.zone)
            return DatabaseChangesPage(dbSeq: current ?? 0, zones: zones)
        }
    }

    // MARK: - Schema

    func schema(container: String, environment: CloudEnvironment) async throws -> CloudSchema {
        try await pool(container).read { db in try self.schema(db, container: container, environment) }
    }

    /// The stored schema, decoded once per version (every record write reads it): a version is
    /// never stored twice with different content.
    func schema(_ db: Database, container: String, _ environment: CloudEnvironment) throws -> CloudSchema {
        guard
            let version = try Int.fetchOne(
                db.cachedStatement(sql: "SELECT version FROM cloudstore_schema WHERE environment = ?"),
                arguments: [environment.rawValue])
        else { return .empty }
        let key = "\(container)|\(environment.rawValue)"
        if let cached = schemas.withLock({ $0[key] }), cached.version == version { return cached }
        let content =
            try String.fetchOne(
                db.cachedStatement(sql: "SELECT content FROM cloudstore_schema WHERE environment = ?"),
                arguments: [environment.rawValue]) ?? ""
        var schema = try WireCoding.decode(CloudSchema.self, from: Data(content.utf8))
        schema.version = version
        schemas.withLock { $0[key] = schema }
        return schema
    }

    static func storeSchema(_ db: Database, _ schema: CloudSchema, _ environment: CloudEnvironment) throws {
        var content = schema
        content.version = nil
        try db.execute(
            sql: """
                INSERT INTO cloudstore_schema (environment, version, content) VALUES (?, ?, ?)
                ON CONFLICT (environment) DO UPDATE SET version = excluded.version, content = excluded.content
                """,
            arguments: [environment.rawValue, schema.version ?? 0, String(decoding: try WireCoding.encode(content), as: UTF8.self)])
    }

    func updateSchema<Decision: Sendable>(
        container: String, environment: CloudEnvironment,
        _ change: @Sendable (CloudSchema) throws -> (CloudSchema?, Decision)
    ) async throws -> (CloudSchema, Decision) {
        try await pool(container).write { db in
            let current = try self.schema(db, container: container, environment)
            let (changed, decision) = try change(current)
            guard var changed else { return (current, decision) }
            changed.version = (current.version ?? 0) + 1
            try self.rebuildUniqueKeys(db, environment, from: current, to: changed)
            try Self.storeSchema(db, changed, environment)
            return (changed, decision)
        }
    }
}
