import Foundation
import GRDB

/// Mirroring's own tables in the store file, written in the same transactions as the rows they
/// describe:
///
/// - `cloudstore_mirror_state`: key → value (the sync engine's state, the history position export
///   has read up to, the account, the last import and export).
/// - `cloudstore_mirror_record`: one row per record this device knows on the server or has to upload:
///   its last server change tag, the server copy of its values (the ancestor for three-way merges),
///   fields a newer app version wrote, and what is still to upload.
/// - `cloudstore_mirror_pending_reference`: to-one references whose target has not arrived yet.
/// - `cloudstore_mirror_conflict`: the conflict log, every value that lost.
/// - `cloudstore_mirror_foreign_record`: records of types this schema does not know, kept verbatim.
enum MirrorMetadata {
    static func create(_ db: Database) throws {
        try db.execute(
            sql: """
                CREATE TABLE IF NOT EXISTS cloudstore_mirror_state (key TEXT PRIMARY KEY NOT NULL, value BLOB);
                CREATE TABLE IF NOT EXISTS cloudstore_mirror_record (
                    record_name TEXT PRIMARY KEY NOT NULL,
                    entity TEXT NOT NULL,
                    change_tag TEXT,
                    ancestor BLOB,
                    unknown_fields BLOB,
                    pending BLOB,
                    link_relationship TEXT,
                    link_source TEXT,
                    link_target TEXT);
                CREATE INDEX IF NOT EXISTS cloudstore_mirror_record_pending
                    ON cloudstore_mirror_record (record_name) WHERE pending IS NOT NULL;
                CREATE INDEX IF NOT EXISTS cloudstore_mirror_record_link_source
                    ON cloudstore_mirror_record (link_source) WHERE link_source IS NOT NULL;
                CREATE INDEX IF NOT EXISTS cloudstore_mirror_record_link_target
                    ON cloudstore_mirror_record (link_target) WHERE link_target IS NOT NULL;
                CREATE TABLE IF NOT EXISTS cloudstore_mirror_pending_reference (
                    entity TEXT NOT NULL,
                    id TEXT NOT NULL,
                    relationship TEXT NOT NULL,
                    target TEXT NOT NULL,
                    PRIMARY KEY (entity, id, relationship));
                CREATE INDEX IF NOT EXISTS cloudstore_mirror_pending_reference_target
                    ON cloudstore_mirror_pending_reference (target);
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
                """)
    }

    /// Whether the store has mirroring tables (a store a container has opened).
    static func exists(_ db: Database) throws -> Bool {
        try db.tableExists("cloudstore_mirror_state")
    }

    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }()

    static func encode<T: Encodable>(_ value: T) throws -> Data { try encoder.encode(value) }

    static func decode<T: Decodable>(_ type: T.Type, _ data: Data) throws -> T {
        try JSONDecoder().decode(type, from: data)
    }
}

// MARK: - State

/// Keys of `cloudstore_mirror_state`.
enum MirrorStateKey: String {
    /// The sync engine's `State.Serialization`, as JSON.
    case engineState = "engine_state"
    /// The history token export has analyzed up to.
    case exportedThrough = "exported_through"
    /// The user record name the mirrored data belongs to.
    case userRecordName = "user"
    /// Whether the store's zone was saved on the server.
    case zoneSaved = "zone_saved"
    case lastImport = "last_import"
    case lastExport = "last_export"
    case lastError = "last_error"
    case lastErrorDate = "last_error_date"
    /// "signedOut" while the server rejects the credentials.
    case accountStatus = "account_status"
    /// This device's identifier, sent with every request.
    case deviceID = "device_id"
}

extension Database {
    func mirrorState(_ key: MirrorStateKey) throws -> Data? {
        try Data.fetchOne(self, sql: "SELECT value FROM cloudstore_mirror_state WHERE key = ?", arguments: [key.rawValue])
    }

