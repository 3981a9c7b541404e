import CloudStoreSync
import Foundation
import GRDB
import GRDBSQLite

/// The mirror's ledger: what this device knows of each record on the server and still has to
/// upload for it (`cloudstore_record_metadata`, ``RecordMetadata``), the deletes of the copies
/// objects left in zones they moved out of (`cloudstore_mirror_moved_record`, ``MovedRecord``),
/// the zones it mirrors, the primary zone among them (`cloudstore_mirror_zone`, ``MirrorZone``),
/// and the mirror's own state (`cloudstore_mirror_state`, ``MirrorStateKey``), with the queries
/// every writer uses. Each fact lives here once.
///
/// A ledger lives in one store transaction, whoever writes it: the app's save
/// (``PendingUploadRecording``), or the mirror's import, upload, acknowledgement or decision
/// (``MirrorWrite``). Everything that becomes pending in that transaction is stamped with one
/// upload revision, taken the first time (``revision()``): uploads go in revision order, and an
/// acknowledgement clears a pending upload only if its revision is still the one that was sent.
///
/// ```swift
/// let ledger = Ledger(db)
/// var row = try ledger.find(id.uuidString) ?? RecordMetadata(recordName: id.uuidString, entityName: "Note")
/// try ledger.add(.update(keys: ["title"]), at: date, to: &row)   // pending, stamped, stored
/// ```
final class Ledger {
    let db: Database
    /// This transaction's upload revision, once taken.
    private var takenRevision: Int64?

    init(_ db: Database) {
        self.db = db
    }

    // MARK: The revision rule

    /// This transaction's upload revision: the store-wide counter (``MirrorStateKey/uploadRevision``)
    /// raised once, the first time something becomes pending in the transaction.
    func revision() throws -> Int64 {
        if let takenRevision { return takenRevision }
        let next = (try state(.uploadRevision, as: Int64.self) ?? 0) + 1
        try setState(.uploadRevision, encoding: next)
        takenRevision = next
        return next
    }

    /// Whether something became pending in this transaction (it took a revision).
    var madePending: Bool { takenRevision != nil }

    /// Sets what a record has pending, stamped with this transaction's revision when something is
    /// (nothing pending has no retry either); unchanged when it is the same.
    func setPending(_ upload: PendingUpload?, of record: inout RecordMetadata) throws {
        // Clearing needs no look at what was pending (it stays JSON, undecoded).
        guard upload == nil ? record.hasPendingUpload : try upload != record.pendingUpload else { return }
        try record.setPendingUpload(upload) { try revision() }
    }

    /// Adds one local change to what a record has pending (``PendingUpload/adding(_:at:to:mayBeOnServer:)``)
    /// and stores it, or forgets a record that never left the device and has nothing left to
    /// upload. A new change lifts a refusal (the app changed the object).
    func add(_ change: PendingUpload.Change, at date: Date, to record: inout RecordMetadata) throws {
        if try record.add(change, at: date, revision: revision()) {
            try save(record)
        } else {
            try forget(record.recordName)
        }
    }

    // MARK: Records

    /// The record's metadata, by name.
    func find(_ recordName: String) throws -> RecordMetadata? {
        try records(RecordMetadata.selectByName, [.string(recordName)]).first
    }

    /// Every record's metadata.
    func allRecords() throws -> [RecordMetadata] {
        try records(RecordMetadata.select + "1")
    }

    /// The metadata of every record of one zone.
    func records(in zone: MirrorZone.Key) throws -> [RecordMetadata] {
        try records(RecordMetadata.select + "zone_name IS ? AND zone_owner IS ?", [.string(orNull: zone.name), .string(orNull: zone.owner)])
    }

    /// The link records of an object: those whose source or target it is.
    func links(of id: UUID) throws -> [RecordMetadata] {
        try records(RecordMetadata.select + "link_source = ? OR link_target = ?", [.uuid(id), .uuid(id)])
    }

    /// The zone a link record goes to: its objects' zone when both are in one, else the primary
    /// zone, where the owner keeps it and no participant sees it (nothing lost, nothing leaks).
    func linkZone(_ ends: LinkEnds) throws -> MirrorZone.Key {
        let source = try find(ends.source.uuidString)?.zone ?? .primary
        let target = try find(ends.target.uuidString)?.zone ?? .primary
        return source == target ? source : .primary
    }

