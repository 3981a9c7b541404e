import CloudStoreSync
import Foundation
import GRDB
import GRDBSQLite

/// A zone the store mirrors: one row of `cloudstore_mirror_zone`.
///
/// The **primary** zone (the options' `zoneName`, the schema's name by default) holds every object
/// that is not shared. Sharing adds zones (<doc:Sharing>):
///
/// - an **owned share**: a zone of this user's private database that holds one shared object graph
///   and its share record (`cloudkit.zoneshare`), made by
///   ``PersistentCloudContainer/share(entityName:id:with:publicPermission:title:timeout:)``;
/// - a zone **shared with me**: another user's zone, mirrored through the `shared` database once
///   this user accepted its share. Its ``permission`` decides what local saves may change there.
///
/// A zone is named as the sync engine of its database names it: an owned zone without an owner, a
/// zone shared with this user with its owner (``zoneID``). Record metadata names the primary zone
/// with no name at all (``Key/primary``), so a store opened with another zone name keeps its records.
struct MirrorZone: Sendable, Hashable {
    enum Role: String, Sendable {
        case primary
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
    /// Where the zone stands on the server, as far as this device knows: an owned zone is created
    /// by the first upload into it; a zone shared with this user is on the server.
    var serverState: ZoneServerState
    /// The object the share was made from (owned shares, on the device that shared it).
    var root: ObjectKey?
    /// What the app is asked about the zone's local data, until it decides
    /// (``PersistentCloudContainer/LocalDataDecision``): for the primary zone, its deletion or
    /// purge on the server or another user's credentials; for a share's zone, its end while this
    /// device held unsent changes of it. The zone's uploads wait meanwhile.
    var decision: PersistentCloudContainer.LocalDataDecision?
    /// Why the server refused the last change of the share for good, until the call that made
    /// it reads it.
    var shareRefusal: ServerError?

    init(
        zoneID: ZoneID, role: Role, permission: SharePermission? = nil, share: Record? = nil,
        pendingShare: PendingShareChange? = nil, serverState: ZoneServerState, root: ObjectKey? = nil
    ) {
        self.zoneID = zoneID
        self.role = role
        self.permission = permission
        self.share = share
        self.pendingShare = pendingShare
        self.serverState = serverState
        self.root = root
    }

    /// How record metadata names the zone.
    var key: MirrorZone.Key { role == .primary ? .primary : Key(zoneID) }

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

/// Where a zone of the private database stands on the server, as far as this device knows
/// (``MirrorZone/serverState``). The engine is asked to save a zone only while it ``needsSave``.
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
    static let columns =
        "zone_name, zone_owner, role, permission, share, pending_share, server_state, root_entity, root_id, decision, share_refusal"

    init(row: Row) throws {
        zoneID = ZoneID(storedName: row[0], owner: row[1])
        role = Role(rawValue: row[2]) ?? .sharedWithMe
        permission = (row[3] as String?).flatMap(SharePermission.init(rawValue:))
        share = try (row[4] as Data?).map { try MirrorTables.decode(Record.self, $0) }
        pendingShare = try (row[5] as Data?).map { try MirrorTables.decode(PendingShareChange.self, $0) }
        serverState = ZoneServerState(rawValue: row[6]) ?? .saved
        if let entity = row[7] as String?, let id = (row[8] as String?).flatMap(UUID.init(text:)) {
            root = ObjectKey(entityName: entity, id: id)
        }
        decision = try (row[9] as Data?).map { try MirrorTables.decode(PersistentCloudContainer.LocalDataDecision.self, $0) }
        shareRefusal = try (row[10] as Data?).map { try MirrorTables.decode(ServerError.self, $0) }
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
