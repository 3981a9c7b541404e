import CloudStoreSync
import Foundation
import GRDB

extension MirrorWrite {
    // MARK: Uploads

    /// The share changes to send through the database of `scope`: a save of the share record with
    /// its participants, or its delete (stop sharing, leave).
    func prepareShareUploads(scope: DatabaseScope, skipping: Set<RecordID>) throws -> [PreparedUpload] {
        var prepared: [PreparedUpload] = []
        for zone in try ledger.sharedZones() where zone.key.scope == scope {
            guard let change = zone.pendingShare else { continue }
            let recordID = RecordID(recordName: ShareMetadata.zoneShareRecordName, zoneID: zone.zoneID)
            guard !skipping.contains(recordID) else { continue }
            switch change {
            case .delete:
                prepared.append(
                    PreparedUpload(
                        change: .deleteRecord(recordID), record: nil, sent: SentUpload(revision: nil, values: [:], share: change)))
            case .save(let participants, let publicPermission, let title):
                var record =
                    zone.share
                    ?? Record(recordType: ShareMetadata.recordType, recordID: recordID, fields: [:])
                record.zoneID = recordID.zoneID
                if let title { record.fields["title"] = .string(title) }
                record.share = ShareMetadata(
                    publicPermission: publicPermission,
                    participants: participants.sorted { $0.key < $1.key }.map { .invite($0.key, permission: $0.value) })
                prepared.append(
                    PreparedUpload(
                        change: .saveRecord(recordID), record: record, sent: SentUpload(revision: nil, values: [:], share: change)))
            }
        }
        return prepared
    }

    /// The server saved a share record this device sent: it is the share from now on (its short
    /// GUID, participants and their statuses), and the change is no longer pending unless another
    /// was made meanwhile.
    func acknowledgeShareSave(_ record: Record, sent: SentUpload?, _ effects: inout MirrorEffects) throws {
        guard var zone = try ledger.zone(record.recordID.zoneID) else { return }
        try noteShareChange(from: zone.share, to: record, in: zone, removedHere: true, &effects)
        zone.share = record
        zone.serverState = .saved
        if zone.pendingShare == sent?.share { zone.pendingShare = nil }
        try save(zone, &effects)
        effects.zonesNotToSave.append(zone.zoneID)
        effects.counts.saved += 1
    }

    /// The server deleted a share record this device sent: the owner stopped sharing (the zone and
    /// its objects stay, unshared), or this participant left (the zone's copy goes when the next
    /// fetch reports it unshared).
    func acknowledgeShareDelete(in zoneID: ZoneID, sent: SentUpload?, _ effects: inout MirrorEffects) throws {
        guard var zone = try ledger.zone(zoneID) else { return }
        if zone.pendingShare == sent?.share { zone.pendingShare = nil }
        if zone.role == .ownedShare, zone.pendingShare == nil {
            try noteShareChange(from: zone.share, to: nil, in: zone, removedHere: true, &effects)
            zone.share = nil
        }
        try save(zone, &effects)
        effects.counts.deleted += 1
    }

    /// The server refused a share record's save: a newer version (participants accepted or left
    /// meanwhile) is taken as the base and the change stays pending, to go again with its tag;
    /// anything else is a refusal of the share change, kept in the zone's row for the call that
    /// made it (``MirrorZone/shareRefusal``) and recorded as the last failure.
    func resolveFailedShareSave(_ record: Record, error: ServerError, _ effects: inout MirrorEffects) throws {
        guard var zone = try ledger.zone(record.recordID.zoneID) else { return }
        switch error.serverErrorCode {
        case .conflict, .exists:
            if let server = error.serverRecord, !server.deleted {
                try noteShareChange(from: zone.share, to: server, in: zone, removedHere: false, &effects)
                zone.share = server
            } else {
                zone.share = nil
            }
            try save(zone, &effects)
        default:
            // Refused for good (an unknown user, too many participants): the change is dropped and
            // the failure reported; the share stays as the server has it.
            zone.pendingShare = nil
            zone.shareRefusal = error
            try save(zone, &effects)
            try recordFailure(PersistentCloudContainer.SyncFailure(error), &effects)
            logger.error("the server refused a share change", metadata: ["zone": "\(zone.zoneID)", "error": "\(error)"])
            effects.counts.failed += 1
        }
    }

    // MARK: Imports

