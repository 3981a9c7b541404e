import CloudStoreSync
import Foundation

/// Unique keys under sync. A uniqueness constraint of a mirrored entity holds per zone on the
/// server, which refuses a second record with the same key (`UNIQUE_FIELD_ERROR`, naming the
/// record that has it). Two devices can still create the same key offline: the one whose record
/// reaches the server second finds the other's record holding the key, either when it fetches
/// that record or when the server refuses its own upload (its copy is then applied as fetched).
/// Either way, by the entity's ``DuplicateKeyRule``, the local newcomer is refused (`refuse`:
/// kept here and listed as a refused upload, the record kept aside until the app changes the
/// newcomer's key or deletes it) or, by default, merged into the existing object
/// (``ConflictResolution/newcomerAgainstExisting(_:into:newcomer:)``): the existing object keeps
/// its identity, takes the newcomer's values where the policy says, and every object that referred
/// to the newcomer refers to it instead; the newcomer is deleted, and the merge is in the conflict
/// log. Both devices end with one object.
extension MirrorWrite {
    /// The local objects other than `id` that have the same values as `values` for one of the
    /// entity's uniqueness constraints. A constraint with a null value never collides.
    func uniqueKeyHolders(of entity: EntityDescription, values: [String: AttributeValue], excluding id: UUID) throws -> [UUID] {
        var holders: [UUID] = []
        for constraint in entity.uniquenessConstraints {
            let terms = constraint.compactMap { name in
                values[name].flatMap { $0 == .null ? nil : Condition.Node.compare(name, .equal, $0) }
            }
            guard terms.count == constraint.count else { continue }
            let condition = Condition(.and(terms + [.compare("id", .notEqual, .uuid(id))]))
            for holder in try context.fetchIDs(entityName: entity.name, where: condition) where !holders.contains(holder) {
                holders.append(holder)
            }
        }
        return holders
    }

    /// Why the holders of a fetched record's unique key cannot be merged into it, or nil when
    /// they can: the entity's ``DuplicateKeyRule`` must be `merge`, and each holder must be an
    /// object this device created or gave the key (the server has never seen it with it), in the
    /// record's zone. A holder in another zone (the store's constraint spans zones, the server's
    /// does not), one the server already has with the key (saved before the constraint was
    /// declared) or one of an entity that refuses duplicates stays as it is, and the record is
    /// kept aside; the server refuses the holder's upload, and the app changes its key.
    func uniqueKeyMergeProblem(_ holders: [UUID], of entity: EntityDescription, in zone: MirrorZone.Key) throws -> String? {
        if entity.duplicateKeyRule == .refuse, let holder = holders.first {
            return "object \(holder) has the same unique key, and \(entity.name)'s duplicateKeyRule is refuse"
        }
        for holder in holders {
            guard let row = try ledger.find(holder.uuidString) else { continue }
            if row.zone != zone {
                return "object \(holder) of another zone has the same unique key"
            }
            if row.isOnServer, try !changesUniqueKey(row, of: entity) {
                return "object \(holder) has the same unique key on the server"
            }
        }
        return nil
    }

