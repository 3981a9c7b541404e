import CloudStoreWire
import Foundation
import GRDB

/// Mirroring's own tables in the store file, written in the same transactions as the objects they
/// describe:
///
/// - `cloudstore_record_metadata`: one row per record this device knows on the server or has to
///   upload (``RecordMetadata``): the queue of pending uploads, with the server's refusal or the
///   last attempts' error of each that failed.
/// - `cloudstore_mirror_state`: key → value (the sync engines' states, the account, the last import,
///   export and failure, the upload revision counter; ``MirrorStateKey``).
/// - `cloudstore_mirror_unresolved_reference`: to-one references whose target has not arrived yet.
/// - `cloudstore_mirror_conflict`: the conflict log, every value that lost.
/// - `cloudstore_mirror_foreign_record`: records of types this schema does not know, kept verbatim.
/// - `cloudstore_mirror_kept_aside`: fetched records a local object's unique key keeps from being
///   applied, with their zone, applied again after each fetch (``MirrorWrite/applyKeptAside()``).
/// - `cloudstore_mirror_awaiting_decryption`: fetched records with encrypted fields this device
///   cannot open: the key has not reached it (`problem` says which), applied once it does
///   (``MirrorWrite/applyAwaitingDecryption()``), or a field that failed authentication
///   (refused; replaced by the record's next version).
/// - `cloudstore_mirror_sealed_asset`: for a record's encrypted asset field (in its zone: `''` for
///   the primary zone's name and for the owner of the user's own zones), the sealed file this
///   device last sealed or opened (its checksum) and the plain bytes it holds of it: a version of
///   the record whose field still names that file neither downloads nor opens it again.
/// - `cloudstore_mirror_zone`: the zones mirrored (``MirrorZone``): the primary zone, owned shares
///   and zones shared with this user, with where each stands on the server, the decision the app
///   is asked about its local data, and a share's record and pending change.
/// - `cloudstore_mirror_zone_key`: the zone key records fetched from shared zones (``ZoneKeyRecord``),
///   as the server holds them (wrapped, granted: no key in the clear), which the keyring learns
///   its keys from; they go with their zone's row.
/// - `cloudstore_mirror_moved_record`: records to delete from the zone an object moved out of
///   (into a share's zone, or back), pending uploads like any other.
/// - `cloudstore_mirror_share_activity`: who joined, left, was invited or removed, per share
///   (``PersistentCloudContainer/ShareActivity``).
enum MirrorTables {
    /// The tables' migrations, in order (GRDB's `DatabaseMigrator`, whose `grdb_migrations` table
    /// records which ran). Each runs once, in a transaction of its own, before a container starts
    /// mirroring the store; a store opened for inspection is read only once all of them ran
    /// (``checkReadable(_:path:)``).
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("mirror-1") { db in try createFirstLayout(db) }
        migrator.registerMigration("mirror-2-zone-rows") { db in try keepZoneFactsInZoneRows(db) }
        return migrator
    }

    /// Brings the tables to their layout before this migrator: they are created where missing, and
    /// a store an earlier version wrote gains the columns added since, NULL in its rows. A store from
    /// before sharing has every record in the primary zone (no zone name or owner); one from before
    /// a share's end waited for the app has no zone waiting (`ended`); one from before the times of
    /// server versions were kept knows none (`server_modified`); one from before uploads' retries
    /// were kept knows none (`retry`); one from before the creation times of copies were kept knows
    /// none (`server_created`, `written_here`).
    private static func createFirstLayout(_ db: Database) throws {
        try db.execute(
            sql: """
                CREATE TABLE IF NOT EXISTS cloudstore_mirror_state (key TEXT PRIMARY KEY NOT NULL, value BLOB);
                CREATE TABLE IF NOT EXISTS cloudstore_record_metadata (
                    record_name TEXT PRIMARY KEY NOT NULL,
                    entity TEXT NOT NULL,
                    change_tag TEXT,
                    may_be_on_server INTEGER NOT NULL DEFAULT 0,
                    ancestor BLOB,
                    unknown_fields BLOB,
                    pending_upload BLOB,
                    upload_revision INTEGER,
                    refusal BLOB,
                    link_relationship TEXT,
                    link_source TEXT,
                    link_target TEXT);
                CREATE INDEX IF NOT EXISTS cloudstore_record_metadata_pending_upload
                    ON cloudstore_record_metadata (upload_revision, record_name) WHERE pending_upload IS NOT NULL;
                CREATE INDEX IF NOT EXISTS cloudstore_record_metadata_link_source
                    ON cloudstore_record_metadata (link_source) WHERE link_source IS NOT NULL;
                CREATE INDEX IF NOT EXISTS cloudstore_record_metadata_link_target
                    ON cloudstore_record_metadata (link_target) WHERE link_target IS NOT NULL;
                CREATE TABLE IF NOT EXISTS cloudstore_mirror_unresolved_reference (
                    entity TEXT NOT NULL,
                    id TEXT NOT NULL,
                    relationship TEXT NOT NULL,
                    target TEXT NOT NULL,
                    PRIMARY KEY (entity, id, relationship));
                CREATE INDEX IF NOT EXISTS cloudstore_mirror_unresolved_reference_target
                    ON cloudstore_mirror_unresolved_reference (target);
                CREATE TABLE IF NOT EXISTS cloudstore_mirror_conflict (
                    sequence INTEGER PRIMARY KEY AUTOINCREMENT,
                    date INTEGER NOT NULL,
                    entity TEXT NOT NULL,
                    id TEXT NOT NULL,
                    property TEXT NOT NULL,
                    losing_side TEXT NOT NULL,
                    losing_value BLOB NOT NULL,
                    winning_value BLOB NOT NULL,
                    policy TEXT NOT NULL);
                CREATE TABLE IF NOT EXISTS cloudstore_mirror_foreign_record (
                    record_name TEXT PRIMARY KEY NOT NULL,
                    record BLOB NOT NULL);
                CREATE TABLE IF NOT EXISTS cloudstore_mirror_kept_aside (
                    record_name TEXT PRIMARY KEY NOT NULL,
                    zone_name TEXT NOT NULL,
                    zone_owner TEXT NOT NULL DEFAULT '',
                    record BLOB NOT NULL);
                CREATE TABLE IF NOT EXISTS cloudstore_mirror_awaiting_decryption (
                    record_name TEXT PRIMARY KEY NOT NULL,
                    zone_name TEXT NOT NULL,
                    zone_owner TEXT NOT NULL DEFAULT '',
                    record BLOB NOT NULL,
                    refused INTEGER NOT NULL,
                    problem TEXT NOT NULL);
                CREATE TABLE IF NOT EXISTS cloudstore_mirror_sealed_asset (
                    zone_name TEXT NOT NULL,
                    zone_owner TEXT NOT NULL,
                    record_name TEXT NOT NULL,
                    field TEXT NOT NULL,
                    sealed_checksum TEXT NOT NULL,
                    sealed_size INTEGER NOT NULL,
                    checksum TEXT NOT NULL,
                    size INTEGER NOT NULL,
                    PRIMARY KEY (record_name, field, zone_name, zone_owner));
                CREATE INDEX IF NOT EXISTS cloudstore_mirror_sealed_asset_sealed ON cloudstore_mirror_sealed_asset (sealed_checksum);
                CREATE TABLE IF NOT EXISTS cloudstore_mirror_zone (
                    zone_name TEXT NOT NULL,
                    zone_owner TEXT NOT NULL DEFAULT '',
                    role TEXT NOT NULL,
                    permission TEXT,
                    share BLOB,
                    pending_share BLOB,
                    saved INTEGER NOT NULL DEFAULT 0,
                    root_entity TEXT,
                    root_id TEXT,
                    PRIMARY KEY (zone_owner, zone_name));
                CREATE TABLE IF NOT EXISTS cloudstore_mirror_zone_key (
                    zone_name TEXT NOT NULL,
                    zone_owner TEXT NOT NULL DEFAULT '',
                    record_name TEXT NOT NULL,
                    record BLOB NOT NULL,
                    PRIMARY KEY (zone_owner, zone_name, record_name));
                CREATE TABLE IF NOT EXISTS cloudstore_mirror_moved_record (
                    sequence INTEGER PRIMARY KEY AUTOINCREMENT,
                    record_name TEXT NOT NULL,
                    zone_name TEXT,
                    zone_owner TEXT,
                    change_tag TEXT,
                    ancestor BLOB,
                    upload_revision INTEGER NOT NULL);
                CREATE INDEX IF NOT EXISTS cloudstore_mirror_moved_record_name
                    ON cloudstore_mirror_moved_record (record_name);
                CREATE TABLE IF NOT EXISTS cloudstore_mirror_share_activity (
                    sequence INTEGER PRIMARY KEY AUTOINCREMENT,
                    date INTEGER NOT NULL,
                    zone_name TEXT NOT NULL,
                    zone_owner TEXT,
                    user TEXT,
                    change TEXT NOT NULL,
                    permission TEXT);
                CREATE TABLE IF NOT EXISTS cloudstore_mirror_public_creator (
                    record_name TEXT PRIMARY KEY NOT NULL,
                    creator TEXT NOT NULL);
                """)
        let addedColumns = [
            ("cloudstore_record_metadata", "zone_name", "TEXT"),
            ("cloudstore_record_metadata", "zone_owner", "TEXT"),
            ("cloudstore_mirror_zone", "ended", "BLOB"),
            ("cloudstore_record_metadata", "server_modified", "INTEGER"),
            ("cloudstore_record_metadata", "retry", "BLOB"),
            ("cloudstore_record_metadata", "server_created", "INTEGER"),
            ("cloudstore_record_metadata", "written_here", "INTEGER NOT NULL DEFAULT 0"),
        ]
        for (table, column, type) in addedColumns where try !db.columns(in: table).contains(where: { $0.name == column }) {
            try db.execute(sql: "ALTER TABLE \(table) ADD COLUMN \(column) \(type)")
        }
        try db.execute(
            sql: """
                CREATE INDEX IF NOT EXISTS cloudstore_record_metadata_zone
                    ON cloudstore_record_metadata (zone_owner, zone_name) WHERE zone_name IS NOT NULL
                """)
    }

    /// Each zone's facts in its row: where it stands on the server (`server_state`, for the shares'
    /// zones a Bool `saved` before), the decision the app is asked about its local data
    /// (`decision`, `ended` before: only a share's end), the server's refusal of its last share
    /// change (`share_refusal`, kept in memory before). The primary zone gets a row of its own
    /// when a container opens the store (``LegacyMirrorLayout/movePrimaryZoneIntoItsRow(_:named:)``),
    /// which knows its name. The last failure keeps its code and retry time (`last_error`, a
    /// message and a date under two keys before).
    private static func keepZoneFactsInZoneRows(_ db: Database) throws {
        try db.execute(
            sql: """
                ALTER TABLE cloudstore_mirror_zone ADD COLUMN server_state TEXT NOT NULL DEFAULT 'saved';
                UPDATE cloudstore_mirror_zone SET server_state = CASE WHEN saved THEN 'saved' ELSE 'unsaved' END;
                ALTER TABLE cloudstore_mirror_zone DROP COLUMN saved;
                ALTER TABLE cloudstore_mirror_zone RENAME COLUMN ended TO decision;
                ALTER TABLE cloudstore_mirror_zone ADD COLUMN share_refusal BLOB;
                """)
        let ledger = Ledger(db)
        if let message = try ledger.state(.lastError, as: String.self) {
            let date = try ledger.state(.lastErrorDateBeforeMirror2, as: Date.self) ?? Date()
            try ledger.setState(.lastError, encoding: MirrorFailure(PersistentCloudContainer.SyncFailure(message: message, date: date)))
        }
        try ledger.setState(.lastErrorDateBeforeMirror2, nil)
    }

    /// Brings the mirror's tables up to date, each migration in a transaction of its own: called
    /// before a container starts mirroring the store.
    static func migrate(_ store: PersistentStore) throws {
        try store.withStoreErrors("preparing the mirror's tables") { try migrator.migrate(store.pool) }
    }

    /// Throws ``StoreError/Code/needsUpgrade`` when a store opened for inspection has metadata a
    /// container has to bring up to date first: the previous release's layout, or tables a
    /// migration this version reads has not reached yet (``migrator``).
    static func checkReadable(_ db: Database, path: String) throws {
        if try LegacyMirrorLayout.isPresent(db) {
            throw StoreError(
                .needsUpgrade,
                "\(path) holds mirroring metadata in the layout of the previous CloudStore release, whose unsent changes are counted as pending uploads only once a PersistentCloudContainer has opened the store; open it through its container once, then read its status")
        }
        guard try exists(db) else { return }
        let missing = try Set(migrator.migrations).subtracting(migrator.appliedIdentifiers(db))
        if !missing.isEmpty {
            throw StoreError(
                .needsUpgrade,
                "\(path) holds mirroring metadata of an earlier CloudStore version (it lacks \(missing.sorted().joined(separator: ", "))); open it through its container once, which brings it up to date, then read it")
        }
    }

    /// Whether the store has mirroring tables (a store a container has opened).
    static func exists(_ db: Database) throws -> Bool {
        try db.tableExists("cloudstore_mirror_state")
    }

    /// The JSON of a metadata value, keys sorted: written straight to bytes for the values every
    /// save and acknowledgement writes (attribute values, fields, pending uploads), through the
    /// encoder otherwise (``WireCoding/encode(_:numbersAsStrings:)``).
    static func encode<T: Encodable>(_ value: T) throws -> Data { try WireCoding.encode(value) }

    /// The value of a metadata JSON: read straight from the bytes for the values every upload and
    /// acknowledgement reads (pending uploads), through the decoder otherwise
    /// (``WireCoding/decode(_:from:)``).
    static func decode<T: Decodable>(_ type: T.Type, _ data: Data) throws -> T {
        try WireCoding.decode(type, from: data)
    }
}