    /// The zone a fetched page belongs to, made known to this store the first time: an owned
    /// share made on another device of this user, or a zone shared with this user. Nil for the
    /// primary zone and for zones that are not this store's (``MirrorZone/isMirrorable(_:)``).
    @discardableResult
    func adoptZone(_ zoneID: ZoneID, _ effects: inout MirrorEffects) throws -> MirrorZone? {
        guard zoneID != self.zoneID else { return nil }
        if let zone = try ledger.zone(zoneID) { return zone }
        guard MirrorZone.isMirrorable(zoneID, primary: self.zoneID) else { return nil }
        let zone = MirrorZone(zoneID: zoneID, role: zoneID.ownerRecordName == nil ? .ownedShare : .sharedWithMe, serverState: .saved)
        try save(zone, &effects)
        return zone
    }

    /// A share record fetched from its zone: the participants as they are now (who joined or left
    /// is recorded as share activity), and for a zone shared with this user, their permission.
    func applyShareRecord(_ record: Record, _ effects: inout MirrorEffects) throws {
        let zoneID = record.recordID.zoneID
        guard var zone = try adoptZone(zoneID, &effects) else { return }
        if record.recordChangeTag != nil, record.recordChangeTag == zone.share?.recordChangeTag { return }
        try noteShareChange(from: zone.share, to: record, in: zone, removedHere: false, &effects)
        zone.share = record
        if zone.role == .sharedWithMe, let permission = currentUserPermission(in: record) {
            zone.permission = permission
        }
        try save(zone, &effects)
        effects.counts.saved += 1
    }

    /// The share record's tombstone: the owner stopped sharing the zone.
    func applyShareDeletion(in zoneID: ZoneID, _ effects: inout MirrorEffects) throws {
        guard var zone = try ledger.zone(zoneID), zone.share != nil else { return }
        try noteShareChange(from: zone.share, to: nil, in: zone, removedHere: false, &effects)
        zone.share = nil
        try save(zone, &effects)
        effects.counts.deleted += 1
    }

    /// The current user's permission as a share record states it.
    func currentUserPermission(in record: Record) -> SharePermission? {
        if let participant = record.share?.currentUserParticipant { return participant.permission }
        guard let user = userRecordName else { return nil }
        return record.share?.participants?.first { $0.user == user && $0.acceptanceStatus != .removed }?.permission
    }

    /// Records who joined, left, was invited or changed permission between two versions of a share.
    private func noteShareChange(
        from old: Record?, to new: Record?, in zone: MirrorZone, removedHere: Bool, _ effects: inout MirrorEffects
    ) throws {
        var activity: [PersistentCloudContainer.ShareActivity] = []
        for change in ShareActivity.changes(from: old?.share, to: new?.share, removedHere: removedHere) {
            var entry = change
            entry.date = now
            entry.zoneID = zone.zoneID
            entry.sequence = try db.log(entry)
            activity.append(entry)
        }
        effects.shareActivity += activity
    }

    // MARK: Moving objects between zones

    /// Moves objects into `zone` (``ZoneMove``).
    func move(_ objects: [ObjectKey], to zone: MirrorZone.Key, _ effects: inout MirrorEffects) throws {
        if try ZoneMove(ledger: ledger, recordKeys: recordKeys, schema: schema, date: now).move(objects, to: zone) {
            effects.wakeAll()
        }
    }

    /// The copy an object left in the zone it moved out of changed on the server (another device
    /// edited it before this device's delete of it went up). If the object is still here, the edit
    /// is merged into it (``mergeLeftBehindCopy(_:_:)``); if this device deleted it since, it is
    /// an edit against a delete (``ConflictResolution/deletionAgainstEdit(of:writtenByThisDevice:)``):
    /// the object comes back where the edit is, or the delete goes again for the new version.
    /// Answers the metadata to apply the record with when the object comes back, else nil.
    func leftBehindCopyChanged(
        _ server: Record, _ moved: MovedRecord, _ effects: inout MirrorEffects, make: () -> RecordMetadata
    ) throws -> RecordMetadata? {
        guard server.recordChangeTag != moved.changeTag else { return nil }
        let row = try ledger.find(server.recordName)
        let entityName = row?.entityName ?? server.recordType ?? ""
        let exists: Bool
        if let ends = row?.link ?? LinkRecords.ends(of: server), entityName == LinkRecords.recordType {
            exists = try linkExists(ends)
        } else {
            exists = try UUID(text: server.recordName).map { try context.exists(entityName: entityName, id: $0) } ?? false
        }
        if exists, row != nil {
            try mergeLeftBehindCopy(server, moved, &effects)
            return nil
        }
        var winner = ConflictResolution.Winner.local
        if entityName != LinkRecords.recordType, let id = UUID(text: server.recordName) {
            let decision = resolution.deletionAgainstEdit(
                of: ConflictResolution.Object(entityName: entityName, id: id),
                writtenByThisDevice: deviceID != nil && server.modified?.deviceID == deviceID)
            try log(decision.1, &effects)
            winner = decision.0
        }
        guard winner == .server else {
            var updated = moved
            updated.changeTag = server.recordChangeTag
            try addMoved(updated, &effects)
            return nil
        }
        // The object comes back in the zone it left, with the other device's values; a copy this
        // device uploaded to its new zone since is deleted there.
        if let row, try row.pendingUpload == .delete, row.mayBeOnServer {
            try addMoved(
                MovedRecord(
                    recordName: row.recordName, zone: row.zone, changeTag: row.changeTag, ancestor: try row.encodedAncestor(),
                    uploadRevision: try ledger.revision()), &effects)
        }
        if row != nil { try forget(server.recordName) }
        try ledger.deleteMoved(server.recordName, from: moved.zone)
        var fresh = make()
        fresh.zone = moved.zone
        return fresh
    }

