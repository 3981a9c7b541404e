import CloudStoreSync
import Foundation
import GRDB
import GRDBSQLite

/// A zone the store mirrors besides its primary zone: one row of `cloudstore_mirror_zone`.
///
/// The primary zone (the options' `zoneName`, the schema's name by default) holds every object
/// that is not shared. Sharing adds zones (<doc:Sharing>):
///
/// - an **owned share**: a zone of this user's private database that holds one shared object graph
///   and its share record (`cloudkit.zoneshare`), made by
///   ``PersistentCloudContainer/share(entityName:id:with:publicPermission:title:timeout:)``;
/// - a zone **shared with me**: another user's zone, mirrored through the `shared` database once
///   this user accepted its share. Its ``permission`` decides what local saves may change there.
///
/// A zone is named as the sync engine of its database names it: an owned zone without an owner, a
/// zone shared with this user with its owner (``zoneID``).
struct MirrorZone: Sendable, Hashable {
    enum Role: String, Sendable {
        case ownedShare
        case sharedWithMe
    }

    var zoneID: ZoneID
    var role: Role
    /// The current user's permission in a zone shared with them, as the share record last said;
    /// nil until it arrived.
    var permission: SharePermission?
    /// The share record as the server last answered it (participants, short GUID, change tag).
    var share: Record?
    /// A change of the share this device has not uploaded yet.
    var pendingShare: PendingShareChange?
    /// Whether the zone is on the server (an owned share's zone is created by the first upload).
    var saved: Bool
    /// The object the share was made from (owned shares, on the device that shared it).
    var root: ObjectKey?
    /// The zone went away on the server while this device held unsent changes of it: what the
    /// app is asked (``PersistentCloudContainer/LocalDataDecision/Reason/shareEnded``). Its
    /// uploads wait until the app decides.
    var ended: PersistentCloudContainer.LocalDataDecision?

    var key: MirrorZone.Key { Key(zoneID) }

    /// How record metadata names a zone: nil for the primary zone, else the zone's name and owner.
    struct Key: Hashable, Sendable {
        /// Nil for the primary zone.
        var name: String?
        /// Nil for this user's own zones; the owner for a zone shared with this user.
        var owner: String?

        static let primary = Key(name: nil, owner: nil)
        /// The public database's zone: the objects of the entities the container mirrors there
        /// (``PersistentCloudContainer/Options/publicEntities``). It has no row of its own.
        static let publicDatabase = Key(ZoneID.publicDefault)

        init(name: String?, owner: String?) {
            self.name = name
            self.owner = owner
        }

        init(_ zoneID: ZoneID) {
            self.init(name: zoneID.zoneName, owner: zoneID.ownerRecordName)
        }

        /// The key of `zoneID`, given the primary zone: the primary zone is stored as nil.
        init(_ zoneID: ZoneID, primary: ZoneID) {
            self = zoneID == primary ? .primary : Key(zoneID)
        }

        var isPrimary: Bool { name == nil }

        /// The database the zone is mirrored through.
        var scope: DatabaseScope { Self.scope(owner: owner) }

        /// The database a zone of this owner is mirrored through (nil: this user's own zones).
        static func scope(owner: String?) -> DatabaseScope {
            switch owner {
            case nil: .private
            case ZoneID.publicDatabaseOwner?: .public
            default: .shared
            }
        }

        /// The SQL condition on a metadata table's `zone_owner` that selects the zones of `scope`.
        static func ownerCondition(_ scope: DatabaseScope) -> String {
            switch scope {
            case .private: "zone_owner IS NULL"
            case .public: "zone_owner = '\(ZoneID.publicDatabaseOwner)'"
            case .shared: "zone_owner IS NOT NULL AND zone_owner <> '\(ZoneID.publicDatabaseOwner)'"
            }
        }

        func zoneID(primary: ZoneID) -> ZoneID {
            guard let name else { return primary }
            return ZoneID(zoneName: name, ownerRecordName: owner)
        }
    }

    /// The users of the share and their permission, as last answered (the owner first).
    var participants: [ShareParticipant] {
        guard let metadata = share?.share else { return [] }
        let others = (metadata.participants ?? []).filter { $0.role != .owner && $0.user != metadata.owner?.user }
        return (metadata.owner.map { [$0] } ?? []) + others
    }

    /// The name an owned share's zone gets: one zone per shared root object, named after the
    /// primary zone, so stores of the same user with other zone names never take it for theirs.
    static func shareZoneName(root: UUID, primary: ZoneID) -> String {
        "\(primary.zoneName).share-\(root.uuidString)"
    }

    /// Whether this store mirrors a zone it did not know: a zone of the private database named as
    /// this store names its shares' zones (made by another device of the user), or any zone of
    /// the shared database (shared with this user). Other zones of the private database (another
    /// app's, or a store with another zone name) are not this store's.
    static func isMirrorable(_ zoneID: ZoneID, primary: ZoneID) -> Bool {
        guard zoneID != .publicDefault else { return false }
        guard zoneID.ownerRecordName == nil else { return true }
        let prefix = "\(primary.zoneName).share-"
        return zoneID.zoneName.hasPrefix(prefix) && UUID(text: String(zoneID.zoneName.dropFirst(prefix.count))) != nil
    }
}