// MARK: - State

/// Keys of `cloudstore_mirror_state`.
enum MirrorStateKey: String {
    /// The private database engine's `State.Serialization`, as JSON: tokens and zone bookkeeping.
    case engineState = "engine_state"
    /// The shared database engine's `State.Serialization`.
    case sharedEngineState = "shared_engine_state"
    /// The public database engine's `State.Serialization`.
    case publicEngineState = "public_engine_state"
    /// The user record name the mirrored data belongs to.
    case userRecordName = "user"
    /// When an import last ended without a failure.
    case lastImport = "last_import"
    /// When an export last ended without a failure.
    case lastExport = "last_export"
    /// The last failure (``MirrorFailure``), until it is past (``MirrorFailure/isPast(lastImport:lastExport:pendingUploads:)``).
    case lastError = "last_error"
    /// "signedOut" while the server rejects the credentials.
    case accountStatus = "account_status"
    /// This device's identifier, sent with every request.
    case deviceID = "device_id"
    /// The last upload revision handed out (``Ledger/revision()``).
    case uploadRevision = "upload_revision"
    /// The entities mirrored in the public database (sorted names), for the recorder of another
    /// process's plain store.
    case publicEntities = "public_entities"
    /// Where the primary zone stood on the server before it had a row (``ZoneServerState``).
    case primaryZoneBeforeMirror2 = "primary_zone"
    /// The decision the app was asked for before the primary zone had a row.
    case localDataDecisionBeforeMirror2 = "local_data_decision"
    /// When the last failure happened, before ``lastError`` kept it.
    case lastErrorDateBeforeMirror2 = "last_error_date"
}

