import CloudStoreSync
import CloudStoreWire
import Foundation
import GRDB

extension MirrorTransaction {
    /// A fetched record with its encrypted fields opened (``RecordSealing/open(_:of:)``), or nil
    /// when it does not open: then it waits in `cloudstore_mirror_awaiting_decryption`, for its key
    /// (applied again once the key reaches this device, ``applyAwaitingDecryption()``) or refused
    /// (a field failed authentication: nothing of it is applied, an event and an error line name
    /// the record and field, and the record's next version replaces it). Sync goes on either way.
    func opened(_ record: Record, of entity: EntityDescription, in zone: MirrorZone.Key) throws -> Record? {
        guard RecordSealing.needsKey(entity) else { return record }
        let failure: RecordSealing.Failure
        switch Result(catching: { () throws(RecordSealing.Failure) in try sealing.open(record, of: entity) }) {
        case .success(let opened):
            // A version that opens replaces one that waited or was refused.
            if try awaitsDecryption() {
                try db.cachedStatement(sql: "DELETE FROM cloudstore_mirror_awaiting_decryption WHERE record_name = ?")
                    .execute(arguments: [record.recordName])
            }
            return opened
        case .failure(let error):
            failure = error
        }
        let refused: Bool
        switch failure {
        case .missingKey:
            refused = false
            logger.info(
                "a fetched record waits for its encryption key",
                metadata: ["record": "\(record.recordName)", "entity": "\(entity.name)", "reason": "\(failure.problem)"])
        case .refused(let field, let reason):
            refused = true
            logger.error(
                "a fetched record is refused: an encrypted field does not open",
                metadata: [
                    "record": "\(record.recordName)", "entity": "\(entity.name)", "field": "\(field)",
                    "reason": "\(reason.code.rawValue): \(reason.message)",
                ])
            decryptionRefusals.append(
                PersistentCloudContainer.DecryptionRefusal(
                    entityName: entity.name, recordName: record.recordName, field: field, reason: reason.message))
        }
        let zoneID = zoneID(zone)
        try db.execute(
                sql: """
                    INSERT OR REPLACE INTO cloudstore_mirror_awaiting_decryption
                        (record_name, zone_name, zone_owner, record, refused, problem) VALUES (?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    record.recordName, zoneID.zoneName, zoneID.ownerRecordName ?? "", try MirrorMetadata.encode(record), refused,
                    failure.problem,
                ])
        awaitingDecryption = true
        return nil
    }

    /// Keeps a zone key record fetched from a zone (``ZoneKeyRecord``), and learns the key it holds
    /// for this user when this device has the account key (else it is learned when the account
    /// key arrives, ``CloudMirror/loadKeyring()``). Answers whether a key was learned. A record
    /// that does not decode, or whose grant does not open, is logged and skipped: records sealed
    /// with its key wait.
    func applyZoneKeyRecord(_ record: Record, in zoneID: ZoneID) throws -> Bool {
        let key: ZoneKeyRecord
        do {
            key = try ZoneKeyRecord(record)
        } catch {
            logger.error("a zone key record is malformed; skipped", metadata: ["record": "\(record.recordName)", "reason": "\(error)"])
            return false
        }
        try db.saveZoneKeyRecord(record, in: zoneID)
        guard let keyring = sealing.keyring, keyring.learn(key, in: zoneID, logger: logger) else { return false }
        logger.info("learned a zone key", metadata: ["zone": "\(zoneID)", "key": "\(key.keyID)", "generation": "\(key.generation)"])
        return true
    }

    /// Applies the records that waited for their key again, now that this device may have it:
    /// each one that opens is applied as if fetched; the rest wait on. Refused ones stay refused.
    func applyAwaitingDecryption() throws {
        awaitingDecryption = nil
        try applySetAside(from: "cloudstore_mirror_awaiting_decryption", where: "refused = 0")
    }

    /// Forgets the fetched records set aside in a zone (for a unique key, or awaiting decryption),
    /// or only the one named `recordName`; in every zone when `zoneID` is nil.
    func forgetSetAsideRecords(in zoneID: ZoneID?, named recordName: String? = nil) throws {
        for table in ["cloudstore_mirror_kept_aside", "cloudstore_mirror_awaiting_decryption"] {
            guard let zoneID else {
                try db.execute(sql: "DELETE FROM \(table)")
                continue
            }
            var arguments: StatementArguments = [zoneID.zoneName, zoneID.ownerRecordName ?? ""]
            if let recordName { arguments += [recordName] }
            try db.execute(
                sql: "DELETE FROM \(table) WHERE zone_name = ? AND zone_owner = ?" + (recordName == nil ? "" : " AND record_name = ?"),
                arguments: arguments)
        }
    }

    /// Whether any record waits for decryption, read once per transaction.
    private func awaitsDecryption() throws -> Bool {
        if let awaitingDecryption { return awaitingDecryption }
        let known = try db.awaitsDecryption()
        awaitingDecryption = known
        return known
    }
}

extension Database {
    /// Whether a fetched record waits for decryption, or was refused (``MirrorTransaction/opened(_:of:in:)``).
    func awaitsDecryption() throws -> Bool {
        try Bool.fetchOne(self, sql: "SELECT 1 FROM cloudstore_mirror_awaiting_decryption LIMIT 1") ?? false
    }
}
