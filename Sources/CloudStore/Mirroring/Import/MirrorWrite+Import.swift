import CloudStoreSync
import Foundation
import GRDB

extension MirrorWrite {
    /// Applies one fetched page of a zone: records in their latest server state and tombstones.
    /// Objects this device changed and has not uploaded yet are merged field by field; references to
    /// objects that have not arrived are kept and linked when they do. A zone other than the primary
    /// one is a share's (``adoptZone(_:)``); its share record updates the share.
    ///
    /// `deletedInFetch` names the objects whose tombstones the fetch under way brought before this
    /// page: a reference to one of them is cleared instead of waiting for a target that will not
    /// come. Answers them with this page's. With `reapplying`, the records are ones kept aside
    /// before (``applyKeptAside(_:)``), applied again.
    @discardableResult
    func applyFetched(
        _ records: [Record], deletions: [SyncEngine.Event.FetchedRecordZoneChanges.Deletion], in zoneID: ZoneID,
        deletedInFetch: Set<UUID> = [], reapplying: Bool = false, _ effects: inout MirrorEffects
    ) throws -> Set<UUID> {
        var page = FetchedPage(deletedOnServer: deletedInFetch, reapplying: reapplying)
        // A zone of the private database that is neither the primary zone nor a share's is another
        // store's (another zone name, another app): not applied here.
        guard try zoneID == self.zoneID || (zoneID == .publicDefault && !publicEntities.isEmpty) || adoptZone(zoneID, &effects) != nil
        else { return deletedInFetch }
        let zone = key(zoneID)
        for record in records where ShareMetadata.isShareType(record.recordType) {
            try applyShareRecord(record, &effects)
        }
        // Keys before the records sealed with them.
        var learnedKeys = false
        for record in records where record.recordType == ZoneKeyRecord.recordType {
            learnedKeys = try applyZoneKeyRecord(record, in: zoneID) || learnedKeys
        }
        // Objects before links, so a link finds both its objects when they come in the same page.
        // Users' published identity keys (public database) are the key directory's, not the store's.
        for record in records
        where record.recordType != LinkRecords.recordType && record.recordType != ZoneKeyRecord.recordType
            && record.recordType != UserKeyRecord.recordType && !ShareMetadata.isShareType(record.recordType)
        {
            try applyRecord(record, in: zone, &page, &effects)
        }
        for record in records where record.recordType == LinkRecords.recordType {
            try applyLink(record, in: zone, &effects)
        }
        for deletion in deletions where !ZoneKeyRecord.isKeyRecord(deletion.recordID.recordName) {
            if deletion.recordID.recordName == ShareMetadata.zoneShareRecordName {
                try applyShareDeletion(in: zoneID, &effects)
                continue
            }
            try applyDeletion(deletion.recordID, recordType: deletion.recordType, in: zone, &page, &effects)
        }
        // Records that waited for a key learned now (fetched in an earlier page, or before a
        // grant to this user arrived) are applied; uploads held back for it can go.
        if learnedKeys {
            try applyAwaitingDecryption(&effects)
            effects.wakeAll()
        }
        try logOrphans(&effects)
        return page.deletedOnServer
    }

    /// The metadata of a record fetched from `zone`, or nil when the record is not to be applied: it
    /// is the copy an object this device moved out of that zone left behind
    /// (``leftBehindCopyChanged(_:_:make:)``), or a copy in another zone than the object's copy
    /// here that is not the object (``ObjectCopies``: the copy another device's move left there,
    /// fetched before the move's delete of it, or that of a move a later move overtook; the device
    /// that deletes it merges what it holds). An object that another device moved into `zone`
    /// takes it as its zone from now on, and this device's copy in the zone it leaves is deleted
    /// when ``ObjectCopies`` says so, as if this device had moved the object, and it holds no value
    /// newer than the fetched copy's `values` (nil: unknown, then it is not deleted).
    /// `existing` is the record's metadata as read before.
    private func fetchedMetadata(
        _ record: Record, _ existing: RecordMetadata?, in zone: MirrorZone.Key, values: [String: AttributeValue]?,
        _ effects: inout MirrorEffects, _ make: () -> RecordMetadata
    ) throws -> RecordMetadata? {
        if let moved = try ledger.moved(record.recordName, from: zone) {
            return try leftBehindCopyChanged(record, moved, &effects, make: make)
        }
        guard var row = existing else {
            var row = make()
            row.zone = zone
            return row
        }
        guard row.zone != zone else { return row }
        switch ObjectCopies.choose(here: row.copy, fetched: ObjectCopies.Copy(record)) {
        case .keepHere:
            logger.debug(
                "skipped a copy in another zone than the object's",
                metadata: ["record": "\(record.recordName)", "zone": "\(zone.name ?? zoneID.zoneName)"])
            return nil
        case .takeFetched(let deleteHere):
            if deleteHere, let values, let here = try row.ancestor,
                !ObjectCopies.holdsNewerValues(
                    here, edited: EditTimes.parse(try row.unknownFields[EditTimes.field]), than: values,
                    edited: EditTimes.parse(record.fields[EditTimes.field]))
            {
                logger.debug(
                    "took a copy in another zone as the object; deleting the copy this device wrote",
                    metadata: ["record": "\(record.recordName)", "zone": "\(zone.name ?? zoneID.zoneName)"])
                try addMoved(
                    MovedRecord(
                        recordName: row.recordName, zone: row.zone, changeTag: row.changeTag, ancestor: try row.encodedAncestor(),
                        uploadRevision: try ledger.revision()), &effects)
            }
            row.zone = zone
            row.forgetChangeTag()
            return row
        }
    }

