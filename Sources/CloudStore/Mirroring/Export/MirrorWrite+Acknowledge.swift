import CloudStoreSync
import Foundation
import GRDB

/// How a refused save ended, for the caller to act on what a transaction cannot.
enum SaveFailureOutcome: Equatable {
    /// Resolved here (merged, re-queued, or refused for good and recorded as such).
    case handled
    /// The zone is gone: recreate it and upload everything.
    case zoneMissing
}

extension MirrorWrite {
    /// Settles one batch the server answered: acknowledged saves and deletes, refused ones (each
    /// recorded as the last failure), the attempts of those it did not take this time
    /// (``recordRetry(of:_:)``), and the engine's state after it (stored under `stateKey`), all in
    /// this transaction. An answer that is not a retry ends the upload's retry state. `uploads` are
    /// what the records carried when they were handed out; `lostAndFetched`, saves whose version the
    /// server lacked before and a fetch covered since (``UnheardCreates/lostAndFetched``): their
    /// next such failure is decided at once. Returns the zones the server does not have.
    func acknowledge(
        _ sent: SyncEngine.Event.SentRecordZoneChanges, uploads: [RecordID: SentUpload], lostAndFetched: Set<String> = [],
        stateKey: MirrorStateKey = .engineState, _ effects: inout MirrorEffects
    ) throws -> Set<ZoneID> {
        var missing: Set<ZoneID> = []
        for record in sent.savedRecords {
            if record.recordName == ShareMetadata.zoneShareRecordName {
                try acknowledgeShareSave(record, sent: uploads[record.recordID], &effects)
            } else {
                try acknowledgeSave(of: record, sent: uploads[record.recordID], &effects)
            }
        }
        for recordID in sent.deletedRecordIDs {
            try acknowledgeDelete(of: recordID, sent: uploads[recordID], &effects)
        }
        for (recordID, error) in sent.failedRecordDeletes {
            try ledger.setRetry(nil, of: recordID.recordName, in: key(recordID.zoneID))
            switch error.serverErrorCode {
            case .notFound: try acknowledgeDelete(of: recordID, sent: uploads[recordID], &effects)
            case .zoneNotFound: missing.insert(recordID.zoneID)
            case .conflict where error.serverRecord != nil:
                // The record changed since the version this delete was for: its copy is applied as
                // if fetched (a delete against an edit, or a moved object's left-behind copy merged),
                // and a delete that still stands goes again for the new version.
                var server = error.serverRecord!
                server.zoneID = recordID.zoneID
                try applyFetched([server], deletions: [], in: recordID.zoneID, &effects)
            default:
                if try ledger.hasMoved(recordID.recordName, from: key(recordID.zoneID)) {
                    // The copy left behind cannot be deleted (access ended, say): nothing to retry.
                    logger.warning(
                        "the server refused to delete a moved record from the zone it left",
                        metadata: ["record": "\(recordID)", "error": "\(error)"])
                    try ledger.deleteMoved(recordID.recordName, from: key(recordID.zoneID))
                } else if recordID.recordName == ShareMetadata.zoneShareRecordName {
                    try resolveFailedShareSave(
                        Record(recordType: ShareMetadata.recordType, recordID: recordID, fields: [:]), error: error, &effects)
                } else {
                    try refuse(recordID.recordName, error, &effects)
                }
            }
        }
        for failure in sent.failedRecordSaves {
            try ledger.setRetry(nil, of: failure.record.recordName, in: key(failure.record.recordID.zoneID))
            if failure.record.recordName == ShareMetadata.zoneShareRecordName {
                if failure.error.serverErrorCode == .zoneNotFound {
                    missing.insert(failure.record.recordID.zoneID)
                } else {
                    try resolveFailedShareSave(failure.record, error: failure.error, &effects)
                }
                continue
            }
            let outcome = try resolveFailedSave(failure.record, error: failure.error, lostAndFetched: lostAndFetched, &effects)
            if outcome == .zoneMissing { missing.insert(failure.record.recordID.zoneID) }
        }
        for (recordID, error) in sent.retryingRecordChanges {
            try recordRetry(of: recordID, error)
        }
        try logOrphans(&effects)
        try ledger.setState(stateKey, encoding: sent.stateSerialization)
        return missing
    }