    /// Another device changed the copy an object left in the zone it moved out of (a participant
    /// edited a note the owner was moving out of the share): what it changed is merged into the
    /// object, field by field against that copy's last version here, and goes to the object's new
    /// zone; the pending delete is for the new version from now on, so nothing is deleted unseen.
    /// When the other device's holder wins (it moved the note to another folder meanwhile), the
    /// object follows its holder's zone, as a local move would. `server` is opened already (its
    /// encrypted attributes read, ``opened(_:of:in:)``): it comes through ``applyFetched(_:deletions:in:)``.
    func mergeLeftBehindCopy(_ server: Record, _ moved: MovedRecord, _ effects: inout MirrorEffects) throws {
        guard server.recordChangeTag != moved.changeTag else { return }
        var updated = moved
        updated.changeTag = server.recordChangeTag
        guard var row = try ledger.find(moved.recordName), row.link == nil,
            let entity = schema.entity(named: row.entityName), let id = UUID(text: row.recordName),
            let local = try context.fetchSnapshot(entityName: entity.name, id: id),
            let content = try? schema.content(of: server)
        else {
            // The delete stays pending, for the new version.
            try addMoved(updated, &effects)
            return
        }
        let serverValues = recordValues(content.snapshot, entity)
        // A copy this device created there without hearing back holds nothing of another device's
        // but what changed since: its own write is the ancestor.
        let ancestor = ConflictResolution.ancestor(
            try moved.ancestor.map { try MirrorTables.decode([String: AttributeValue].self, $0) }, server: serverValues,
            writtenBy: server.modified?.deviceID, createdBy: server.created?.deviceID, thisDevice: deviceID,
            versionKnown: moved.changeTag != nil)
        let localValues = recordValues(local, entity)
        // What this device changed since that version: its own edits, not the move.
        var localChanges: [String: Date] = [:]
        let edited = try row.pendingUpload?.changeDates ?? [:]
        for key in recordKeys(entity) where (localValues[key] ?? .null) != (ancestor?[key] ?? .null) {
            localChanges[key] = edited[key] ?? now
        }
        let outcome = resolution.editAgainstEdit(
            ConflictResolution.Fields(
                local: localValues, localChanges: localChanges, ancestor: ancestor, server: serverValues,
                serverChanges: EditTimes.parse(server.fields[EditTimes.field]), serverModified: server.modified?.timestamp),
            of: ConflictResolution.Object(entityName: entity.name, id: id))
        try log(outcome.conflicts, &effects)
        updated.ancestor = try MirrorTables.encode(serverValues)
        try addMoved(updated, &effects)
        let taken = outcome.merged.filter { (localValues[$0.key] ?? .null) != $0.value }
        guard !taken.isEmpty else { return }
        try apply(outcome.merged, to: entity, id: id, &effects)
        // The other device's values go to the object's new zone too.
        var keys = try row.pendingUpload?.changeDates ?? [:]
        var full = false
        if case .save(let isFull, _)? = try row.pendingUpload { full = isFull }
        for key in taken.keys { keys[key] = now }
        try ledger.setPending(.save(full: full || !row.mayBeOnServer, keys: keys), of: &row)
        try save(row, &effects)
        if ShareGraph.holders(of: entity, in: schema).contains(where: { taken.keys.contains($0.name) }) {
            try placeInHolderZone(ObjectKey(entityName: entity.name, id: id), &effects)
        }
    }

    /// Moves an object whose holder another device changed into its holder's zone, with its graph
    /// (``ShareGraph``); nothing when it is there already or its holder is not mirrored here.
    private func placeInHolderZone(_ object: ObjectKey, _ effects: inout MirrorEffects) throws {
        guard let zone = try context.holderZone(of: object, in: schema, ledger: ledger),
            let row = try ledger.find(object.id.uuidString), row.zone != zone
        else { return }
        try move(context.shareGraph(of: object, in: schema), to: zone, &effects)
    }

