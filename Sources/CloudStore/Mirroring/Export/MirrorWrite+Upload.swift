import CloudStoreSync
import CloudStoreWire
import Foundation
import GRDB

/// One pending upload handed to the sync engine: the change, the record to save, and what was
/// sent, to tell the acknowledgement from later changes.
struct PreparedUpload: Sendable {
    var change: SyncEngine.PendingRecordZoneChange
    /// The record to save; nil for a delete.
    var record: Record?
    var sent: SentUpload
    /// For a delete: the version it is for, when this device has one (a conditional delete).
    var deleteChangeTag: String? = nil
}

/// The next uploads of a database, in upload order, and whether more wait after them.
struct PreparedUploads: Sendable {
    var uploads: [PreparedUpload]
    /// Whether uploads were left for a later batch (beyond the limit; not those skipped or held).
    var hasMore: Bool
}

/// What an upload carried, kept until the server answers.
struct SentUpload: Sendable {
    /// The upload revision the pending upload had when it was sent.
    var revision: Int64?
    /// The values the record carried (attributes and to-one ids), for an object.
    var values: [String: AttributeValue]
    /// The encrypted fields it carried, as sealed here (``RecordSealing/seal(_:of:)``).
    var sealed: [String: RecordSealing.SealedValue]
    /// The share change a share record carried.
    var share: PendingShareChange?
    /// The files of the encrypted assets it carried, sealed for this upload: removed once the
    /// server answered (``MirrorWrite/sealedFile(of:field:of:scope:reusing:)``).
    var sealedFiles: [URL] {
        sealed.values.compactMap { if case .asset(let asset) = $0.sealed { asset.fileURL } else { nil } }
    }

    init(
        revision: Int64?, values: [String: AttributeValue], sealed: [String: RecordSealing.SealedValue] = [:],
        share: PendingShareChange? = nil
    ) {
        self.revision = revision
        self.values = values
        self.sealed = sealed
        self.share = share
    }
}