    /// The server did not take a record's upload this time, with an error that may pass: the
    /// upload stays pending, and its row counts the attempt, keeps the error and when the next
    /// attempt is due (now plus the server's `retryAfter`; nil: with the next sync).
    func recordRetry(of recordID: RecordID, _ error: ServerError) throws {
        let zone = key(recordID.zoneID)
        guard let row = try ledger.find(recordID.recordName), row.zone == zone, row.hasPendingUpload else { return }
        let retry = PersistentCloudContainer.ObjectSyncState.UploadRetry(
            error: error, attempts: (row.retry?.attempts ?? 0) + 1, nextAttempt: error.retryAfter.map { now.addingTimeInterval($0) })
        try ledger.setRetry(retry, of: recordID.recordName, in: zone)
    }

    /// The server saved a record and answered with its whole copy (a field it does not carry is
    /// null there): remember its tag, take what other devices changed
    /// (``ConflictResolution/acknowledgedUpload(_:sent:stillPending:of:)``), and keep pending only
    /// what changed here after the upload was sent.
    func acknowledgeSave(of saved: Record, sent: SentUpload?, _ effects: inout MirrorEffects) throws {
        guard var row = try ledger.find(saved.recordName), row.zone == key(saved.recordID.zoneID) else { return }
        // A create's ancestor is only what it carried (``prepareUploads``): the server's copy replaces it.
        let created = !row.isOnServer
        row.serverHas(saved, deviceID: deviceID)
        row.retry = nil
        effects.counts.saved += 1
        let unchangedSinceSent = sent != nil && sent?.revision == row.uploadRevision
        guard row.link == nil, let entity = schema.entity(named: row.entityName), let id = UUID(text: row.recordName)
        else {
            if unchangedSinceSent { try ledger.setPending(nil, of: &row) }
            try save(row, &effects)
            return
        }
        // The server's copy may hold other devices' values (``ConflictResolution/acknowledgedUpload(_:sent:stillPending:of:)``).
        let readable = sealing.readable(saved, of: entity, sealedHere: sent?.sealed ?? [:])
        var serverValues = try serverValues(of: readable, entity)
        let ancestor = created ? nil : try row.ancestor
        // A field the answer holds that this device cannot read (an encrypted asset it did not
        // send, whose file an answer does not bring): the save was of the version this device
        // had (its change tag was checked), so the field holds what it held then.
        for attribute in entity.attributes where serverValues[attribute.name] == nil && saved.fields[attribute.name] != nil {
            if let known = ancestor?[attribute.name] { serverValues[attribute.name] = known }
        }
        // A create the server took as sent already has its values as its ancestor, encoded.
        let createTakenAsSent = created && sent?.values == serverValues
        if !createTakenAsSent {
            row.setAncestor(ancestor.map { $0.merging(serverValues) { _, new in new } } ?? serverValues)
        }
        if let edited = saved.fields[EditTimes.field] { try row.setUnknownField(EditTimes.field, edited) }
        if createTakenAsSent, unchangedSinceSent {
            // A create the server took as sent, and nothing changed here since: the object holds
            // what was sent (no other version of it existed to import meanwhile), so there is
            // nothing to merge and nothing left to upload. The common acknowledgement, without
            // reading the object.
            try ledger.setPending(nil, of: &row)
            try save(row, &effects)
            return
        }
        // What changed here after the upload was sent. Unchanged since: the pending upload is the
        // save that was sent (a later change stamps a new revision), not decoded. Deleted here
        // since (nil): the pending delete goes up next.
        let changedSinceSent: [String: Date]?
        if unchangedSinceSent {
            changedSinceSent = [:]
        } else if case .save(_, let changes)? = try row.pendingUpload {
            changedSinceSent = changes
        } else {
            changedSinceSent = nil
        }
        if let changedSinceSent, let snapshot = try context.fetchSnapshot(entityName: entity.name, id: id) {
            let local = recordValues(snapshot, entity)
            let recordKeys = recordKeys(entity)
            let stillPending = changedSinceSent.filter { recordKeys.contains($0.key) }
            let outcome = resolution.acknowledgedUpload(
                ConflictResolution.Fields(
                    local: local, localChanges: [:], ancestor: ancestor, server: serverValues,
                    // Edit times only tell conflicts apart, and with nothing still pending there are none.
                    serverChanges: stillPending.isEmpty ? [:] : EditTimes.parse(saved.fields[EditTimes.field]),
                    serverModified: saved.modified?.timestamp),
                sent: sent?.values ?? serverValues, stillPending: stillPending,
                of: ConflictResolution.Object(entityName: entity.name, id: id))
            if outcome.merged.contains(where: { (local[$0.key] ?? .null) != $0.value }) {
                try apply(outcome.merged, to: entity, id: id, &effects)
            }
            try log(outcome.conflicts, &effects)
            try ledger.setPending(
                outcome.keysToUpload.isEmpty
                    ? nil
                    : .save(full: false, keys: Dictionary(uniqueKeysWithValues: outcome.keysToUpload.map { ($0, stillPending[$0] ?? now) })),
                of: &row)
        }
        try save(row, &effects)
    }