    // MARK: Losing access

    /// Removes this device's copy of a zone it may no longer use (its owner removed this user or
    /// stopped sharing, or this user left), with its metadata and zone row. Uploads that were still
    /// pending are logged in the conflict log as lost (``ConflictResolution/accessEnded(of:pending:local:)``).
    func removeZoneData(_ zone: MirrorZone, _ effects: inout MirrorEffects) throws {
        let key = zone.key
        var lost: [ConflictRecord] = []
        let rows = try ledger.records(in: key)
        for row in rows where row.link == nil {
            guard let id = UUID(text: row.recordName), let entity = schema.entity(named: row.entityName) else { continue }
            let local = try context.fetchSnapshot(entityName: entity.name, id: id)
            if let pending = try row.pendingUpload, pending != .delete {
                lost += resolution.accessEnded(
                    of: ConflictResolution.Object(entityName: entity.name, id: id), pending: pending,
                    recordKeys: recordKeys(entity), local: local.map { recordValues($0, entity) })
            }
        }
        try log(lost, &effects)
        for row in rows where row.link != nil {
            try removeLocalCopy(of: row, &effects)
        }
        for row in rows where row.link == nil {
            try removeLocalCopy(of: row, &effects)
        }
        try forgetZone(zone, &effects)
    }

    /// Keeps the objects of a share's zone that went away on this device, unmirrored: what the
    /// app chose for them (``PersistentCloudContainer/LocalDataChoice/keepLocalOnly``). One the
    /// app changes later is uploaded, as its own, with that change.
    func keepLocally(_ zone: MirrorZone, _ effects: inout MirrorEffects) throws {
        try db.execute(
            sql: "DELETE FROM cloudstore_record_metadata WHERE zone_name IS ? AND zone_owner IS ?", arguments: [zone.key.name, zone.key.owner])
        try forgetZone(zone, &effects)
    }

    /// Moves the objects of a share's zone that went away into the primary zone, each uploaded
    /// whole as this user's own (``PersistentCloudContainer/LocalDataChoice/uploadAgain``).
    func takeOver(_ zone: MirrorZone, _ effects: inout MirrorEffects) throws {
        let objects = try ledger.records(in: zone.key).compactMap { row in
            row.link == nil ? UUID(text: row.recordName).map { ObjectKey(entityName: row.entityName, id: $0) } : nil
        }
        try move(objects, to: .primary, &effects)
        // Links of objects that stayed behind (deleted here) go with the zone.
        try keepLocally(zone, &effects)
    }

    /// Forgets a zone this device no longer mirrors, once its records are dealt with: the
    /// deletes of records moved out of it, what it remembered of its sealed assets, the records
    /// kept aside in it, its row, and for a zone
    /// shared with this user, the end of their access in the share activity.
    private func forgetZone(_ zone: MirrorZone, _ effects: inout MirrorEffects) throws {
        let key = zone.key
        try db.execute(
            sql: "DELETE FROM cloudstore_mirror_moved_record WHERE zone_name IS ? AND zone_owner IS ?",
            arguments: [key.name, key.owner])
        try db.deleteSealedAssets(in: key)
        try forgetSetAsideRecords(in: zone.zoneID, &effects)
        if zone.role == .sharedWithMe {
            var ended = ShareActivity(change: .accessEnded, user: userRecordName, permission: zone.permission)
            ended.date = now
            ended.zoneID = zone.zoneID
            ended.sequence = try db.log(ended)
            effects.shareActivity.append(ended)
        }
        try deleteZone(zone.zoneID, &effects)
        try logOrphans(&effects)
    }

    /// Ends every share of the store without a trace on the server (the account changed and the
    /// local data is kept for the new one): zones shared with the previous user go with their
    /// local copies; this user's shared objects go back to the primary zone.
    func dropShares(_ effects: inout MirrorEffects) throws {
        for zone in try ledger.zones() where zone.role == .sharedWithMe {
            try removeZoneData(zone, &effects)
        }
        // Public objects stay in the public database (a NULL owner is this user's own zone).
        try db.execute(
            sql: """
                UPDATE cloudstore_record_metadata SET zone_name = NULL, zone_owner = NULL
                WHERE \(MirrorZone.Key.ownerCondition(.private)) OR (\(MirrorZone.Key.ownerCondition(.shared)))
                """)
        try ledger.deleteZone(nil)
        try db.execute(sql: "DELETE FROM cloudstore_mirror_moved_record")
    }
}