    private func applyRecord(_ record: Record, in zone: MirrorZone.Key, _ page: inout FetchedPage, _ effects: inout MirrorEffects) throws {
        guard let type = record.recordType, let entity = schema.entity(named: type), entity.isMirrored else {
            try keepForeign(record)
            return
        }
        let existing = try ledger.find(record.recordName)
        // The version this device already has (its own upload coming back, say). Change tags are
        // per zone: the same tag in another zone is another version.
        if let tag = record.recordChangeTag, let existing, existing.zone == zone, existing.changeTag == tag { return }
        guard let record = try opened(record, of: entity, in: zone, &effects) else { return }
        let content: RecordContent
        do {
            content = try schema.content(of: record)
        } catch {
            try keepForeign(record)
            return
        }
        let serverValues = recordValues(content.snapshot, entity)
        guard
            var row = try fetchedMetadata(
                record, existing, in: zone, values: serverValues, &effects,
                { RecordMetadata(recordName: record.recordName, entityName: entity.name) })
        else { return }
        if zone == .publicDatabase, let creator = record.created?.userRecordName {
            // Only its creator may change a public record: a local save checks this.
            try db.setPublicCreator(creator, of: record.recordName)
        }
        try adoptAssetFiles(of: record, entity)
        let id = content.snapshot.id
        let pending = try row.pendingUpload
        if !entity.uniquenessConstraints.isEmpty, !page.reapplying, try db.hasKeptAside() {
            // A version kept aside before is replaced by this one, applied or kept aside in turn.
            try db.cachedStatement(sql: "DELETE FROM cloudstore_mirror_kept_aside WHERE record_name = ?").execute(arguments: [record.recordName])
            if db.changesCount > 0 { page.replacedKeptAside.insert(record.recordName) }
        }
        let holders = entity.uniquenessConstraints.isEmpty ? [] : try uniqueKeyHolders(of: entity, values: serverValues, excluding: id)
        if !holders.isEmpty {
            // Local objects have the record's unique key: merged into it when they are newcomers
            // and the object has nothing pending itself; otherwise the record waits aside, kept.
            let exists = try context.exists(entityName: entity.name, id: id)
            let simple = pending == nil || (pending != .delete && !exists)
            let problem = try simple ? uniqueKeyMergeProblem(holders, of: entity, in: zone) : "object \(id) has changes of its own pending"
            if let problem {
                try keepAside(record, in: zone, entity: entity, problem: problem, page)
                return
            }
            let upload = try mergeUniqueKeyHolders(holders, into: id, of: entity, server: serverValues, record: record, in: zone, &page, &effects)
            try ledger.setPending(upload.isEmpty ? nil : .save(full: false, keys: upload), of: &row)
            row.serverHas(record, deviceID: deviceID)
            row.setAncestor(serverValues)
            row.setUnknownFields(content.unknownFields)
            try save(row, &effects)
            effects.counts.saved += 1
            return
        }
        switch pending {
        case .save?:
            if try context.exists(entityName: entity.name, id: id) {
                try merge(record, into: &row, &effects)
            } else {
                try apply(serverValues, to: entity, id: id, page: page, &effects)
                try ledger.setPending(nil, of: &row)
            }
        case .delete?:
            let (winner, conflicts) = resolution.deletionAgainstEdit(
                of: ConflictResolution.Object(entityName: entity.name, id: id),
                writtenByThisDevice: deviceID != nil && record.modified?.deviceID == deviceID)
            try log(conflicts, &effects)
            if winner == .server {
                // The server's edit wins over this device's delete: the object comes back.
                try apply(serverValues, to: entity, id: id, page: page, &effects)
                try ledger.setPending(nil, of: &row)
            }
        case nil:
            try apply(serverValues, to: entity, id: id, page: page, &effects)
        }
        row.serverHas(record, deviceID: deviceID)
        row.setAncestor(serverValues)
        row.setUnknownFields(content.unknownFields)
        try save(row, &effects)
        effects.counts.saved += 1
    }