    /// The server deleted a record (or had none to delete): a share record, the copy an object
    /// left behind in the zone it moved out of, or a record this device deleted.
    func acknowledgeDelete(of recordID: RecordID, sent: SentUpload?, _ effects: inout MirrorEffects) throws {
        if recordID.recordName == ShareMetadata.zoneShareRecordName {
            try acknowledgeShareDelete(in: recordID.zoneID, sent: sent, &effects)
            return
        }
        let zone = key(recordID.zoneID)
        if try ledger.hasMoved(recordID.recordName, from: zone) {
            try ledger.deleteMoved(recordID.recordName, from: zone)
            effects.counts.deleted += 1
            return
        }
        guard var row = try ledger.find(recordID.recordName), row.zone == zone else { return }
        guard try row.pendingUpload == .delete else {
            // Re-created here after the delete was sent: upload it whole as a new record.
            row.forgetServerVersion()
            row.retry = nil
            try save(row, &effects)
            return
        }
        try forget(recordID.recordName)
        effects.counts.deleted += 1
    }

    /// The server refused an upload for good: it stays pending locally, not sent again until the
    /// app changes the object, and the refusal is the last failure.
    func refuse(_ recordName: String, _ error: ServerError, _ effects: inout MirrorEffects) throws {
        guard var row = try ledger.find(recordName) else { return }
        row.refusal = error
        try save(row, &effects)
        var failure = PersistentCloudContainer.SyncFailure(error)
        failure.recordName = recordName
        try recordFailure(failure, &effects)
        logger.error("the server refused an upload", metadata: ["record": "\(recordName)", "error": "\(error)"])
        effects.counts.failed += 1
    }