/// The last failure as the store keeps it (``MirrorStateKey/lastError``), written in the
/// transaction that learns it.
struct MirrorFailure: Codable, Sendable, Hashable {
    var code: String?
    var message: String
    var retryAfter: Double?
    var recordName: String?
    var date: Date

    init(_ failure: PersistentCloudContainer.SyncFailure) {
        code = failure.code?.rawValue
        message = failure.message
        retryAfter = failure.retryAfter
        recordName = failure.recordName
        date = failure.date
    }

    var failure: PersistentCloudContainer.SyncFailure {
        PersistentCloudContainer.SyncFailure(
            code: code.flatMap(ServerErrorCode.init(rawValue:)), message: message, retryAfter: retryAfter, recordName: recordName,
            date: date)
    }

    /// Whether the failure is past: since it happened, an import ended without a failure, and an
    /// export did too or nothing waits to go up.
    func isPast(lastImport: Date?, lastExport: Date?, pendingUploads: Int) -> Bool {
        guard let lastImport, lastImport > date else { return false }
        return pendingUploads == 0 || (lastExport.map { $0 > date } ?? false)
    }
}

extension Database {
    /// Whether a fetched record waits aside for a unique key (``MirrorWrite/applyKeptAside()``).
    func hasKeptAside() throws -> Bool {
        try integer("SELECT 1 FROM cloudstore_mirror_kept_aside LIMIT 1") != nil
    }
}

