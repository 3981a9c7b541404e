import CloudStoreSync
import Foundation
import GRDB

/// What the container shows of mirroring (``PersistentCloudContainer/status()``, ``PersistentCloudContainer/syncState(entityName:id:)``,
/// the encryption status), read from the store: nothing is kept anywhere else.
enum MirrorStatus {
    /// Fetched records waiting for their key, and those refused (``MirrorWrite/opened(_:of:in:)``).
    static func awaitingDecryptionCounts(_ db: Database) throws -> (waiting: Int, refused: Int) {
        guard try db.tableExists("cloudstore_mirror_awaiting_decryption") else { return (0, 0) }
        let row = try Row.fetchOne(
            db, sql: "SELECT COUNT(*) FILTER (WHERE refused = 0), COUNT(*) FILTER (WHERE refused = 1) FROM cloudstore_mirror_awaiting_decryption")
        return (row?[0] ?? 0, row?[1] ?? 0)
    }

    /// The records waiting for their key or refused, by zone and name.
    static func waitingRecords(_ db: Database) throws -> [PersistentCloudContainer.WaitingRecord] {
        guard try db.tableExists("cloudstore_mirror_awaiting_decryption") else { return [] }
        return try Row.fetchAll(
            db,
            sql: """
                SELECT record_name, zone_name, zone_owner, refused, problem FROM cloudstore_mirror_awaiting_decryption
                ORDER BY zone_owner, zone_name, record_name
                """
        ).map { row in
            PersistentCloudContainer.WaitingRecord(
                recordName: row[0], zoneID: ZoneID(storedName: row[1], owner: row[2]), isRefused: row[3], problem: row[4])
        }
    }

    /// The newest key of each zone with zone key records, and whether `keyring` (having learned
    /// every kept record) holds it.
    static func sharedZoneKeys(_ db: Database, keyring: EncryptionKeyring?) throws -> [PersistentCloudContainer.ZoneKeys] {
        guard try db.tableExists("cloudstore_mirror_zone_key") else { return [] }
        var newest: [ZoneID: ZoneKeyRecord] = [:]
        for (zoneID, record) in try db.zoneKeyRecords() {
            _ = try? keyring?.learn(record, in: zoneID)
            if let known = newest[zoneID], !ZoneKeyCache.isNewer((record.generation, record.keyID), than: (known.generation, known.keyID)) {
                continue
            }
            newest[zoneID] = record
        }
        return newest.sorted { ($0.key.ownerRecordName ?? "", $0.key.zoneName) < ($1.key.ownerRecordName ?? "", $1.key.zoneName) }.map {
            PersistentCloudContainer.ZoneKeys(
                zoneID: $0.key, keyID: $0.value.keyID.description, generation: $0.value.generation,
                grantedTo: $0.value.grants.map(\.participant).sorted(), isHeld: keyring?.openingKeys($0.key)[$0.value.keyID] != nil)
        }
    }

    /// Where mirroring of a store stands, read from its file.
    static func status(_ db: Database) throws -> PersistentCloudContainer.SyncStatus {
        guard try MirrorTables.exists(db) else {
            return PersistentCloudContainer.SyncStatus(
                isMirroring: false, user: nil, isSignedOut: false, pendingUploads: 0, refusedUploads: 0,
                serverChangeToken: nil, lastImport: nil, lastExport: nil, lastError: nil, conflictCount: 0)
        }
        let ledger = Ledger(db)
        let engine = try ledger.state(.engineState, as: SyncEngine.State.Serialization.self)
        let zones = try ledger.zones()
        return PersistentCloudContainer.SyncStatus(
            isMirroring: engine != nil,
            user: try ledger.state(.userRecordName, as: String.self) ?? engine?.user,
            isSignedOut: try ledger.state(.accountStatus, as: String.self) == "signedOut",
            pendingUploads: try ledger.pendingCount(),
            refusedUploads: try ledger.refusals().count,
            retryingUploads: try ledger.retryingCount(),
            serverChangeToken: engine?.databaseSyncToken,
            lastImport: try ledger.state(.lastImport, as: Date.self),
            lastExport: try ledger.state(.lastExport, as: Date.self),
            lastError: try ledger.state(.lastError, as: MirrorFailure.self)?.failure,
            conflictCount: try Int.fetchOne(db, sql: "SELECT count(*) FROM cloudstore_mirror_conflict") ?? 0,
            localDataDecision: zones.first { $0.role == .primary }?.decision,
            endedShares: zones.filter { $0.role != .primary }.compactMap(\.decision))
    }