    /// The metadata rows a query of ``RecordMetadata/select`` answers, read from the statement's
    /// columns (not through GRDB's `Row`, which cost more than the read itself on the hot paths).
    private func records(_ sql: String, _ arguments: [AttributeValue] = []) throws -> [RecordMetadata] {
        var rows: [RecordMetadata] = []
        try db.each(sql, arguments) { rows.append(try RecordMetadata(statement: $0)) }
        return rows
    }

    /// Forgets a record: it is neither on the server nor to upload, and what this device
    /// remembered of its sealed assets goes with it.
    func forget(_ recordName: String) throws {
        try db.cachedStatement(sql: "DELETE FROM cloudstore_record_metadata WHERE record_name = ?").execute(arguments: [recordName])
        try db.deleteSealedAssets(of: recordName)
    }

    /// Notes that the record may be on the server from now on (it is being handed to the engine).
    func markMayBeOnServer(_ recordName: String) throws {
        try db.cachedStatement(sql: "UPDATE cloudstore_record_metadata SET may_be_on_server = 1 WHERE record_name = ?")
            .execute(arguments: [recordName])
    }

    /// Marks a record whose create is handed out as possibly on the server, with the values it
    /// carries as its ancestor (JSON of attribute values).
    func markMayBeOnServer(_ recordName: String, ancestor: Data) throws {
        try db.cachedStatement(sql: "UPDATE cloudstore_record_metadata SET may_be_on_server = 1, ancestor = ? WHERE record_name = ?")
            .execute(arguments: [ancestor, recordName])
    }

    /// Stores how a record's pending upload failed so far (nil: clears it), if its row is in
    /// `zone`; nothing else of the row changes.
    func setRetry(_ retry: PersistentCloudContainer.ObjectSyncState.UploadRetry?, of recordName: String, in zone: MirrorZone.Key) throws {
        try db.cachedStatement(
            sql: "UPDATE cloudstore_record_metadata SET retry = ? WHERE record_name = ? AND zone_name IS ? AND zone_owner IS ?"
        ).execute(arguments: [try retry.map { try MirrorTables.encode($0) }, recordName, zone.name, zone.owner])
    }

    /// The names of the records of a zone that are on the server with nothing to upload here
    /// (`isOnServer` and no pending upload) and that `include` accepts, read with a cursor: only
    /// the names, never every record of the store at once.
    func settledNames(in zone: MirrorZone.Key, where include: (String) -> Bool) throws -> [String] {
        let names = try String.fetchCursor(
            db,
            sql: """
                SELECT record_name FROM cloudstore_record_metadata
                WHERE change_tag IS NOT NULL AND pending_upload IS NULL AND zone_name IS ? AND zone_owner IS ?
                """,
            arguments: [zone.name, zone.owner])
        var included: [String] = []
        while let name = try names.next() {
            if include(name) { included.append(name) }
        }
        return included
    }

    // MARK: Pending uploads

    /// The next pending uploads to send through the database of `scope`, in upload order, leaving
    /// out refused ones and those `skip` names (by record name, entity and zone, asked before the
    /// rest of the row is decoded), and whether more follow them. Rows are read one by one until
    /// `limit` are taken, so what is skipped (a batch in flight, say) never crowds out what comes
    /// after it.
    func pending(
        limit: Int, scope: DatabaseScope = .private,
        skipping skip: (_ recordName: String, _ entityName: String, _ zone: MirrorZone.Key) -> Bool
    ) throws -> (uploads: [RecordMetadata], hasMore: Bool) {
        guard limit > 0 else { return ([], false) }
        var uploads: [RecordMetadata] = []
        var hasMore = false
        let sql = RecordMetadata.select + """
            pending_upload IS NOT NULL AND refusal IS NULL AND \(MirrorZone.Key.ownerCondition(scope))
            ORDER BY upload_revision, record_name
            """
        try db.eachWhile(sql, []) { statement in
            guard !skip(columnText(statement, 0), columnText(statement, 1), RecordMetadata.zone(statement)) else { return true }
            guard uploads.count < limit else {
                hasMore = true
                return false
            }
            uploads.append(try RecordMetadata(statement: statement))
            return true
        }
        return (uploads, hasMore)
    }