// MARK: - Unresolved references

extension Database {
    /// Remembers that `entity.relationship` of `id` points at `target`, which has not arrived.
    func addUnresolvedReference(entity: String, id: UUID, relationship: String, target: UUID) throws {
        try execute(
            sql: "INSERT OR REPLACE INTO cloudstore_mirror_unresolved_reference (entity, id, relationship, target) VALUES (?, ?, ?, ?)",
            arguments: [entity, id.uuidString, relationship, target.uuidString])
    }

    func removeUnresolvedReferences(of entity: String, id: UUID, relationship: String? = nil) throws {
        if let relationship {
            try cachedStatement(
                sql: "DELETE FROM cloudstore_mirror_unresolved_reference WHERE entity = ? AND id = ? AND relationship = ?"
            ).execute(arguments: [entity, id.uuidString, relationship])
        } else {
            try cachedStatement(sql: "DELETE FROM cloudstore_mirror_unresolved_reference WHERE entity = ? AND id = ?")
                .execute(arguments: [entity, id.uuidString])
        }
    }

    /// The references waiting for `target`, removed from the table.
    func takeUnresolvedReferences(to target: UUID) throws -> [(entity: String, id: UUID, relationship: String)] {
        var references: [(entity: String, id: UUID, relationship: String)] = []
        var found = false
        try each(
            "SELECT entity, id, relationship FROM cloudstore_mirror_unresolved_reference WHERE target = ?", [.uuid(target)]
        ) { statement in
            found = true
            if let id = columnUUID(statement, 1) { references.append((columnText(statement, 0), id, columnText(statement, 2))) }
        }
        guard found else { return [] }
        try cachedStatement(sql: "DELETE FROM cloudstore_mirror_unresolved_reference WHERE target = ?")
            .execute(arguments: [target.uuidString])
        return references
    }