    /// The server refused a save: merge a conflict, decide an edit against a deletion, or record
    /// the refusal.
    func resolveFailedSave(
        _ record: Record, error: ServerError, lostAndFetched: Set<String> = [], _ effects: inout MirrorEffects
    ) throws -> SaveFailureOutcome {
        guard var row = try ledger.find(record.recordName), row.zone == key(record.recordID.zoneID) else { return .handled }
        switch error.serverErrorCode {
        case .conflict, .exists:
            guard let server = error.serverRecord, !server.deleted else {
                // No server copy to merge with: upload again as a new record.
                row.forgetChangeTag()
                try save(row, &effects)
                return .handled
            }
            if row.link != nil {
                // Both devices added the same link: it is on the server, which is all that matters.
                row.serverHas(server, deviceID: deviceID)
                if try row.pendingUpload != .delete { try ledger.setPending(nil, of: &row) }
                try save(row, &effects)
                effects.counts.saved += 1
                return .handled
            }
            if let entity = schema.entity(named: row.entityName), lacksEncryptedAssetFiles(server, entity) {
                // The engine could not download the bytes of the server copy's encrypted asset
                // (its download is best effort): no merge without them. The save stays pending
                // and goes again, and its conflict brings the server's copy again.
                logger.info(
                    "a conflict's server copy came without its encrypted asset's bytes: the save goes again",
                    metadata: ["record": "\(record.recordName)", "entity": "\(entity.name)"])
                try recordRetry(of: record.recordID, error)
                return .handled
            }
            guard let entity = schema.entity(named: row.entityName), let server = try opened(server, of: entity, in: row.zone, &effects)
            else {
                // The server's version does not open here (refused, or its key has not come):
                // this save cannot merge with it, and stays refused until the app changes the object.
                try refuse(record.recordName, error, &effects)
                return .handled
            }
            // Its assets' bytes, downloaded by the engine, before a row names them.
            try adoptAssetFiles(of: server, entity, downloadedOnly: true)
            try merge(server, into: &row, &effects)
            try save(row, &effects)
        case .uniqueFieldError:
            guard var server = error.serverRecord, try !holderMovesAway(server.recordName, entityName: row.entityName) else {
                // The key is taken by a record of the same request, or by one whose change away
                // from it is still to go up: this save goes again after it.
                try save(row, &effects)
                return .handled
            }
            // Another record has this object's unique key: its copy is applied as if fetched,
            // which merges this object into it (MirrorWrite+UniqueKeys). An object still
            // here could not be merged, and is refused for the app to change its key.
            server.zoneID = record.recordID.zoneID
            try applyFetched([server], deletions: [], in: record.recordID.zoneID, &effects)
            if let id = UUID(text: record.recordName), try context.exists(entityName: row.entityName, id: id) {
                try refuse(record.recordName, error, &effects)
            }
        case .zoneNotFound:
            return .zoneMissing
        case .notFound:
            if case .save? = try row.pendingUpload, row.isOnServer, !lostAndFetched.contains(row.recordName) {
                // The server no longer has the version this save was for: another device moved
                // the object to a zone a fetch will show (it is then merged there: created here
                // again, by the edit against the deletion or as a whole upload, it would live in
                // two zones), or deleted it. Decided once a fetch covered it: by the object's copy
                // in another zone, or by the tombstone (``applyServerDeletion(of:)``).
                effects.waitForFetch.insert(row.recordName)
                return .handled
            }
            try applyServerDeletion(of: &row, &effects)
        default:
            try refuse(record.recordName, error, &effects)
        }
        return .handled
    }

    /// Whether the record that holds a unique key on the server gives it up with a change still
    /// to upload here (``changesUniqueKey(_:of:)``).
    private func holderMovesAway(_ holder: String, entityName: String) throws -> Bool {
        guard let row = try ledger.find(holder), let entity = schema.entity(named: entityName) else { return false }
        return try changesUniqueKey(row, of: entity)
    }