    func setMirrorState(_ key: MirrorStateKey, _ value: Data?) throws {
        if let value {
            try execute(
                sql: "INSERT OR REPLACE INTO cloudstore_mirror_state (key, value) VALUES (?, ?)",
                arguments: [key.rawValue, value])
        } else {
            try execute(sql: "DELETE FROM cloudstore_mirror_state WHERE key = ?", arguments: [key.rawValue])
        }
    }

    func mirrorState<T: Decodable>(_ key: MirrorStateKey, as type: T.Type) throws -> T? {
        try mirrorState(key).map { try MirrorMetadata.decode(type, $0) }
    }

    func setMirrorState<T: Encodable>(_ key: MirrorStateKey, encoding value: T?) throws {
        try setMirrorState(key, value.map { try MirrorMetadata.encode($0) })
    }
}

// MARK: - Records

/// The two objects a many-to-many link record joins, by the canonical side of the relationship.
struct LinkEnds: Hashable, Sendable {
    /// `Entity.relationship` of the canonical side.
    var relationship: String
    var source: UUID
    var target: UUID
}

/// One row of `cloudstore_mirror_record`.
struct MirroredRecord: Sendable {
    var recordName: String
    /// The entity, or ``LinkRecords/recordType`` for a link.
    var entityName: String
    /// The server's change tag of the last version this device has; nil when the server has none.
    var changeTag: String?
    /// The server copy of the values this device last agreed with (attributes and to-one ids).
    var ancestor: [String: AttributeValue]?
    /// Fields a newer version of the app wrote, uploaded again unchanged.
    var unknownFields: [String: FieldValue] = [:]
    /// What this device still has to upload.
    var pending: PendingExport?
    var link: LinkEnds?

    var isOnServer: Bool { changeTag != nil }
}

extension Database {
    func mirroredRecord(_ recordName: String) throws -> MirroredRecord? {
        try Row.fetchOne(
            self, sql: "SELECT * FROM cloudstore_mirror_record WHERE record_name = ?", arguments: [recordName]
        ).map(MirroredRecord.init(row:))
    }

    func mirroredRecords(pendingOnly: Bool) throws -> [MirroredRecord] {
        let sql =
            pendingOnly
            ? "SELECT * FROM cloudstore_mirror_record WHERE pending IS NOT NULL" : "SELECT * FROM cloudstore_mirror_record"
        return try Row.fetchAll(self, sql: sql).map(MirroredRecord.init(row:))
    }

    /// The names of the records that are on the server with nothing to upload here (`isOnServer`
    /// and no `pending`) and that `include` accepts, read with a cursor: only the names, never
    /// every record of the store at once.
    func settledRecordNames(where include: (String) -> Bool) throws -> [String] {
        let names = try String.fetchCursor(
            self, sql: "SELECT record_name FROM cloudstore_mirror_record WHERE change_tag IS NOT NULL AND pending IS NULL")
        var included: [String] = []
        while let name = try names.next() {
            if include(name) { included.append(name) }
        }
        return included
    }

    /// The link records of an object: those whose source or target it is.
    func mirroredLinks(of id: UUID) throws -> [MirroredRecord] {
        try Row.fetchAll(
            self,
            sql: "SELECT * FROM cloudstore_mirror_record WHERE link_source = ? OR link_target = ?",
            arguments: [id.uuidString, id.uuidString]
        ).map(MirroredRecord.init(row:))
    }