/// Where a zone of the private database stands on the server, as far as this device knows: the
/// primary zone's is stored as ``MirrorStateKey/primaryZone``, an owned share's as its row's
/// ``MirrorZone/saved``. The engine is asked to save a zone only while it ``needsSave``.
enum ZoneServerState: String, Sendable, Hashable, Codable, CaseIterable {
    /// Not on the server: saved before the next upload into it.
    case unsaved
    /// On the server.
    case saved
    /// An upload found it missing: the next fetch says whether it was deleted (then the policy or
    /// the app decides) or lost by the server (then it is saved again).
    case missing
    /// This device deleted it (``PersistentCloudContainer/PurgeScope/everywhere``): its deletion
    /// coming back in a fetch is this device's own, nothing to decide. A later save creates it again.
    case purged

    /// Whether the engine saves the zone before uploading into it.
    var needsSave: Bool { self == .unsaved || self == .purged }
}

/// An object of the store, by entity and id.
struct ObjectKey: Hashable, Sendable, Codable {
    var entityName: String
    var id: UUID
}

/// A change of a share this device still has to upload: its participants and public permission
/// (whom it invites, removes or changes), or its end: the owner stops sharing, a participant leaves.
enum PendingShareChange: Hashable, Sendable, Codable {
    /// Save the share with these participants (user record name → permission; others are removed)
    /// and this public permission.
    case save(participants: [String: SharePermission], publicPermission: SharePermission, title: String?)
    /// Delete the share record: stop sharing (owner) or leave (participant).
    case delete
}

extension Database {
    func mirrorZones() throws -> [MirrorZone] {
        try Row.fetchAll(cachedStatement(sql: "SELECT \(MirrorZone.columns) FROM cloudstore_mirror_zone ORDER BY zone_owner, zone_name"))
            .map(MirrorZone.init(row:))
    }

    func mirrorZone(_ zoneID: ZoneID) throws -> MirrorZone? {
        try Row.fetchOne(
            cachedStatement(
                sql: "SELECT \(MirrorZone.columns) FROM cloudstore_mirror_zone WHERE zone_name = ? AND zone_owner = ?"),
            arguments: [zoneID.zoneName, zoneID.ownerRecordName ?? ""]
        ).map(MirrorZone.init(row:))
    }

    func save(_ zone: MirrorZone) throws {
        try cachedStatement(
            sql: """
                INSERT OR REPLACE INTO cloudstore_mirror_zone
                (zone_name, zone_owner, role, permission, share, pending_share, saved, root_entity, root_id, ended)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """
        ).execute(arguments: [
            zone.zoneID.zoneName, zone.zoneID.ownerRecordName ?? "", zone.role.rawValue, zone.permission?.rawValue,
            try zone.share.map { try MirrorTables.encode($0) }, try zone.pendingShare.map { try MirrorTables.encode($0) },
            zone.saved, zone.root?.entityName, zone.root?.id.uuidString, try zone.ended.map { try MirrorTables.encode($0) },
        ])
    }

    /// Deletes a zone's row and its zone key records; every zone's when `zoneID` is nil.
    func deleteMirrorZone(_ zoneID: ZoneID?) throws {
        guard let zoneID else {
            try execute(sql: "DELETE FROM cloudstore_mirror_zone; DELETE FROM cloudstore_mirror_zone_key")
            return
        }
        for table in ["cloudstore_mirror_zone", "cloudstore_mirror_zone_key"] {
            try execute(
                sql: "DELETE FROM \(table) WHERE zone_name = ? AND zone_owner = ?", arguments: [zoneID.zoneName, zoneID.ownerRecordName ?? ""])
        }
    }

    /// Keeps a zone key record fetched from the zone (``ZoneKeyRecord``).
    func saveZoneKeyRecord(_ record: Record, in zoneID: ZoneID) throws {
        try execute(
            sql: "INSERT OR REPLACE INTO cloudstore_mirror_zone_key (zone_name, zone_owner, record_name, record) VALUES (?, ?, ?, ?)",
            arguments: [zoneID.zoneName, zoneID.ownerRecordName ?? "", record.recordName, try MirrorTables.encode(record)])
    }

    /// The zone key records kept, with their zones.
    func zoneKeyRecords() throws -> [(zoneID: ZoneID, record: ZoneKeyRecord)] {
        try Row.fetchAll(self, sql: "SELECT zone_name, zone_owner, record FROM cloudstore_mirror_zone_key").compactMap { row in
            let record = try MirrorTables.decode(Record.self, row[2])
            guard let key = try? ZoneKeyRecord(record) else { return nil }
            return (ZoneID(storedName: row[0], owner: row[1]), key)
        }
    }
}

extension MirrorZone {
    static let columns = "zone_name, zone_owner, role, permission, share, pending_share, saved, root_entity, root_id, ended"

