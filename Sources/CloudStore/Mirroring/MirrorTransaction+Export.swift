import CloudStoreSync
import Foundation
import GRDB

/// The author of every write mirroring makes to objects; its transactions are never exported.
public enum MirrorAuthor {
    public static let `import` = "cloudstore.import"
}

extension MirrorTransaction {
    /// A many-to-many relationship of one object whose links may differ from the mirrored ones.
    struct DirtyLinks: Hashable {
        var entity: String
        var id: UUID
        var relationship: String
        var side: LinkRecords.Side
    }

    /// Folds up to `limit` local history transactions after the stored export position and stores
    /// the new position; returns whether history was folded to its end. The position is read in
    /// this transaction, so two folds never cover the same transactions.
    func foldUnexportedHistory(of store: PersistentStore, limit: Int) throws -> Bool {
        let after = try db.mirrorState(.exportedThrough, as: HistoryToken.self)
        let result = try foldHistory(of: store, after: after, limit: limit)
        try db.setMirrorState(.exportedThrough, encoding: result.token)
        return result.isComplete
    }

    /// Folds all local history after the export position, before an import applies server
    /// changes. History purged past the position is left to the next export, which compares every
    /// object with its server copy.
    func foldAllUnexportedHistory(of store: PersistentStore) throws {
        do {
            while try !foldUnexportedHistory(of: store, limit: 500) {}
        } catch let error as StoreError where error.code == .historyTokenExpired {
            return
        }
    }

    /// Folds up to `limit` local history transactions after `token` into pending uploads and
    /// returns the position read through (which also covers skipped imports), and whether history
    /// goes on after it.
    func foldHistory(
        of store: PersistentStore, after token: HistoryToken?, limit: Int
    ) throws -> (token: HistoryToken?, isComplete: Bool) {
        let page = try store.historyPage(
            db, after: token, filter: HistoryFilter(excludingAuthors: [MirrorAuthor.import], limit: limit))
        var dirty: Set<DirtyLinks> = []
        for transaction in page.transactions {
            for change in transaction.changes {
                guard let entity = schema.entity(named: change.entityName), entity.isMirrored else { continue }
                try fold(change, of: entity, at: transaction.timestamp, dirty: &dirty)
            }
        }
        for links in dirty.sorted(by: { "\($0.id)\($0.relationship)" < "\($1.id)\($1.relationship)" }) {
            try reconcile(links)
        }
        let isComplete = page.transactions.count < limit
        guard page.scannedThrough > (token?.transactionNumber ?? 0) else { return (token, isComplete) }
        return (HistoryToken(storeIdentifier: store.storeIdentifier, transactionNumber: page.scannedThrough), isComplete)
    }

    private func fold(
        _ change: HistoryChange, of entity: EntityDescription, at date: Date, dirty: inout Set<DirtyLinks>
    ) throws {
        let recordName = change.objectID.uuidString
        var metadata = try db.mirroredRecord(recordName) ?? MirroredRecord(recordName: recordName, entityName: entity.name)
        let serverMayHaveIt = mayBeOnServer(metadata)
        let folded: PendingExport.Change
        let linkSides = LinkRecords.sides(of: entity, in: schema)
        switch change.changeType {
        case .insert:
            folded = .insert(keys: entity.recordKeys)
            for (relationship, side) in linkSides {
                dirty.insert(DirtyLinks(entity: entity.name, id: change.objectID, relationship: relationship.name, side: side))
            }
        case .update:
            for (relationship, side) in linkSides where change.updatedProperties.contains(relationship.name) {
                dirty.insert(DirtyLinks(entity: entity.name, id: change.objectID, relationship: relationship.name, side: side))
            }
            let keys = change.updatedProperties.intersection(entity.recordKeys)
            guard !keys.isEmpty else { return }
            // A local edit of a reference replaces one still waiting for its target.
            for relationship in entity.toOneRelationships where keys.contains(relationship.name) {
                try db.removePendingReferences(of: entity.name, id: change.objectID, relationship: relationship.name)
            }
            folded = .update(keys: keys)
        case .delete:
            folded = .delete
            try db.removePendingReferences(of: entity.name, id: change.objectID)
            for var link in try db.mirroredLinks(of: change.objectID) where link.pending != .delete {
                link.pending = PendingExport.folding(.delete, at: date, into: link.pending, isOnServer: mayBeOnServer(link))
                if link.pending == nil { try forget(link.recordName) } else { try store(link) }
            }
        }
        metadata.pending = PendingExport.folding(folded, at: date, into: metadata.pending, isOnServer: serverMayHaveIt)
        if metadata.pending == nil && !metadata.isOnServer {
            try forget(recordName)
        } else {
            try store(metadata)
        }
    }