    /// Moves the files the sync engine downloaded (and verified) for the record's assets into the
    /// store, before any row names them; they are the store's from here on. An asset whose bytes the
    /// store already holds is not downloaded in the first place (``CloudMirror`` tells the engine).
    /// With `downloadedOnly` (a conflict's server record, whose download may have failed) an asset
    /// without a file is left; otherwise it fails the page, which is fetched again.
    func adoptAssetFiles(of record: Record, _ entity: EntityDescription, downloadedOnly: Bool = false) throws {
        guard let files = context.layout.externalData else { return }
        for attribute in entity.attributes where attribute.type == .data {
            guard case .asset(let asset)? = record.fields[attribute.name] else { continue }
            let value = ExternalData(checksum: asset.fileChecksum, size: asset.size)
            if files.contains(value) || (downloadedOnly && asset.fileURL == nil) { continue }
            guard let file = asset.fileURL else {
                throw StoreError(
                    .externalData,
                    "\(entity.name).\(attribute.name) of \(record.recordName) is an asset of \(asset.size) bytes that was not downloaded; it is fetched again on the next sync")
            }
            try files.adopt(file, as: value)
        }
    }

    private func applyLink(_ record: Record, in zone: MirrorZone.Key, _ effects: inout MirrorEffects) throws {
        guard let ends = LinkRecords.ends(of: record), let (entity, relationship) = LinkRecords.canonical(ends.relationship, in: schema)
        else {
            try keepForeign(record)
            return
        }
        guard var row = try fetchedMetadata(record, try ledger.find(record.recordName), in: zone, values: nil, &effects, {
            RecordMetadata(recordName: record.recordName, entityName: LinkRecords.recordType, link: ends)
        }) else { return }
        row.serverHas(record, deviceID: deviceID)
        if try row.pendingUpload == .delete {
            let (winner, conflicts) = resolution.linkDeletionAgainstSave(link(ends, entity, relationship))
            try log(conflicts, &effects)
            if winner == .local {
                try save(row, &effects)
                return
            }
        }
        try ledger.setPending(nil, of: &row)
        try save(row, &effects)
        try applyLocally(ends)
        effects.counts.saved += 1
    }

    private func link(_ ends: LinkEnds, _ entity: EntityDescription, _ relationship: RelationshipDescription) -> ConflictResolution.Link {
        ConflictResolution.Link(entityName: entity.name, relationship: relationship.name, source: ends.source, target: ends.target)
    }

    /// Applies a tombstone of a record of `zone`. A record this device knows in another zone moved
    /// there: the tombstone is of the copy it left behind.
    private func applyDeletion(
        _ recordID: RecordID, recordType: String?, in zone: MirrorZone.Key, _ page: inout FetchedPage, _ effects: inout MirrorEffects
    ) throws {
        let name = recordID.recordName
        try ledger.deleteMoved(name, from: zone)
        let row = try ledger.find(name)
        if let row, row.zone != zone { return }
        try db.execute(sql: "DELETE FROM cloudstore_mirror_foreign_record WHERE record_name = ?", arguments: [name])
        try forgetSetAsideRecords(in: zoneID(zone), named: name, &effects)
        if let ends = row?.link ?? (recordType == LinkRecords.recordType ? LinkRecords.ends(recordName: name) : nil) {
            if var row, case .save? = try row.pendingUpload, let (entity, relationship) = LinkRecords.canonical(ends.relationship, in: schema) {
                let (winner, conflicts) = resolution.linkAgainstDeletion(link(ends, entity, relationship))
                try log(conflicts, &effects)
                if winner == .local {
                    row.forgetServerVersion()
                    try save(row, &effects)
                    return
                }
            }
            try removeLocally(ends)
            try forget(name)
            effects.counts.deleted += 1
            return
        }
        guard let id = UUID(text: name) else { return }
        // References that wait for this object wait for nothing now, and so will later ones.
        try dropUnresolvedReferences(to: id, &effects)
        page.deletedOnServer.insert(id)
        guard var row else {
            // Never mirrored here; delete the object if this device has it anyway.
            for entity in schema.mirroredEntities where recordType == nil || recordType == entity.name {
                if try context.exists(entityName: entity.name, id: id) {
                    try deleteImported(entityName: entity.name, id: id, &effects)
                    effects.counts.deleted += 1
                    return
                }
            }
            return
        }
        if case .save? = try row.pendingUpload {
            try applyServerDeletion(of: &row, &effects)
            return
        }
        if try context.exists(entityName: row.entityName, id: id) {
            try deleteImported(entityName: row.entityName, id: id, &effects)
        }
        try db.removeUnresolvedReferences(of: row.entityName, id: id)
        try forget(name)
        effects.counts.deleted += 1
    }