    /// The records whose create was handed to the sync engine and never answered (possibly on the
    /// server, no change tag) and that still have a save to upload, or whose copy in a zone their
    /// object moved out of is such a create, with the database each goes through:
    /// ``UnheardCreates`` holds them back until a fetch covered them.
    func unheardCreates() throws -> [(name: String, scope: DatabaseScope)] {
        func scope(_ row: Row) -> DatabaseScope { MirrorZone.Key.scope(owner: row["zone_owner"]) }
        let creates = try Row.fetchAll(
            db,
            sql: """
                SELECT record_name, pending_upload, zone_owner FROM cloudstore_record_metadata
                WHERE may_be_on_server = 1 AND change_tag IS NULL AND pending_upload IS NOT NULL
                """
        ).compactMap { row in
            let upload = try MirrorTables.decode(PendingUpload.self, row["pending_upload"])
            return upload == .delete ? nil : (name: row["record_name"] as String, scope: scope(row))
        }
        let leftBehind = try Row.fetchAll(
            db, sql: "SELECT record_name, zone_owner FROM cloudstore_mirror_moved_record WHERE change_tag IS NULL"
        ).map { row in (name: row["record_name"] as String, scope: scope(row)) }
        return creates + leftBehind
    }

    /// How many uploads are pending, not counting the ones the server refused: records, deletes
    /// from zones objects moved out of, and share changes.
    func pendingCount() throws -> Int {
        let records =
            try Int.fetchOne(
                db, sql: "SELECT count(*) FROM cloudstore_record_metadata WHERE pending_upload IS NOT NULL AND refusal IS NULL"
            ) ?? 0
        let moved = try Int.fetchOne(db, sql: "SELECT count(*) FROM cloudstore_mirror_moved_record") ?? 0
        let shares = try Int.fetchOne(db, sql: "SELECT count(*) FROM cloudstore_mirror_zone WHERE pending_share IS NOT NULL") ?? 0
        return records + moved + shares
    }

    /// Pending uploads of objects of `entities` (those that wait for an encryption key, say).
    func pendingCount(of entities: Set<String>) throws -> Int {
        guard !entities.isEmpty else { return 0 }
        let placeholders = Array(repeating: "?", count: entities.count).joined(separator: ", ")
        return try Int.fetchOne(
            db,
            sql: "SELECT count(*) FROM cloudstore_record_metadata WHERE pending_upload IS NOT NULL AND refusal IS NULL AND entity IN (\(placeholders))",
            arguments: StatementArguments(entities.sorted())) ?? 0
    }

    /// How many pending uploads the server did not take at their last attempt and will be sent
    /// again (not refused).
    func retryingCount() throws -> Int {
        try Int.fetchOne(
            db,
            sql: "SELECT count(*) FROM cloudstore_record_metadata WHERE pending_upload IS NOT NULL AND refusal IS NULL AND retry IS NOT NULL"
        ) ?? 0
    }

    /// The pending uploads the server refused for good, by record name.
    func refusals() throws -> [String: ServerError] {
        Dictionary(uniqueKeysWithValues: try refusedRecords().compactMap { row in row.refusal.map { (row.recordName, $0) } })
    }

    /// The metadata of the records whose pending upload the server refused for good, by record name.
    func refusedRecords() throws -> [RecordMetadata] {
        try records(RecordMetadata.select + "pending_upload IS NOT NULL AND refusal IS NOT NULL ORDER BY record_name")
    }

    /// The metadata of the records whose pending upload the server refused for good or did not
    /// take at its last attempt (``RecordMetadata/retry``), by record name.
    func failedRecords() throws -> [RecordMetadata] {
        try records(
            RecordMetadata.select + "pending_upload IS NOT NULL AND (refusal IS NOT NULL OR retry IS NOT NULL) ORDER BY record_name")
    }

    /// How many mirrored objects this device holds and how many of their changes wait to go up,
    /// in `zone`, or in every zone when nil.
    func localDataCounts(in zone: MirrorZone.Key?) throws -> (objects: Int, unsent: Int) {
        let (condition, arguments): (String, StatementArguments) =
            zone.map { (" AND zone_name IS ? AND zone_owner IS ?", [$0.name, $0.owner]) } ?? ("", [])
        let objects = try Int.fetchOne(
            db, sql: "SELECT count(*) FROM cloudstore_record_metadata WHERE link_source IS NULL" + condition, arguments: arguments) ?? 0
        let unsent = try Int.fetchOne(
            db, sql: "SELECT count(*) FROM cloudstore_record_metadata WHERE pending_upload IS NOT NULL" + condition, arguments: arguments) ?? 0
        return (objects, unsent)
    }