    func save(_ record: MirroredRecord) throws {
        try execute(
            sql: """
                INSERT OR REPLACE INTO cloudstore_mirror_record
                (record_name, entity, change_tag, ancestor, unknown_fields, pending, link_relationship, link_source, link_target)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                record.recordName, record.entityName, record.changeTag,
                try record.ancestor.map { try MirrorMetadata.encode($0) },
                record.unknownFields.isEmpty ? nil : try MirrorMetadata.encode(record.unknownFields),
                try record.pending.map { try MirrorMetadata.encode($0) },
                record.link?.relationship, record.link?.source.uuidString, record.link?.target.uuidString,
            ])
    }

    func deleteMirroredRecord(_ recordName: String) throws {
        try execute(sql: "DELETE FROM cloudstore_mirror_record WHERE record_name = ?", arguments: [recordName])
    }

    func pendingRecordCount() throws -> Int {
        try Int.fetchOne(self, sql: "SELECT count(*) FROM cloudstore_mirror_record WHERE pending IS NOT NULL") ?? 0
    }
}

extension MirroredRecord {
    init(row: Row) throws {
        recordName = row["record_name"]
        entityName = row["entity"]
        changeTag = row["change_tag"]
        ancestor = try (row["ancestor"] as Data?).map { try MirrorMetadata.decode([String: AttributeValue].self, $0) }
        unknownFields =
            try (row["unknown_fields"] as Data?).map { try MirrorMetadata.decode([String: FieldValue].self, $0) } ?? [:]
        pending = try (row["pending"] as Data?).map { try MirrorMetadata.decode(PendingExport.self, $0) }
        if let relationship = row["link_relationship"] as String?,
            let source = (row["link_source"] as String?).flatMap(UUID.init(uuidString:)),
            let target = (row["link_target"] as String?).flatMap(UUID.init(uuidString:))
        {
            link = LinkEnds(relationship: relationship, source: source, target: target)
        }
    }
}

// MARK: - Pending references

extension Database {
    /// Remembers that `entity.relationship` of `id` points at `target`, which has not arrived.
    func addPendingReference(entity: String, id: UUID, relationship: String, target: UUID) throws {
        try execute(
            sql: "INSERT OR REPLACE INTO cloudstore_mirror_pending_reference (entity, id, relationship, target) VALUES (?, ?, ?, ?)",
            arguments: [entity, id.uuidString, relationship, target.uuidString])
    }

    func removePendingReferences(of entity: String, id: UUID, relationship: String? = nil) throws {
        if let relationship {
            try execute(
                sql: "DELETE FROM cloudstore_mirror_pending_reference WHERE entity = ? AND id = ? AND relationship = ?",
                arguments: [entity, id.uuidString, relationship])
        } else {
            try execute(
                sql: "DELETE FROM cloudstore_mirror_pending_reference WHERE entity = ? AND id = ?",
                arguments: [entity, id.uuidString])
        }
    }

    /// The references waiting for `target`, removed from the table.
    func takePendingReferences(to target: UUID) throws -> [(entity: String, id: UUID, relationship: String)] {
        let rows = try Row.fetchAll(
            self, sql: "SELECT entity, id, relationship FROM cloudstore_mirror_pending_reference WHERE target = ?",
            arguments: [target.uuidString])
        try execute(sql: "DELETE FROM cloudstore_mirror_pending_reference WHERE target = ?", arguments: [target.uuidString])
        return rows.compactMap { row in
            guard let id = UUID(uuidString: row["id"]) else { return nil }
            return (row["entity"], id, row["relationship"])
        }
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
                conflict.property, conflict.losingSide.rawValue, try MirrorMetadata.encode(conflict.losingValue),
                try MirrorMetadata.encode(conflict.winningValue), conflict.policy,
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
                objectID: UUID(uuidString: row["id"]) ?? UUID(), property: row["property"],
                losingSide: ConflictRecord.Side(rawValue: row["losing_side"]) ?? .local,
                losingValue: try MirrorMetadata.decode(AttributeValue.self, row["losing_value"]),
                winningValue: try MirrorMetadata.decode(AttributeValue.self, row["winning_value"]),
                policy: row["policy"])
        }
    }
}

extension Database {
    /// The references of an object that wait for their target.
    func pendingReferences(of entity: String, id: UUID) throws -> [(relationship: String, target: UUID)] {
        try Row.fetchAll(
            self, sql: "SELECT relationship, target FROM cloudstore_mirror_pending_reference WHERE entity = ? AND id = ?",
            arguments: [entity, id.uuidString]
        ).compactMap { row in UUID(uuidString: row["target"]).map { (row["relationship"], $0) } }
    }
}