    /// Writes server values into an object, creating it if needed. A to-one reference whose target
    /// is not here yet is kept aside and set when the target arrives; an object that arrives sets
    /// the references and links that were waiting for it.
    /// A reference to an object the fetch under way deleted (`page`) is cleared and logged.
    func apply(
        _ values: [String: AttributeValue], to entity: EntityDescription, id: UUID, page: FetchedPage = FetchedPage(),
        _ effects: inout MirrorEffects
    ) throws {
        var values = values
        for relationship in entity.toOneRelationships {
            guard let value = values[relationship.name] else { continue }
            if case .uuid(let target) = value, try !context.exists(entityName: relationship.destination, id: target) {
                values[relationship.name] = .null
                if page.deletedOnServer.contains(target) {
                    try db.removeUnresolvedReferences(of: entity.name, id: id, relationship: relationship.name)
                    try log(
                        [
                            resolution.referenceAgainstDeletion(
                                of: ConflictResolution.Object(entityName: entity.name, id: id), property: relationship.name,
                                target: target, side: .server)
                        ], &effects)
                } else {
                    try db.addUnresolvedReference(entity: entity.name, id: id, relationship: relationship.name, target: target)
                }
            } else {
                try db.removeUnresolvedReferences(of: entity.name, id: id, relationship: relationship.name)
            }
        }
        let snapshot = EntitySnapshot(entityName: entity.name, id: id, values: values)
        if try context.exists(entityName: entity.name, id: id) {
            try context.update(snapshot)
            return
        }
        try context.insert(snapshot)
        // Two lookups that find nothing unless the schema lets them (most objects of most models).
        if setup.referencedEntities.contains(entity.name) {
            for waiting in try db.takeUnresolvedReferences(to: id) where try context.exists(entityName: waiting.entity, id: waiting.id) {
                try context.update(EntitySnapshot(entityName: waiting.entity, id: waiting.id, values: [waiting.relationship: .uuid(id)]))
            }
        }
        if setup.linkedEntities.contains(entity.name) {
            for link in try ledger.links(of: id) where try link.pendingUpload != .delete {
                if let ends = link.link { try applyLocally(ends) }
            }
        }
    }

    /// Forgets the references that waited for `target`, which was deleted: each is a value another
    /// device wrote (an object created in, or moved into, a parent deleted meanwhile) that lost to
    /// the deletion, and is logged.
    private func dropUnresolvedReferences(to target: UUID, _ effects: inout MirrorEffects) throws {
        var lost: [ConflictRecord] = []
        for waiting in try db.takeUnresolvedReferences(to: target) where try context.exists(entityName: waiting.entity, id: waiting.id) {
            lost.append(
                resolution.referenceAgainstDeletion(
                    of: ConflictResolution.Object(entityName: waiting.entity, id: waiting.id), property: waiting.relationship,
                    target: target, side: .server))
        }
        try log(lost, &effects)
    }

    /// Adds a link locally when both of its objects are here.
    private func applyLocally(_ ends: LinkEnds) throws {
        guard let (entity, relationship) = LinkRecords.canonical(ends.relationship, in: schema),
            try context.exists(entityName: entity.name, id: ends.source),
            try context.exists(entityName: relationship.destination, id: ends.target)
        else { return }
        try context.addRelated(entityName: entity.name, id: ends.source, relationship: relationship.name, ends.target)
    }

    private func removeLocally(_ ends: LinkEnds) throws {
        guard let (entity, relationship) = LinkRecords.canonical(ends.relationship, in: schema),
            try context.exists(entityName: entity.name, id: ends.source)
        else { return }
        try context.removeRelated(entityName: entity.name, id: ends.source, relationship: relationship.name, ends.target)
    }