    // MARK: Moved records

    /// Notes that `recordName` must be deleted from `zone` (replacing an earlier note for that zone).
    func addMoved(_ moved: MovedRecord) throws {
        try deleteMoved(moved.recordName, from: moved.zone)
        try db.execute(
            sql: """
                INSERT INTO cloudstore_mirror_moved_record
                (record_name, zone_name, zone_owner, change_tag, ancestor, upload_revision) VALUES (?, ?, ?, ?, ?, ?)
                """,
            arguments: [moved.recordName, moved.zone.name, moved.zone.owner, moved.changeTag, moved.ancestor, moved.uploadRevision])
    }

    /// Forgets a delete from a zone: acknowledged, or the object moved back in.
    func deleteMoved(_ recordName: String, from zone: MirrorZone.Key) throws {
        try db.cachedStatement(
            sql: "DELETE FROM cloudstore_mirror_moved_record WHERE record_name = ? AND zone_name IS ? AND zone_owner IS ?"
        ).execute(arguments: [recordName, zone.name, zone.owner])
    }

    /// Whether a delete of `recordName` from `zone` is pending.
    func hasMoved(_ recordName: String, from zone: MirrorZone.Key) throws -> Bool {
        try Bool.fetchOne(
            db.cachedStatement(
                sql: "SELECT 1 FROM cloudstore_mirror_moved_record WHERE record_name = ? AND zone_name IS ? AND zone_owner IS ?"),
            arguments: [recordName, zone.name, zone.owner]) ?? false
    }

    /// The deletes of moved records to send through the database of `scope`, in upload order.
    func moved(scope: DatabaseScope, limit: Int) throws -> [MovedRecord] {
        try moved(
            MovedRecord.select + "\(MirrorZone.Key.ownerCondition(scope)) ORDER BY upload_revision, sequence LIMIT ?",
            [.int64(Int64(limit))])
    }

    /// The pending delete of `recordName` from `zone`, if any.
    func moved(_ recordName: String, from zone: MirrorZone.Key) throws -> MovedRecord? {
        try moved(MovedRecord.selectInZone, [.string(recordName), .string(orNull: zone.name), .string(orNull: zone.owner)]).first
    }

    /// The rows a query of ``MovedRecord/select`` answers, read from the statement's columns.
    private func moved(_ sql: String, _ arguments: [AttributeValue]) throws -> [MovedRecord] {
        var rows: [MovedRecord] = []
        try db.each(sql, arguments) { rows.append(MovedRecord(statement: $0)) }
        return rows
    }

    // MARK: Zones

    /// Every zone's row, the primary zone's included.
    func zones() throws -> [MirrorZone] {
        try Row.fetchAll(
            db.cachedStatement(sql: "SELECT \(MirrorZone.columns) FROM cloudstore_mirror_zone ORDER BY zone_owner, zone_name")
        ).map(MirrorZone.init(row:))
    }

    /// The zones besides the primary one: owned shares and zones shared with this user.
    func sharedZones() throws -> [MirrorZone] {
        try zones().filter { $0.role != .primary }
    }

    /// A zone's row.
    func zone(_ zoneID: ZoneID) throws -> MirrorZone? {
        try Row.fetchOne(
            db.cachedStatement(sql: "SELECT \(MirrorZone.columns) FROM cloudstore_mirror_zone WHERE zone_name = ? AND zone_owner = ?"),
            arguments: [zoneID.zoneName, zoneID.ownerRecordName ?? ""]
        ).map(MirrorZone.init(row:))
    }

    /// The primary zone's row; nil before a container opened the store with this version.
    func primaryZone() throws -> MirrorZone? {
        try Row.fetchOne(
            db.cachedStatement(sql: "SELECT \(MirrorZone.columns) FROM cloudstore_mirror_zone WHERE role = 'primary'")
        ).map(MirrorZone.init(row:))
    }