    /// The references of an object that wait for their target.
    func unresolvedReferences(of entity: String, id: UUID) throws -> [(relationship: String, target: UUID)] {
        var references: [(relationship: String, target: UUID)] = []
        try each(
            "SELECT relationship, target FROM cloudstore_mirror_unresolved_reference WHERE entity = ? AND id = ?",
            [.string(entity), .uuid(id)]
        ) { statement in
            if let target = columnUUID(statement, 1) { references.append((columnText(statement, 0), target)) }
        }
        return references
    }
}

// MARK: - Conflict log

extension Database {
    func log(_ conflict: ConflictRecord) throws {
        try execute(
            sql: """
                INSERT INTO cloudstore_mirror_conflict
                (date, entity, id, property, losing_side, losing_value, winning_value, policy)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                conflict.date.millisecondsSince1970, conflict.entityName, conflict.objectID.uuidString,
                conflict.property, conflict.losingSide.rawValue, try MirrorTables.encode(conflict.losingValue),
                try MirrorTables.encode(conflict.winningValue), conflict.policy,
            ])
    }

    func conflicts(after sequence: Int64, limit: Int?) throws -> [ConflictRecord] {
        let rows = try Row.fetchAll(
            self,
            sql: "SELECT * FROM cloudstore_mirror_conflict WHERE sequence > ? ORDER BY sequence LIMIT ?",
            arguments: [sequence, limit ?? -1])
        return try rows.map { row in
            ConflictRecord(
                sequence: row["sequence"], date: Date(millisecondsSince1970: row["date"]), entityName: row["entity"],
                objectID: UUID(text: row["id"]) ?? UUID(), property: row["property"],
                losingSide: ConflictRecord.Side(rawValue: row["losing_side"]) ?? .local,
                losingValue: try MirrorTables.decode(AttributeValue.self, row["losing_value"]),
                winningValue: try MirrorTables.decode(AttributeValue.self, row["winning_value"]),
                policy: row["policy"])
        }
    }
}