    init(row: Row) throws {
        zoneID = ZoneID(storedName: row[0], owner: row[1])
        role = Role(rawValue: row[2]) ?? .sharedWithMe
        permission = (row[3] as String?).flatMap(SharePermission.init(rawValue:))
        share = try (row[4] as Data?).map { try MirrorTables.decode(Record.self, $0) }
        pendingShare = try (row[5] as Data?).map { try MirrorTables.decode(PendingShareChange.self, $0) }
        saved = row[6]
        if let entity = row[7] as String?, let id = (row[8] as String?).flatMap(UUID.init(text:)) {
            root = ObjectKey(entityName: entity, id: id)
        }
        ended = try (row[9] as Data?).map { try MirrorTables.decode(PersistentCloudContainer.LocalDataDecision.self, $0) }
    }
}

/// A record to delete from the zone its object moved out of: one row of
/// `cloudstore_mirror_moved_record`, a pending upload like a record's own, acknowledged when the
/// server deleted it (or had no such record).
struct MovedRecord: Sendable, Hashable {
    var recordName: String
    /// The zone the object moved out of.
    var zone: MirrorZone.Key
    /// The version of the copy left there this device last had: the delete is for that version,
    /// so another device's later edit of it is merged, not deleted unseen.
    var changeTag: String?
    /// That version's values (JSON of attribute values), the ancestor of that merge.
    var ancestor: Data?
    var uploadRevision: Int64
}

extension Database {
    /// Notes that `recordName` must be deleted from `zone` (replacing an earlier note for that zone).
    func addMovedRecord(_ moved: MovedRecord) throws {
        try deleteMovedRecord(moved.recordName, from: moved.zone)
        try execute(
            sql: """
                INSERT INTO cloudstore_mirror_moved_record
                (record_name, zone_name, zone_owner, change_tag, ancestor, upload_revision) VALUES (?, ?, ?, ?, ?, ?)
                """,
            arguments: [moved.recordName, moved.zone.name, moved.zone.owner, moved.changeTag, moved.ancestor, moved.uploadRevision])
    }

    /// Forgets a delete from a zone: acknowledged, or the object moved back in.
    func deleteMovedRecord(_ recordName: String, from zone: MirrorZone.Key) throws {
        try cachedStatement(
            sql: "DELETE FROM cloudstore_mirror_moved_record WHERE record_name = ? AND zone_name IS ? AND zone_owner IS ?"
        ).execute(arguments: [recordName, zone.name, zone.owner])
    }

    /// Whether a delete of `recordName` from `zone` is pending.
    func hasMovedRecord(_ recordName: String, from zone: MirrorZone.Key) throws -> Bool {
        try Bool.fetchOne(
            cachedStatement(
                sql: "SELECT 1 FROM cloudstore_mirror_moved_record WHERE record_name = ? AND zone_name IS ? AND zone_owner IS ?"),
            arguments: [recordName, zone.name, zone.owner]) ?? false
    }

    /// The deletes of moved records to send through the database of `scope`, in upload order.
    func movedRecords(scope: DatabaseScope, limit: Int) throws -> [MovedRecord] {
        try movedRecords(
            MovedRecord.select + "\(MirrorZone.Key.ownerCondition(scope)) ORDER BY upload_revision, sequence LIMIT ?",
            [.int64(Int64(limit))])
    }

    /// The pending delete of `recordName` from `zone`, if any.
    func movedRecord(_ recordName: String, from zone: MirrorZone.Key) throws -> MovedRecord? {
        try movedRecords(
            MovedRecord.selectInZone, [.string(recordName), .string(orNull: zone.name), .string(orNull: zone.owner)]
        ).first
    }

    /// The rows a query of ``MovedRecord/select`` answers, read from the statement's columns.
    private func movedRecords(_ sql: String, _ arguments: [AttributeValue]) throws -> [MovedRecord] {
        var rows: [MovedRecord] = []
        try each(sql, arguments) { rows.append(MovedRecord(statement: $0)) }
        return rows
    }
}

extension MovedRecord {
    /// `SELECT` of the columns ``init(statement:)`` reads, in its order, up to `WHERE `.
    static let select =
        "SELECT record_name, zone_name, zone_owner, change_tag, ancestor, upload_revision FROM cloudstore_mirror_moved_record WHERE "
    /// ``select`` of one record's delete from one zone.
    static let selectInZone = select + "record_name = ? AND zone_name IS ? AND zone_owner IS ?"

    /// The current row of a statement of ``select``.
    init(statement: OpaquePointer) {
        recordName = columnText(statement, 0)
        zone = MirrorZone.Key(name: columnTextOrNil(statement, 1), owner: columnTextOrNil(statement, 2))
        changeTag = columnTextOrNil(statement, 3)
        ancestor = columnDataOrNil(statement, 4)
        uploadRevision = sqlite3_column_int64(statement, 5)
    }
}

extension ZoneID {
    /// A zone as mirroring's tables store it: `zone_name`, and `zone_owner` empty for this user's own zones.
    init(storedName name: String, owner: String) {
        self.init(zoneName: name, ownerRecordName: owner.isEmpty ? nil : owner)
    }
}
