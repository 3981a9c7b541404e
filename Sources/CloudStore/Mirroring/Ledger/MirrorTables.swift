import CloudStoreWire
import Foundation
import GRDB

/// Mirroring's own tables in the store file, written in the same transactions as the objects they
/// describe:
///
/// - `cloudstore_record_metadata`: one row per record this device knows on the server or has to
///   upload (``RecordMetadata``): the queue of pending uploads, with the server's refusal or the
///   last attempts' error of each that failed.
/// - `cloudstore_mirror_state`: key → value (the sync engine's tokens, the account, the zone, the
///   last import and export, the upload revision counter).
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
/// - `cloudstore_mirror_zone`: the zones mirrored besides the primary one (``MirrorZone``): owned
///   shares and zones shared with this user, with their share records and pending share changes.
/// - `cloudstore_mirror_zone_key`: the zone key records fetched from shared zones (``ZoneKeyRecord``),
///   as the server holds them (wrapped, granted: no key in the clear), which the keyring learns
///   its keys from; they go with their zone's row.
/// - `cloudstore_mirror_moved_record`: records to delete from the zone an object moved out of
///   (into a share's zone, or back), pending uploads like any other.
/// - `cloudstore_mirror_share_activity`: who joined, left, was invited or removed, per share
///   (``PersistentCloudContainer/ShareActivity``).
enum MirrorTables {
    /// The unit-of-work observer a mirrored store requires (``PendingUploadRecorder``).
    static let observerName = "cloudstore.mirroring"

    static func create(_ db: Database) throws {
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
        for added in try missingColumns(db) {
            try db.execute(sql: "ALTER TABLE \(added.table) ADD COLUMN \(added.column) \(added.type)")
        }
        try db.execute(
            sql: """
                CREATE INDEX IF NOT EXISTS cloudstore_record_metadata_zone
                    ON cloudstore_record_metadata (zone_owner, zone_name) WHERE zone_name IS NOT NULL
                """)
    }

    /// A column added to a metadata table after the table's first layout.
    struct AddedColumn: Hashable {
        var table: String
        var column: String
        var type: String
    }

    /// The columns added after the tables' first layout, in the order they came; each is NULL in
    /// the rows of a store from before it. A store from before sharing has every record in the
    /// primary zone (no zone name or owner); one from before a share's end waited for the app has
    /// no zone waiting (`ended`); one from before the times of server versions were kept knows
    /// none (`server_modified`); one from before uploads' retries were kept knows none (`retry`);
    /// one from before the creation times of copies were kept knows none (`server_created`,
    /// `written_here`).
    static let addedColumns = [
        AddedColumn(table: "cloudstore_record_metadata", column: "zone_name", type: "TEXT"),
        AddedColumn(table: "cloudstore_record_metadata", column: "zone_owner", type: "TEXT"),
        AddedColumn(table: "cloudstore_mirror_zone", column: "ended", type: "BLOB"),
        AddedColumn(table: "cloudstore_record_metadata", column: "server_modified", type: "INTEGER"),
        AddedColumn(table: "cloudstore_record_metadata", column: "retry", type: "BLOB"),
        AddedColumn(table: "cloudstore_record_metadata", column: "server_created", type: "INTEGER"),
        AddedColumn(table: "cloudstore_record_metadata", column: "written_here", type: "INTEGER NOT NULL DEFAULT 0"),
    ]

    /// The ``addedColumns`` the store's tables lack: what opening it in a container adds.
    static func missingColumns(_ db: Database) throws -> [AddedColumn] {
        var present: [String: Set<String>] = [:]
        for table in Set(addedColumns.map(\.table)) {
            present[table] = try db.tableExists(table) ? Set(try db.columns(in: table).map(\.name)) : []
        }
        return addedColumns.filter { present[$0.table]?.contains($0.column) != true }
    }

    /// Throws ``StoreError/Code/needsUpgrade`` when a store opened for inspection has metadata a
    /// container has to bring up to date first: the previous release's layout, or tables that
    /// lack columns this version reads (``addedColumns``).
    static func checkReadable(_ db: Database, path: String) throws {
        if try LegacyMirrorLayout.isPresent(db) {
            throw StoreError(
                .needsUpgrade,
                "\(path) holds mirroring metadata in the layout of the previous CloudStore release, whose unsent changes are counted as pending uploads only once a PersistentCloudContainer has opened the store; open it through its container once, then read its status")
        }
        let missing = try exists(db) ? try missingColumns(db) : []
        if !missing.isEmpty {
            throw StoreError(
                .needsUpgrade,
                "\(path) holds mirroring metadata of an earlier CloudStore version, without \(missing.map { "\($0.table).\($0.column)" }.joined(separator: ", ")); open it through its container once (which adds them), then read it")
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
    /// The sync engine's `State.Serialization`, as JSON: tokens and zone bookkeeping.
    case engineState = "engine_state"
    /// The user record name the mirrored data belongs to.
    case userRecordName = "user"
    /// Where the primary zone stands on the server (``ZoneServerState``).
    case primaryZone = "primary_zone"
    /// The shared database engine's `State.Serialization` (the private one's is ``engineState``).
    case sharedEngineState = "shared_engine_state"
    case lastImport = "last_import"
    case lastExport = "last_export"
    case lastError = "last_error"
    case lastErrorDate = "last_error_date"
    /// "signedOut" while the server rejects the credentials.
    case accountStatus = "account_status"
    /// This device's identifier, sent with every request.
    case deviceID = "device_id"
    /// The last upload revision handed out (``Database/nextUploadRevision()``).
    case uploadRevision = "upload_revision"
    /// The ``PersistentCloudContainer/LocalDataDecision`` the app is asked for, until it decides.
    case localDataDecision = "local_data_decision"
    /// The primary zone's name, for the recorder of another process's plain store.
    case primaryZoneName = "primary_zone_name"
    /// The public database engine's `State.Serialization`.
    case publicEngineState = "public_engine_state"
    /// The entities mirrored in the public database (sorted names), for the recorder of another
    /// process's plain store.
    case publicEntities = "public_entities"
}

extension Database {
    func mirrorState(_ key: MirrorStateKey) throws -> Data? {
        try Data.fetchOne(
            cachedStatement(sql: "SELECT value FROM cloudstore_mirror_state WHERE key = ?"), arguments: [key.rawValue])
    }

    func setMirrorState(_ key: MirrorStateKey, _ value: Data?) throws {
        if let value {
            try cachedStatement(sql: "INSERT OR REPLACE INTO cloudstore_mirror_state (key, value) VALUES (?, ?)")
                .execute(arguments: [key.rawValue, value])
        } else {
            try cachedStatement(sql: "DELETE FROM cloudstore_mirror_state WHERE key = ?").execute(arguments: [key.rawValue])
        }
    }

    func mirrorState<T: Decodable>(_ key: MirrorStateKey, as type: T.Type) throws -> T? {
        try mirrorState(key).map { try MirrorTables.decode(type, $0) }
    }

    func setMirrorState<T: Encodable>(_ key: MirrorStateKey, encoding value: T?) throws {
        try setMirrorState(key, value.map { try MirrorTables.encode($0) })
    }

    /// Whether a fetched record waits aside for a unique key (``MirrorWrite/applyKeptAside()``).
    func hasKeptAside() throws -> Bool {
        try integer("SELECT 1 FROM cloudstore_mirror_kept_aside LIMIT 1") != nil
    }

    /// Where the primary zone stands on the server; unsaved until a save or a fetch said otherwise.
    func primaryZoneState() throws -> ZoneServerState {
        try mirrorState(.primaryZone, as: ZoneServerState.self) ?? .unsaved
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