    /// Merges the local holders of a fetched record's unique key into the record's object `id`
    /// (see the extension's summary), writes the object, re-points what referred to the holders
    /// and answers the keys the merged object must upload, with when they changed.
    func mergeUniqueKeyHolders(
        _ holders: [UUID], into id: UUID, of entity: EntityDescription, server serverValues: [String: AttributeValue],
        record: Record, in zone: MirrorZone.Key, _ page: inout FetchedPage, _ effects: inout MirrorEffects
    ) throws -> [String: Date] {
        let recordKeys = recordKeys(entity)
        var merged = serverValues
        var upload: [String: Date] = [:]
        var referrers: [(entityName: String, id: UUID, relationship: String)] = []
        var members: [(relationship: RelationshipDescription, side: LinkRecords.Side, member: UUID)] = []
        for holder in holders {
            guard let snapshot = try context.fetchSnapshot(entityName: entity.name, id: holder) else { continue }
            let row = try ledger.find(holder.uuidString)
            let pending = try row?.pendingUpload
            var changes = pending?.changeDates.filter { recordKeys.contains($0.key) } ?? [:]
            if row == nil || pending?.keysToUpload == nil {
                // Never recorded, or created here: every value is the newcomer's own.
                for key in recordKeys where changes[key] == nil { changes[key] = now }
            }
            let outcome = resolution.newcomerAgainstExisting(
                ConflictResolution.Fields(
                    local: recordValues(snapshot, entity), localChanges: changes, ancestor: nil, server: merged,
                    serverChanges: EditTimes.parse(record.fields[EditTimes.field]), serverModified: record.modified?.timestamp),
                into: ConflictResolution.Object(entityName: entity.name, id: id), newcomer: holder)
            merged = outcome.merged
            for key in outcome.keysToUpload { upload[key] = changes[key] ?? now }
            try log(outcome.conflicts, &effects)

            referrers += try self.referrers(to: holder, of: entity.name)
            for (relationship, side) in LinkRecords.sides(of: entity, in: schema) {
                for member in try context.relatedIDs(entityName: entity.name, id: holder, relationship: relationship.name) {
                    members.append((relationship, side, member))
                }
            }
            // The holder goes first, freeing the key; what referred to it is re-pointed below.
            try context.deleteNullifying(entityName: entity.name, id: holder)
            try recordLocalChange(.delete, of: holder.uuidString, &effects)
            for link in try ledger.links(of: holder) { try recordLocalChange(.delete, of: link.recordName, &effects) }
            effects.counts.deleted += 1
        }
        try apply(merged, to: entity, id: id, page: page, &effects)
        for referrer in referrers where try context.exists(entityName: referrer.entityName, id: referrer.id) {
            try context.update(EntitySnapshot(entityName: referrer.entityName, id: referrer.id, values: [referrer.relationship: .uuid(id)]))
            try recordLocalChange(.update(keys: [referrer.relationship]), of: referrer.id.uuidString, &effects)
        }
        for (relationship, side, member) in members {
            guard !(try context.relatedIDs(entityName: entity.name, id: id, relationship: relationship.name).contains(member)) else {
                continue
            }
            try context.addRelated(entityName: entity.name, id: id, relationship: relationship.name, member)
            let ends = LinkRecords.ends(side, object: id, member: member)
            let name = LinkRecords.recordName(ends)
            var row = try ledger.find(name) ?? RecordMetadata(recordName: name, entityName: LinkRecords.recordType, link: ends, zone: zone)
            try ledger.setPending(.save(full: true, keys: [:]), of: &row)
            try save(row, &effects)
        }
        return upload
    }

    /// The objects whose to-one relationships point at `target`, an object of `entityName`.
    private func referrers(to target: UUID, of entityName: String) throws -> [(entityName: String, id: UUID, relationship: String)] {
        var found: [(entityName: String, id: UUID, relationship: String)] = []
        for entity in schema.mirroredEntities {
            for relationship in entity.toOneRelationships where relationship.destination == entityName {
                let condition = Condition(.compare(relationship.name, .equal, .uuid(target)))
                for id in try context.fetchIDs(entityName: entity.name, where: condition) where id != target {
                    found.append((entity.name, id, relationship.name))
                }
            }
        }
        return found
    }

    /// Records a change this transaction made to an object or link for upload, by the rule a unit
    /// of work's recording follows (``Ledger/add(_:at:to:)``).
    private func recordLocalChange(_ change: PendingUpload.Change, of recordName: String, _ effects: inout MirrorEffects) throws {
        guard var row = try ledger.find(recordName) else { return }
        try ledger.add(change, at: now, to: &row)
        effects.wake.insert(row.zone.scope)
    }

    /// Whether this device changed a record's constrained fields since the server's version:
    /// the whole object is to be uploaded, or one of the changed keys is in a uniqueness
    /// constraint of `entity`.
    func changesUniqueKey(_ row: RecordMetadata, of entity: EntityDescription) throws -> Bool {
        guard case .save(let full, let keys)? = try row.pendingUpload else { return false }
        return full || !Set(entity.uniquenessConstraints.joined()).isDisjoint(with: keys.keys)
    }
}