extension MirrorWrite {
    /// The next pending uploads through the database of `scope`, in upload order, leaving out
    /// `skipping` (records the engine will not send again in this pass) and the records named in
    /// `holding` (their saves, and the deletes of copies they left without a change tag), and the
    /// records of the zones in `holdingZones` (one whose deletion waits for the app's decision), and
    /// reusing the files sealed for the encrypted assets of uploads sent before and not answered
    /// (`sealedBefore`: a batch the engine sends again, ``sealedFile(of:field:of:scope:reusing:)``): share
    /// changes first, then each save with the record to send and each delete,
    /// deletes from zones objects moved out of after the saves of the same revision. Every record
    /// handed out is marked as possibly on the server from now on, in this transaction, before it
    /// is sent.
    func prepareUploads(
        scope: DatabaseScope = .private, limit: Int, skipping: Set<RecordID>, holding: Set<String> = [],
        holdingZones: Set<MirrorZone.Key> = [], sealedBefore: [RecordID: [String: RecordSealing.SealedValue]] = [:],
        _ effects: inout MirrorEffects
    ) throws -> PreparedUploads {
        var prepared = try prepareShareUploads(scope: scope, skipping: skipping)
        var rows: [PreparedUpload] = []
        var revisions: [Int64] = []
        // Objects with encrypted attributes wait while this device has no key to seal them in
        // their zone (no account key yet, or a shared zone's key has not arrived).
        let sealed = Set(schema.mirroredEntities.filter(RecordSealing.needsKey).map(\.name))
        var sealable: [MirrorZone.Key: Bool] = [:]
        func unsealable(_ entityName: String, _ zone: MirrorZone.Key) -> Bool {
            guard sealed.contains(entityName) else { return false }
            if let known = sealable[zone] { return !known }
            let known = sealing.keyring?.sealingKey(zoneID(zone)) != nil
            sealable[zone] = known
            return !known
        }
        let (pending, morePending) = try ledger.pending(limit: limit, scope: scope) { name, entityName, zone in
            holding.contains(name) || holdingZones.contains(zone) || unsealable(entityName, zone)
                || skipping.contains(RecordID(recordName: name, zoneID: zoneID(zone)))
        }
        for var metadata in pending {
            let recordID = recordID(metadata)
            let upload: PreparedUpload
            switch try metadata.pendingUpload {
            case .delete?:
                upload = PreparedUpload(
                    change: .deleteRecord(recordID), record: nil,
                    sent: SentUpload(revision: metadata.uploadRevision, values: [:]), deleteChangeTag: metadata.changeTag)
            case let pendingSave?:
                let made: (Record, [String: AttributeValue], [String: RecordSealing.SealedValue])?
                do {
                    made = try recordToUpload(metadata, pendingSave, scope: scope, sealedBefore: sealedBefore[recordID] ?? [:])
                } catch let unsendable as UnsendableValue {
                    // Saved before the store refused such values: no record can carry it, so it
                    // is refused here, as the server would, until the app changes the object.
                    try refuse(
                        metadata.recordName,
                        ServerError(.badRequest, reason: unsendable.reason, recordName: metadata.recordName, zoneID: recordID.zoneID),
                        &effects)
                    continue
                }
                guard let (record, values, sealed) = made else {
                    // The object is gone without a delete being recorded: nothing to upload.
                    logger.warning("a pending upload names an object that does not exist; dropping it", metadata: ["record": "\(metadata.recordName)"])
                    try ledger.setPending(nil, of: &metadata)
                    if metadata.mayBeOnServer { try save(metadata, &effects) } else { try forget(metadata.recordName) }
                    continue
                }
                upload = PreparedUpload(
                    change: .saveRecord(recordID), record: record,
                    sent: SentUpload(revision: metadata.uploadRevision, values: values, sealed: sealed))
            case nil:
                continue
            }
            if metadata.changeTag == nil, metadata.link == nil, case .saveRecord = upload.change {
                // A create: until the server's answer says which version it made, what it carries
                // is the version the server may have, the ancestor a merge with another device's
                // later edit of it needs (without one, every field would look edited here).
                try ledger.markMayBeOnServer(metadata.recordName, ancestor: MirrorTables.encode(upload.sent.values))
            } else if !metadata.mayBeOnServer {
                try ledger.markMayBeOnServer(metadata.recordName)
            }
            rows.append(upload)
            revisions.append(metadata.uploadRevision ?? 0)
        }
        // Deletes from the zones objects left go after the saves that put them in their new zone.
        // A copy this device created there without hearing back waits like the create would: deleted
        // unconditionally before a fetch showed it, another device's edit of it would go unseen.
        let movedRows = try ledger.moved(scope: scope, limit: limit + 1)
        var moved = movedRows.prefix(limit).filter { moved in
            !skipping.contains(recordID(moved)) && !(moved.changeTag == nil && holding.contains(moved.recordName))
        }[...]
        for (index, upload) in rows.enumerated() {
            while let next = moved.first, next.uploadRevision < revisions[index] {
                prepared.append(movedUpload(next))
                moved.removeFirst()
            }
            prepared.append(upload)
        }
        prepared.append(contentsOf: moved.map(movedUpload))
        let taken = max(limit, 1)
        return PreparedUploads(
            uploads: Array(prepared.prefix(taken)), hasMore: morePending || movedRows.count > limit || prepared.count > taken)
    }

    private func movedUpload(_ moved: MovedRecord) -> PreparedUpload {
        PreparedUpload(
            change: .deleteRecord(recordID(moved)), record: nil, sent: SentUpload(revision: moved.uploadRevision, values: [:]),
            deleteChangeTag: moved.changeTag)
    }

    /// The record ID of a record's metadata: its name in its zone.
    func recordID(_ metadata: RecordMetadata) -> RecordID {
        RecordID(recordName: metadata.recordName, zoneID: zoneID(metadata.zone))
    }

    func recordID(_ moved: MovedRecord) -> RecordID {
        RecordID(recordName: moved.recordName, zoneID: zoneID(moved.zone))
    }