    /// Makes the mirrored links of one object's many-to-many relationship match its local links.
    func reconcile(_ links: DirtyLinks) throws {
        guard let entity = schema.entity(named: links.entity),
            let relationship = entity.relationship(named: links.relationship)
        else { return }
        let exists = try context.exists(entityName: entity.name, id: links.id)
        let current = exists ? Set(try context.relatedIDs(entityName: entity.name, id: links.id, relationship: links.relationship)) : []
        var mirrored: [UUID: MirroredRecord] = [:]
        for row in try db.mirroredLinks(of: links.id) where row.pending != .delete {
            guard let ends = row.link, ends.relationship == links.side.key else { continue }
            if links.side.isCanonical, ends.source == links.id { mirrored[ends.target] = row }
            if !links.side.isCanonical, ends.target == links.id { mirrored[ends.source] = row }
        }
        for member in current where mirrored[member] == nil {
            let ends = LinkRecords.ends(links.side, object: links.id, member: member)
            let name = LinkRecords.recordName(ends)
            var row = try db.mirroredRecord(name)
                ?? MirroredRecord(recordName: name, entityName: LinkRecords.recordType, link: ends)
            row.pending = PendingExport.folding(.insert(keys: []), at: now, into: row.pending, isOnServer: row.isOnServer)
            try store(row)
        }
        for (member, var row) in mirrored where !current.contains(member) {
            // A link whose other object has not arrived here yet was never applied locally; it stays.
            guard try context.exists(entityName: relationship.destination, id: member) else { continue }
            row.pending = PendingExport.folding(.delete, at: now, into: row.pending, isOnServer: row.isOnServer)
            if row.pending == nil { try forget(row.recordName) } else { try store(row) }
        }
    }

    /// Marks every mirrored object and link for upload as this device has it: after the zone was
    /// recreated on the server, or when history no longer reaches back to what was last exported.
    ///
    /// - Parameter forgetServer: true when the server lost everything (a new zone): change tags and
    ///   ancestors are dropped and everything is uploaded whole. False to upload only what differs
    ///   from the last server copy (history was purged).
    func markEverythingForUpload(forgetServer: Bool) throws {
        var seen: Set<String> = []
        for entity in schema.mirroredEntities {
            for snapshot in try context.fetchSnapshots(entityName: entity.name) {
                let name = snapshot.id.uuidString
                seen.insert(name)
                var row = try db.mirroredRecord(name) ?? MirroredRecord(recordName: name, entityName: entity.name)
                if forgetServer {
                    row.changeTag = nil
                    row.ancestor = nil
                }
                let values = recordValues(snapshot, entity)
                if let ancestor = row.ancestor, row.isOnServer {
                    let changed = Set(values.keys.filter { values[$0] != (ancestor[$0] ?? .null) })
                    if !changed.isEmpty {
                        row.pending = PendingExport.folding(.update(keys: changed), at: now, into: row.pending, isOnServer: true)
                    }
                } else {
                    row.pending = .save(full: true, keys: Dictionary(uniqueKeysWithValues: values.keys.map { ($0, now) }))
                }
                if row.pending != nil { try store(row) } else { try db.save(row) }
                for (relationship, side) in LinkRecords.sides(of: entity, in: schema) where side.isCanonical {
                    for member in try context.relatedIDs(entityName: entity.name, id: snapshot.id, relationship: relationship.name) {
                        let ends = LinkRecords.ends(side, object: snapshot.id, member: member)
                        let linkName = LinkRecords.recordName(ends)
                        seen.insert(linkName)
                        var link = try db.mirroredRecord(linkName)
                            ?? MirroredRecord(recordName: linkName, entityName: LinkRecords.recordType, link: ends)
                        if forgetServer { link.changeTag = nil }
                        if !link.isOnServer { link.pending = .save(full: true, keys: [:]) }
                        if link.pending != nil { try store(link) } else { try db.save(link) }
                    }
                }
            }
        }
        for var row in try db.mirroredRecords(pendingOnly: false) where !seen.contains(row.recordName) {
            if forgetServer {
                try forget(row.recordName)
            } else if row.isOnServer {
                // Gone here but still on the server: delete it there (unless its link is merely unapplied).
                if let ends = row.link, try !context.exists(entityName: entityOfSource(ends), id: ends.source) ||
                    !context.exists(entityName: entityOfTarget(ends), id: ends.target) { continue }
                row.pending = .delete
                try store(row)
            } else {
                try forget(row.recordName)
            }
        }
    }

    func entityOfSource(_ ends: LinkEnds) -> String {
        LinkRecords.canonical(ends.relationship, in: schema)?.0.name ?? ""
    }

    func entityOfTarget(_ ends: LinkEnds) -> String {
        LinkRecords.canonical(ends.relationship, in: schema)?.1.destination ?? ""
    }
}

extension ReadContext {
    /// The record to upload for a pending save, and what it carries; nil when there is nothing to
    /// upload (the save was acknowledged meanwhile, or the object is gone and a delete follows).
    func recordToUpload(_ recordName: String, schema: Schema, zoneID: ZoneID) throws -> (Record, PendingExport)? {
        guard let row = try db.mirroredRecord(recordName), let pending = row.pending, case .save = pending else {
            return nil
        }
        var record: Record
        if let ends = row.link {
            record = LinkRecords.record(ends, in: zoneID)
        } else {
            guard let entity = schema.entity(named: row.entityName), let id = UUID(uuidString: recordName),
                var snapshot = try fetchSnapshot(entityName: entity.name, id: id)
            else { return nil }
            // A reference whose target has not arrived yet is still the object's value on the server.
            for reference in try db.pendingReferences(of: entity.name, id: id) {
                snapshot.values[reference.relationship] = .uuid(reference.target)
            }
            let keys = pending.keysToUpload.map { $0.intersection(entity.recordKeys) }
            record = try schema.record(
                for: snapshot, in: zoneID, keys: keys, unknownFields: keys == nil ? row.unknownFields : [:])
            let edited = EditTimes.parse(row.unknownFields[EditTimes.field])
                .merging(pending.changeDates.filter { entity.recordKeys.contains($0.key) }) { _, new in new }
            record.fields[EditTimes.field] = EditTimes.fieldValue(edited)
        }
        record.recordChangeTag = row.changeTag
        return (record, pending)
    }
}
