import CloudStoreSync
import Foundation
import GRDB

/// How a refused save ended, for the caller to act on what a transaction cannot.
enum SaveFailureOutcome: Equatable {
    /// Resolved here (merged, re-queued, or given up with the error recorded).
    case handled
    /// The zone is gone: recreate it and upload everything.
    case zoneMissing
    /// Refused for good; the change stays pending locally until the app changes the object again.
    case failed(ServerError)
}

extension MirrorTransaction {
    /// The server saved a record: remember its new tag and values, and keep pending only what
    /// changed here after the record was built.
    func acknowledgeSave(of saved: Record, sent: PendingExport?) throws {
        guard var row = try db.mirroredRecord(saved.recordName) else { return }
        row.changeTag = saved.recordChangeTag
        if row.link == nil, let entity = schema.entity(named: row.entityName) {
            row.ancestor = (row.ancestor ?? [:]).merging(try serverValues(of: saved, entity)) { _, new in new }
            if let edited = saved.fields[EditTimes.field] { row.unknownFields[EditTimes.field] = edited }
        }
        row.pending = Self.remaining(row.pending, after: sent)
        try store(row)
        counts.saved += 1
    }

    /// The server deleted a record.
    func acknowledgeDelete(of recordID: RecordID) throws {
        guard var row = try db.mirroredRecord(recordID.recordName) else { return }
        guard row.pending == .delete else {
            // Re-created here after the delete was sent: upload it whole as a new record.
            row.changeTag = nil
            row.ancestor = nil
            try store(row)
            return
        }
        try forget(recordID.recordName)
        counts.deleted += 1
    }

    /// What is still to upload once `sent` was acknowledged.
    static func remaining(_ pending: PendingExport?, after sent: PendingExport?) -> PendingExport? {
        guard let pending, let sent else { return pending }
        guard case .save(let full, let keys) = pending, case .save(let sentFull, let sentKeys) = sent else {
            return pending
        }
        let unsent = keys.filter { key, date in
            guard let sentDate = sentKeys[key] else { return !sentFull }
            return date > sentDate
        }
        let stillFull = full && !sentFull
        return unsent.isEmpty && !stillFull ? nil : .save(full: stillFull, keys: unsent)
    }

    /// The server refused a save for good: merge a conflict, apply the policy to a record that is
    /// gone, or record the failure.
    func resolveFailedSave(_ record: Record, error: ServerError, sent: PendingExport?) throws -> SaveFailureOutcome {
        guard var row = try db.mirroredRecord(record.recordName) else { return .handled }
        switch error.serverErrorCode {
        case .conflict, .exists:
            guard let server = error.serverRecord, !server.deleted else {
                // No server copy to merge with: upload again as a new record.
                row.changeTag = nil
                try store(row)
                return .handled
            }
            if row.link != nil {
                // Both devices added the same link: it is on the server, which is all that matters.
                row.changeTag = server.recordChangeTag
                row.pending = Self.remaining(row.pending, after: sent)
                try store(row)
                counts.saved += 1
                return .handled
            }
            try merge(server, into: &row)
            try store(row)
            return .handled
        case .zoneNotFound:
            return .zoneMissing
        case .notFound:
            try applyServerDeletion(of: &row)
            return .handled
        default:
            counts.failed += 1
            return .failed(error)
        }
    }

    /// Merges the server's copy of an object into the local one, field by field against the
    /// ancestor, logging every value that loses; the fields this device's value won are uploaded.
    func merge(_ server: Record, into row: inout MirroredRecord) throws {
        guard let entity = schema.entity(named: row.entityName), let id = UUID(uuidString: row.recordName) else { return }
        let content = try schema.content(of: server)
        let serverValues = recordValues(content.snapshot, entity)
        row.changeTag = server.recordChangeTag
        row.unknownFields = content.unknownFields
        if let deviceID, server.modified?.deviceID == deviceID {
            // The server's version is this device's own upload whose answer was lost: a save is
            // conditional on the version this device last saw, so nothing in it is another
            // device's edit, and this device's later edits are not in conflict with it.
            row.ancestor = serverValues
        }
        defer { row.ancestor = serverValues }
        guard let local = try context.fetchSnapshot(entityName: entity.name, id: id) else {
            // Deleted here meanwhile: the pending delete goes up with the new tag.
            return
        }
        let localChanges = row.pending?.changeDates.filter { entity.recordKeys.contains($0.key) } ?? [:]
        let outcome = FieldMerge(
            local: recordValues(local, entity), localChanges: localChanges, ancestor: row.ancestor,
            server: serverValues, serverChanges: EditTimes.parse(server.fields[EditTimes.field]),
            serverModified: server.modified?.timestamp
        ).resolve(entityName: entity.name, objectID: id, policy: policy, now: now)
        try apply(outcome.merged, to: entity, id: id)
        try log(outcome.conflicts)
        row.pending =
            outcome.keysToUpload.isEmpty
            ? nil : .save(full: false, keys: Dictionary(uniqueKeysWithValues: outcome.keysToUpload.map { ($0, localChanges[$0] ?? now) }))
    }

    /// The server no longer has an object this device changed: with `localWins` it is uploaded again
    /// as a new record; otherwise the deletion wins, and the local changes are logged as lost.
    func applyServerDeletion(of row: inout MirroredRecord) throws {
        guard let entity = schema.entity(named: row.entityName), let id = UUID(uuidString: row.recordName) else {
            try forget(row.recordName)
            return
        }
        let local = try context.fetchSnapshot(entityName: entity.name, id: id)
        if case .localWins = policy, local != nil {
            row.changeTag = nil
            row.ancestor = nil
            row.pending = .save(full: true, keys: Dictionary(uniqueKeysWithValues: entity.recordKeys.map { ($0, now) }))
            try store(row)
            try log([
                ConflictRecord(
                    date: now, entityName: entity.name, objectID: id, property: "*", losingSide: .server,
                    losingValue: .null, winningValue: .null, policy: policy.name)
            ])
            return
        }
        if let local {
            let lost = row.pending?.changeDates.keys.filter { entity.recordKeys.contains($0) }.sorted() ?? []
            try log(
                lost.map { key in
                    ConflictRecord(
                        date: now, entityName: entity.name, objectID: id, property: key, losingSide: .local,
                        losingValue: local.values[key] ?? .null, winningValue: .null, policy: policy.name)
                })
            try deleteImported(entityName: entity.name, id: id)
            counts.deleted += 1
        }
        try db.removePendingReferences(of: entity.name, id: id)
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
            if case .reference(let reference) = field, let target = UUID(uuidString: reference.recordName) {
                values[relationship.name] = .uuid(target)
            } else {
                values[relationship.name] = .null
            }
        }
        return values
    }
}