    /// Stores a zone's row.
    func save(_ zone: MirrorZone) throws {
        try db.cachedStatement(
            sql: """
                INSERT OR REPLACE INTO cloudstore_mirror_zone
                (zone_name, zone_owner, role, permission, share, pending_share, server_state, root_entity, root_id, decision,
                 share_refusal)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """
        ).execute(arguments: [
            zone.zoneID.zoneName, zone.zoneID.ownerRecordName ?? "", zone.role.rawValue, zone.permission?.rawValue,
            try zone.share.map { try MirrorTables.encode($0) }, try zone.pendingShare.map { try MirrorTables.encode($0) },
            zone.serverState.rawValue, zone.root?.entityName, zone.root?.id.uuidString,
            try zone.decision.map { try MirrorTables.encode($0) }, try zone.shareRefusal.map { try MirrorTables.encode($0) },
        ])
    }

    /// Deletes a zone's row and its zone key records; every shared zone's when `zoneID` is nil
    /// (the primary zone's row stays).
    func deleteZone(_ zoneID: ZoneID?) throws {
        guard let zoneID else {
            try db.execute(sql: "DELETE FROM cloudstore_mirror_zone WHERE role <> 'primary'; DELETE FROM cloudstore_mirror_zone_key")
            return
        }
        for table in ["cloudstore_mirror_zone", "cloudstore_mirror_zone_key"] {
            try db.execute(
                sql: "DELETE FROM \(table) WHERE zone_name = ? AND zone_owner = ?", arguments: [zoneID.zoneName, zoneID.ownerRecordName ?? ""])
        }
    }

    /// The zones of the private database to save before uploading into them: owned zones not on
    /// the server (``ZoneServerState/needsSave``) that no decision of the app holds.
    func zonesToSave() throws -> [ZoneID] {
        // Read on every save that records uploads: only the columns that decide, no share record.
        let needsSave = ZoneServerState.allCases.filter(\.needsSave).map { "'\($0.rawValue)'" }.joined(separator: ", ")
        return try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT zone_name, zone_owner FROM cloudstore_mirror_zone
                    WHERE role <> 'sharedWithMe' AND server_state IN (\(needsSave)) AND decision IS NULL
                    ORDER BY zone_name
                    """)
        ).map { ZoneID(storedName: $0[0], owner: $0[1]) }
    }

    /// The zones whose uploads wait for a decision of the app (``MirrorZone/decision``), by the
    /// key record metadata names them with; an account change that is not confirmed in this
    /// session (`confirmsAccountDecision` false) holds nothing.
    func heldZones(confirmsAccountDecision: Bool = true) throws -> Set<MirrorZone.Key> {
        // Read for every batch: only the zones with a decision are decoded.
        let held = try Row.fetchAll(
            db.cachedStatement(sql: "SELECT \(MirrorZone.columns) FROM cloudstore_mirror_zone WHERE decision IS NOT NULL")
        ).map(MirrorZone.init(row:))
        return Set(
            held.filter { zone in
                if case .accountChanged? = zone.decision?.reason { return confirmsAccountDecision }
                return true
            }.map(\.key))
    }

    // MARK: State

    /// A value of `cloudstore_mirror_state`, as stored.
    func state(_ key: MirrorStateKey) throws -> Data? {
        try Data.fetchOne(db.cachedStatement(sql: "SELECT value FROM cloudstore_mirror_state WHERE key = ?"), arguments: [key.rawValue])
    }

    /// Stores a value of `cloudstore_mirror_state` as it is (nil: deletes it).
    func setState(_ key: MirrorStateKey, _ value: Data?) throws {
        if let value {
            try db.cachedStatement(sql: "INSERT OR REPLACE INTO cloudstore_mirror_state (key, value) VALUES (?, ?)")
                .execute(arguments: [key.rawValue, value])
        } else {
            try db.cachedStatement(sql: "DELETE FROM cloudstore_mirror_state WHERE key = ?").execute(arguments: [key.rawValue])
        }
    }

    /// A value of `cloudstore_mirror_state`, decoded.
    func state<T: Decodable>(_ key: MirrorStateKey, as type: T.Type) throws -> T? {
        try state(key).map { try MirrorTables.decode(type, $0) }
    }

    /// Stores a value of `cloudstore_mirror_state`, encoded (nil: deletes it).
    func setState<T: Encodable>(_ key: MirrorStateKey, encoding value: T?) throws {
        try setState(key, value.map { try MirrorTables.encode($0) })
    }
}