    /// Merges the server's copy of an object into the local one, field by field against the
    /// ancestor (``ConflictResolution/editAgainstEdit(_:of:)``), logging every value that loses;
    /// the fields this device's value won stay pending.
    func merge(_ server: Record, into row: inout RecordMetadata, _ effects: inout MirrorEffects) throws {
        guard let entity = schema.entity(named: row.entityName), let id = UUID(text: row.recordName) else { return }
        let content = try schema.content(of: server)
        let serverValues = recordValues(content.snapshot, entity)
        let versionKnown = row.isOnServer
        row.serverHas(server, deviceID: deviceID)
        row.setUnknownFields(content.unknownFields)
        let ancestor = ConflictResolution.ancestor(
            try row.ancestor, server: serverValues, writtenBy: server.modified?.deviceID,
            createdBy: server.created?.deviceID, thisDevice: deviceID, versionKnown: versionKnown)
        row.setAncestor(serverValues)
        guard case .save? = try row.pendingUpload, let local = try context.fetchSnapshot(entityName: entity.name, id: id) else {
            // Deleted here meanwhile: the pending delete goes up with the new tag.
            return
        }
        let recordKeys = recordKeys(entity)
        let localChanges = try row.pendingUpload?.changeDates.filter { recordKeys.contains($0.key) } ?? [:]
        let outcome = resolution.editAgainstEdit(
            ConflictResolution.Fields(
                local: recordValues(local, entity), localChanges: localChanges, ancestor: ancestor, server: serverValues,
                serverChanges: EditTimes.parse(server.fields[EditTimes.field]), serverModified: server.modified?.timestamp),
            of: ConflictResolution.Object(entityName: entity.name, id: id))
        try apply(outcome.merged, to: entity, id: id, &effects)
        try log(outcome.conflicts, &effects)
        try ledger.setPending(
            outcome.keysToUpload.isEmpty
                ? nil : .save(full: false, keys: Dictionary(uniqueKeysWithValues: outcome.keysToUpload.map { ($0, localChanges[$0] ?? now) })),
            of: &row)
    }

    /// The server no longer has an object this device changed
    /// (``ConflictResolution/editAgainstDeletion(of:pendingKeys:local:)``): uploaded again as a new
    /// record, or deleted here with the local changes logged as lost.
    func applyServerDeletion(of row: inout RecordMetadata, _ effects: inout MirrorEffects) throws {
        guard let entity = schema.entity(named: row.entityName), let id = UUID(text: row.recordName) else {
            try forget(row.recordName)
            return
        }
        if case .save(true, _)? = try row.pendingUpload, row.isOnServer {
            // A whole upload over a version this device had: the object moved back into this zone
            // (or was deleted and inserted again here) while another device's move deleted the copy
            // it had left here. It is created here again, whole, once a fetch has covered the
            // failure (``resolveFailedSave(_:error:)``): had the move taken the object to another
            // zone this device can see, that fetch merged it there. A tombstone does not say why
            // the copy went: if another device that had not seen the move out deleted the object
            // for good, it comes back here rather than being lost.
            row.forgetServerVersion()
            try save(row, &effects)
            return
        }
        let local = try context.fetchSnapshot(entityName: entity.name, id: id)
        let recordKeys = recordKeys(entity)
        let pendingKeys = try Set(row.pendingUpload?.changeDates.keys.filter { recordKeys.contains($0) } ?? [])
        let (winner, conflicts) = resolution.editAgainstDeletion(
            of: ConflictResolution.Object(entityName: entity.name, id: id), pendingKeys: pendingKeys,
            local: local.map { recordValues($0, entity) })
        try log(conflicts, &effects)
        if winner == .local {
            row.forgetServerVersion()
            try ledger.setPending(.save(full: true, keys: Dictionary(uniqueKeysWithValues: recordKeys.map { ($0, now) })), of: &row)
            try save(row, &effects)
            return
        }
        if local != nil {
            try deleteImported(entityName: entity.name, id: id, &effects)
            effects.counts.deleted += 1
        }
        try db.removeUnresolvedReferences(of: entity.name, id: id)
        try forget(row.recordName)
    }

    /// The values a record carries for an entity's attributes and to-one relationships; fields the
    /// record does not carry are left out.
    func serverValues(of record: Record, _ entity: EntityDescription) throws -> [String: AttributeValue] {
        var values: [String: AttributeValue] = [:]
        for attribute in entity.attributes {
            guard let field = record.fields[attribute.name] else { continue }
            values[attribute.name] = field.isNull ? .null : try Schema.attributeValue(field, of: attribute, in: entity)
        }
        for relationship in entity.toOneRelationships {
            guard let field = record.fields[relationship.name] else { continue }
            if case .reference(let reference) = field, let target = UUID(text: reference.recordName) {
                values[relationship.name] = .uuid(target)
            } else {
                values[relationship.name] = .null
            }
        }
        return values
    }
}