    /// Keeps a fetched record aside that a local object's unique key keeps from being applied
    /// (``uniqueKeyMergeProblem(_:of:in:)``): it is applied again after each fetch
    /// (``applyKeptAside()``), once the app changed or deleted that object, or the object's own
    /// changes went up. The first time is a warning; later attempts that still fail, debug lines.
    private func keepAside(_ record: Record, in zone: MirrorZone.Key, entity: EntityDescription, problem: String, _ page: FetchedPage) throws {
        let zoneID = zoneID(zone)
        let seen =
            try page.replacedKeptAside.contains(record.recordName)
            || db.integer("SELECT 1 FROM cloudstore_mirror_kept_aside WHERE record_name = ?", [.string(record.recordName)]) != nil
        logger.log(
            level: seen || page.reapplying ? .debug : .warning, "a fetched record is kept aside: a local object has its unique key",
            metadata: ["record": "\(record.recordName)", "entity": "\(entity.name)", "reason": "\(problem)"])
        try db.execute(
            sql: "INSERT OR REPLACE INTO cloudstore_mirror_kept_aside (record_name, zone_name, zone_owner, record) VALUES (?, ?, ?, ?)",
            arguments: [record.recordName, zoneID.zoneName, zoneID.ownerRecordName ?? "", try MirrorTables.encode(record)])
    }

    /// Applies the records kept aside for a unique key again (``keepAside(_:in:entity:problem:)``):
    /// each one whose key is free now, or whose holders can merge into it now, is applied as if
    /// fetched; the others stay aside.
    func applyKeptAside(_ effects: inout MirrorEffects) throws {
        try applySetAside(from: "cloudstore_mirror_kept_aside", reapplying: true, &effects)
    }

    /// Takes the records set aside in `table` (those `condition` picks) out of it and applies each
    /// as if fetched again, in the order they were set aside; those that still cannot be applied
    /// are set aside anew.
    func applySetAside(from table: String, where condition: String = "1", reapplying: Bool = false, _ effects: inout MirrorEffects) throws {
        let rows = try Row.fetchAll(db, sql: "SELECT zone_name, zone_owner, record FROM \(table) WHERE \(condition) ORDER BY rowid")
        guard !rows.isEmpty else { return }
        try db.execute(sql: "DELETE FROM \(table) WHERE \(condition)")
        for row in rows {
            let zone = ZoneID(storedName: row[0], owner: row[1])
            try applyFetched([try MirrorTables.decode(Record.self, row[2])], deletions: [], in: zone, reapplying: reapplying, &effects)
        }
    }

    /// Keeps a record this schema cannot read (a newer app version's), so it is not lost.
    private func keepForeign(_ record: Record) throws {
        try db.execute(
            sql: "INSERT OR REPLACE INTO cloudstore_mirror_foreign_record (record_name, record) VALUES (?, ?)",
            arguments: [record.recordName, try MirrorTables.encode(record)])
    }
}

extension MirrorWrite {
    /// Removes this device's copy of a record the server no longer has.
    func removeLocalCopy(of row: RecordMetadata, _ effects: inout MirrorEffects) throws {
        if let ends = row.link {
            try removeLocally(ends)
        } else if let id = UUID(text: row.recordName), try context.exists(entityName: row.entityName, id: id) {
            try deleteImported(entityName: row.entityName, id: id, &effects)
            try db.removeUnresolvedReferences(of: row.entityName, id: id)
        }
        try forget(row.recordName)
        effects.counts.deleted += 1
    }