    /// Where the record `recordName` of `zone` lives and what the current user may do with it.
    static func sharing(
        _ db: Database, of zone: MirrorZone.Key, recordName: String, primary: ZoneID
    ) throws -> PersistentCloudContainer.ObjectSharing {
        let zoneID = zone.zoneID(primary: primary)
        guard !zone.isPrimary else {
            return PersistentCloudContainer.ObjectSharing(zoneID: zoneID, owner: nil, permission: .readWrite, isShared: false)
        }
        if zone == .publicDatabase {
            // Another user's public object is theirs to change; this user's own (or one not
            // fetched back yet, so this device's) is this user's.
            let creator = try db.publicCreator(of: recordName)
            let user = try Ledger(db).state(.userRecordName, as: String.self)
            let owner = creator == user ? nil : creator
            return PersistentCloudContainer.ObjectSharing(
                zoneID: zoneID, owner: owner, permission: owner == nil ? .readWrite : .readOnly, isShared: false)
        }
        let row = try Ledger(db).zone(zoneID)
        return PersistentCloudContainer.ObjectSharing(
            zoneID: zoneID, owner: zone.owner, permission: zone.owner == nil ? .readWrite : row?.permission ?? .readOnly,
            isShared: zone.owner != nil || row?.share != nil)
    }

    /// What mirroring knows of one object, from its record's metadata; nil when there is none, or
    /// the record is of another entity.
    static func syncState(_ db: Database, entityName: String, id: UUID, primary: ZoneID) throws -> PersistentCloudContainer.ObjectSyncState? {
        guard let row = try Ledger(db).find(id.uuidString), row.link == nil, row.entityName == entityName else { return nil }
        return try syncState(of: row, id: id, db, primary: primary)
    }

    /// The objects whose pending upload the server refused, by record name.
    static func refusedUploads(_ db: Database, primary: ZoneID) throws -> [PersistentCloudContainer.ObjectSyncState] {
        try objectStates(of: Ledger(db).refusedRecords(), db, primary: primary)
    }

    /// The objects whose pending upload the server refused or did not take at its last attempt,
    /// by record name.
    static func failedUploads(_ db: Database, primary: ZoneID) throws -> [PersistentCloudContainer.ObjectSyncState] {
        try objectStates(of: Ledger(db).failedRecords(), db, primary: primary)
    }

    /// The states of the objects among `rows` (links left out).
    private static func objectStates(
        of rows: [RecordMetadata], _ db: Database, primary: ZoneID
    ) throws -> [PersistentCloudContainer.ObjectSyncState] {
        try rows.compactMap { row in
            guard row.link == nil, let id = UUID(text: row.recordName) else { return nil }
            return try syncState(of: row, id: id, db, primary: primary)
        }
    }

    private static func syncState(
        of row: RecordMetadata, id: UUID, _ db: Database, primary: ZoneID
    ) throws -> PersistentCloudContainer.ObjectSyncState {
        let upload: PersistentCloudContainer.ObjectSyncState.Upload? =
            switch try row.pendingUpload {
            case .save(let full, let keys)?: .save(keys: Set(keys.keys), wholeObject: full)
            case .delete?: .delete
            case nil: nil
            }
        return PersistentCloudContainer.ObjectSyncState(
            entityName: row.entityName, id: id, sharing: try sharing(db, of: row.zone, recordName: row.recordName, primary: primary),
            changeTag: row.changeTag, serverModified: row.serverModified.map { Date(millisecondsSince1970: $0) },
            pendingUpload: upload, refusal: row.refusal, retry: row.retry)
    }

    /// This device's identifier, made (a UUID) the first time the store mirrors; the mirror's
    /// tables are migrated already (``MirrorTables/migrate(_:)``).
    static func deviceID(_ db: Database) throws -> String {
        let ledger = Ledger(db)
        if let id = try ledger.state(.deviceID, as: String.self) { return id }
        let id = UUID().uuidString
        try ledger.setState(.deviceID, encoding: id)
        return id
    }
}