    /// The record to upload for a pending save (the record's `pending` upload, decoded once by
    /// the caller), the values it carries and the fields it sealed; nil when the object does not exist.
    private func recordToUpload(
        _ metadata: RecordMetadata, _ pending: PendingUpload, scope: DatabaseScope, sealedBefore: [String: RecordSealing.SealedValue]
    ) throws -> (Record, [String: AttributeValue], [String: RecordSealing.SealedValue])? {
        var record: Record
        var values: [String: AttributeValue] = [:]
        var sealed: [String: RecordSealing.SealedValue] = [:]
        let recordZone = zoneID(metadata.zone)
        if let ends = metadata.link {
            record = LinkRecords.record(ends, in: recordZone)
        } else {
            guard let entity = schema.entity(named: metadata.entityName), let id = UUID(text: metadata.recordName),
                var snapshot = try context.fetchSnapshot(entityName: entity.name, id: id)
            else { return nil }
            // A reference whose target has not arrived yet is still the object's value on the server.
            for reference in entity.relationships.contains(where: { !$0.isToMany }) ? try db.unresolvedReferences(of: entity.name, id: id) : [] {
                snapshot.values[reference.relationship] = .uuid(reference.target)
            }
            let recordKeys = recordKeys(entity)
            let keys = pending.keysToUpload.map { $0.intersection(recordKeys) }
            for (name, value) in snapshot.values where keys?.contains(name) ?? true {
                if let problem = StorableValues.problem(with: value, mirrored: true) {
                    throw UnsendableValue(reason: "\(entity.name).\(name) of \(id.uuidString) \(problem)")
                }
            }
            let unknownFields = try metadata.unknownFields
            record = try schema.record(for: snapshot, in: recordZone, keys: keys, unknownFields: keys == nil ? unknownFields : [:])
            let edited = EditTimes.parse(unknownFields[EditTimes.field])
                .merging(pending.changeDates.filter { recordKeys.contains($0.key) }) { _, new in new }
            record.fields[EditTimes.field] = EditTimes.fieldValue(edited)
            sealed = try sealing.seal(&record, of: entity)
            values = recordValues(snapshot, entity).filter { keys?.contains($0.key) ?? true }
            try attachFiles(to: &record, of: snapshot, entity, metadata, sealed: &sealed, scope: scope, sealedBefore: sealedBefore)
        }
        record.recordChangeTag = metadata.changeTag
        return (record, values, sealed)
    }

    /// Points each asset the record carries at its file, so the sync engine uploads the bytes before
    /// it saves the record, unless the server's copy already holds that asset in that field (then
    /// it travels as checksum and size alone, and nothing is uploaded again). An encrypted asset
    /// goes as a file of its bytes sealed (``sealedFile(of:field:of:scope:reusing:)``), kept in `sealed`
    /// for the acknowledgement; one the server holds already is left out of the record (an
    /// `update` keeps the fields it does not send; this device does not keep the sealed file's
    /// checksum to send it alone).
    private func attachFiles(
        to record: inout Record, of snapshot: EntitySnapshot, _ entity: EntityDescription, _ metadata: RecordMetadata,
        sealed: inout [String: RecordSealing.SealedValue], scope: DatabaseScope, sealedBefore: [String: RecordSealing.SealedValue]
    ) throws {
        for attribute in entity.attributes where attribute.allowsExternalStorage {
            guard case .asset(var asset)? = record.fields[attribute.name],
                case .externalData(let value)? = snapshot.values[attribute.name]
            else { continue }
            let onServer = try metadata.isOnServer && metadata.ancestor?[attribute.name] == .externalData(value)
            if RecordSealing.sealsFile(attribute) {
                if onServer {
                    record.fields[attribute.name] = nil
                    continue
                }
                let file = try sealedFile(of: value, field: attribute.name, of: record, scope: scope, reusing: sealedBefore[attribute.name])
                // A version of the record fetched later with this file holds these bytes.
                try db.setSealedAsset(file, field: attribute.name, record: record.recordName, in: key(record.recordID.zoneID), plain: value)
                sealed[attribute.name] = RecordSealing.SealedValue(sealed: .asset(file), value: .asset(asset))
                record.fields[attribute.name] = .asset(file)
                continue
            }
            if onServer { continue }
            asset.fileURL = context.layout.externalData?.url(for: value)
            record.fields[attribute.name] = .asset(asset)
        }
    }

    /// Seals the bytes of an encrypted asset into a file uploaded in their place, beside the
    /// engine's downloads: `<random>.<scope>.sealed`, removed once the server answered
    /// (``SentUpload/sealedFiles``); those of an upload a crash cut short, when the mirror starts.
    /// The file sealed for the same bytes by an upload that is sent again (`previous`) serves
    /// again while it is sealed with the zone's current key: the engine reuses what it uploaded
    /// of it, where a new seal would be new bytes to upload.
    func sealedFile(
        of value: ExternalData, field: String, of record: Record, scope: DatabaseScope, reusing previous: RecordSealing.SealedValue? = nil
    ) throws -> Asset {
        if let previous, previous.value == .asset(Asset(fileChecksum: value.checksum, size: value.size)),
            case .asset(let file) = previous.sealed, let url = file.fileURL,
            let key = sealing.keyring?.sealingKey(record.recordID.zoneID), (try? AssetEncryption.keyID(ofFileAt: url)) == key.id
        {
            return file
        }
        guard let files = context.layout.externalData else {
            throw StoreError(.externalData, "\(record.recordName).\(field) is an external-storage value, and this store keeps no files")
        }
        guard let source = files.url(for: value), files.contains(value) else {
            throw StoreError(
                .externalData,
                "the file of \(value) is missing or damaged in \(files.directory.path); the bytes cannot be sealed for upload (restore the file, or save the attribute again)")
        }
        let url = files.transfers.appendingPathComponent("\(UUID().uuidString).\(scope.rawValue).sealed")
        do {
            try FileManager.default.createDirectory(at: files.transfers, withIntermediateDirectories: true)
            let sealed = try sealing.sealAsset(from: source, to: url, field: field, of: record)
            return Asset(fileChecksum: sealed.fileChecksum, size: sealed.size, fileURL: url)
        } catch let failure as RecordSealing.Failure {
            try? FileManager.default.removeItem(at: url)
            throw failure
        } catch {
            try? FileManager.default.removeItem(at: url)
            throw StoreError(
                .externalData,
                "could not seal the bytes of \(record.recordName).\(field) into \(url.path) (\(error)); free space on that disk, and the upload goes again")
        }
    }