    /// Deletes the local copy of every mirrored object of the primary zone and its records'
    /// metadata (the zone is gone), or with `allZones` of every zone, shares included, and the
    /// shares themselves (another user's data replaces this one's). The conflict log stays.
    func deleteMirroredData(allZones: Bool = false, _ effects: inout MirrorEffects) throws {
        let elsewhere: Set<String> = allZones ? [] : Set(try String.fetchAll(db, sql: "SELECT record_name FROM cloudstore_record_metadata WHERE zone_name IS NOT NULL"))
        for entity in schema.mirroredEntities {
            for id in try context.fetchIDs(entityName: entity.name) where !elsewhere.contains(id.uuidString) {
                guard try context.exists(entityName: entity.name, id: id) else { continue }
                try context.delete(entityName: entity.name, id: id)
                effects.counts.deleted += 1
            }
        }
        if allZones {
            try db.execute(sql: "DELETE FROM cloudstore_record_metadata")
            try db.deleteSealedAssets(in: nil)
            try db.execute(sql: "DELETE FROM cloudstore_mirror_public_creator")
            try db.execute(sql: "DELETE FROM cloudstore_mirror_unresolved_reference")
            try ledger.deleteZone(nil)
            try db.execute(sql: "DELETE FROM cloudstore_mirror_moved_record")
            try forgetSetAsideRecords(in: nil, &effects)
        } else {
            try db.execute(sql: "DELETE FROM cloudstore_record_metadata WHERE zone_name IS NULL")
            try db.deleteSealedAssets(in: .primary)
            try db.execute(sql: "DELETE FROM cloudstore_mirror_moved_record WHERE zone_name IS NULL")
            try forgetSetAsideRecords(in: zoneID, &effects)
        }
        try db.execute(sql: "DELETE FROM cloudstore_mirror_foreign_record")
    }
}

extension MirrorWrite {
    /// Forgets what the server had of the primary zone's records, keeping the objects: nothing of
    /// them is mirrored or pending any more, and one the app changes later is uploaded whole with
    /// that change (``PersistentCloudContainer/LocalDataChoice/keepLocalOnly``).
    func forgetMirroredRecords(_ effects: inout MirrorEffects) throws {
        try db.execute(sql: "DELETE FROM cloudstore_record_metadata WHERE zone_name IS NULL")
        try db.deleteSealedAssets(in: .primary)
        try forgetSetAsideRecords(in: zoneID, &effects)
        try db.execute(sql: "DELETE FROM cloudstore_mirror_moved_record WHERE zone_name IS NULL")
        try db.execute(sql: "DELETE FROM cloudstore_mirror_foreign_record")
    }
}

/// What the import of one fetched page keeps track of while it applies the page's records.
struct FetchedPage {
    /// Objects whose tombstones the fetch under way brought, this page's included: a reference to
    /// one of them is cleared instead of waiting for a target that will not come.
    var deletedOnServer: Set<UUID> = []
    /// Whether the records are ones kept aside before, applied again (``MirrorWrite/applyKeptAside(_:)``).
    var reapplying = false
    /// The records whose version kept aside this page replaced by a newer one: kept aside again,
    /// they were seen before (a debug line, not a second warning).
    var replacedKeptAside: Set<String> = []
}

/// An object whose to-one parent an import deleted: kept, with the reference cleared.
struct Orphan: Sendable {
    var entityName: String
    var id: UUID
    var property: String
    var parent: UUID
}

extension MirrorWrite {
    /// Deletes an object for an import, nullifying instead of cascading. The objects a cascade
    /// removed on the deleting device come with deletions of their own; one that does not was moved
    /// in on another device meanwhile, and keeping it loses nothing. Its cleared reference is logged
    /// by ``logOrphans()`` if it is still there when the page is applied.
    func deleteImported(entityName: String, id: UUID, _ effects: inout MirrorEffects) throws {
        guard let entity = schema.entity(named: entityName) else { return }
        for relationship in entity.relationships where relationship.deleteRule == .cascade && relationship.isToMany {
            guard let inverse = relationship.inverse,
                let inverseRelationship = schema.entity(named: relationship.destination)?.relationship(named: inverse),
                !inverseRelationship.isToMany
            else { continue }
            for child in try context.relatedIDs(entityName: entityName, id: id, relationship: relationship.name) {
                effects.orphans.append(Orphan(entityName: relationship.destination, id: child, property: inverse, parent: id))
            }
        }
        try context.deleteNullifying(entityName: entityName, id: id)
    }

    /// Logs the references that deletes of parents cleared on objects that stayed: each is a value
    /// that lost to a delete made on another device.
    func logOrphans(_ effects: inout MirrorEffects) throws {
        let orphans = effects.orphans
        effects.orphans = []
        var lost: [ConflictRecord] = []
        for orphan in orphans {
            guard let snapshot = try context.fetchSnapshot(entityName: orphan.entityName, id: orphan.id),
                snapshot.values[orphan.property] == nil || snapshot.values[orphan.property] == .null
            else { continue }
            lost.append(
                resolution.referenceAgainstDeletion(
                    of: ConflictResolution.Object(entityName: orphan.entityName, id: orphan.id), property: orphan.property,
                    target: orphan.parent, side: .local))
        }
        try log(lost, &effects)
    }
}