    /// Marks every mirrored object and link of a zone for upload, whole, as new records: the server
    /// lost them (the zone was recreated, or the account changed and the local data is kept), or
    /// the store held them before it first mirrored (the primary zone holds every object no other
    /// zone does). Metadata of records this device no longer has is forgotten.
    func uploadEverythingAgain(in zone: MirrorZone.Key = .primary, _ effects: inout MirrorEffects) throws {
        guard zone.isPrimary else {
            for var row in try ledger.records(in: zone) {
                let exists: Bool
                if let ends = row.link {
                    exists = try linkExists(ends)
                } else {
                    exists = try UUID(text: row.recordName).map { try context.exists(entityName: row.entityName, id: $0) } ?? false
                }
                guard exists else {
                    try forget(row.recordName)
                    continue
                }
                row.forgetServerVersion()
                row.refusal = nil
                let keys = schema.entity(named: row.entityName).map { recordKeys($0) } ?? []
                try ledger.setPending(.save(full: true, keys: Dictionary(uniqueKeysWithValues: keys.map { ($0, now) })), of: &row)
                try save(row, &effects)
            }
            return
        }
        var seen: Set<String> = []
        for entity in schema.mirroredEntities {
            for snapshot in try context.fetchSnapshots(entityName: entity.name) {
                let name = snapshot.id.uuidString
                seen.insert(name)
                // A public object goes up as a new one only if it never went (this user's, saved
                // before the store first mirrored); one the server has stays as it is there.
                var row: RecordMetadata
                if let existing = try ledger.find(name) {
                    guard existing.zone.isPrimary else { continue }
                    row = existing
                } else {
                    row = RecordMetadata(recordName: name, entityName: entity.name, zone: publicEntities.initialZone(of: entity.name))
                }
                row.forgetServerVersion()
                let values = recordValues(snapshot, entity)
                try ledger.setPending(.save(full: true, keys: Dictionary(uniqueKeysWithValues: values.keys.map { ($0, now) })), of: &row)
                try save(row, &effects)
                for (relationship, side) in LinkRecords.sides(of: entity, in: schema) where side.isCanonical {
                    for member in try context.relatedIDs(entityName: entity.name, id: snapshot.id, relationship: relationship.name) {
                        let ends = LinkRecords.ends(side, object: snapshot.id, member: member)
                        let linkName = LinkRecords.recordName(ends)
                        seen.insert(linkName)
                        var link: RecordMetadata
                        if let existing = try ledger.find(linkName) {
                            guard existing.zone.isPrimary else { continue }
                            link = existing
                        } else {
                            // Both ends of a public entity's links are public (``PublicEntities``).
                            link = RecordMetadata(
                                recordName: linkName, entityName: LinkRecords.recordType, link: ends,
                                zone: publicEntities.initialZone(of: entity.name))
                        }
                        link.forgetServerVersion()
                        try ledger.setPending(.save(full: true, keys: [:]), of: &link)
                        try save(link, &effects)
                    }
                }
            }
        }
        for row in try ledger.records(in: .primary) where !seen.contains(row.recordName) {
            try forget(row.recordName)
        }
    }

    /// Whether both objects of a link are here and linked.
    func linkExists(_ ends: LinkEnds) throws -> Bool {
        guard let (entity, relationship) = LinkRecords.canonical(ends.relationship, in: schema),
            try context.exists(entityName: entity.name, id: ends.source)
        else { return false }
        return try context.relatedIDs(entityName: entity.name, id: ends.source, relationship: relationship.name).contains(ends.target)
    }
}

/// A value an object was saved with before the store refused such values (a non-finite number,
/// a date out of range), which no record can carry.
struct UnsendableValue: Error {
    let reason: String
}
