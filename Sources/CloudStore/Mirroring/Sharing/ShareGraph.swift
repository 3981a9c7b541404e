import CloudStoreSync
import Foundation
import GRDB

/// Which objects belong together in a zone: an object and everything its cascade relationships
/// hold, as NSPersistentCloudKitContainer moves "the object graph" of a shared object. Pure: the
/// related objects come from a closure, so tests drive it directly.
///
/// - Sharing an object takes its graph: the object, then the destinations of its relationships whose
///   delete rule is `cascade`, recursively (a `Folder` and its `notes`).
/// - A new object goes to the zone of the object that holds it: the destination of a to-one
///   relationship whose inverse cascades (a new `Note` whose `folder` is shared is shared too).
enum ShareGraph {
    /// The objects of the graph of `root`, the root first, each once.
    static func members(
        of root: ObjectKey, in schema: Schema, related: (ObjectKey, RelationshipDescription) throws -> [UUID]
    ) rethrows -> [ObjectKey] {
        var members: [ObjectKey] = []
        var seen: Set<ObjectKey> = [root]
        var queue = [root]
        while !queue.isEmpty {
            let object = queue.removeFirst()
            members.append(object)
            guard let entity = schema.entity(named: object.entityName) else { continue }
            for relationship in entity.relationships where relationship.deleteRule == .cascade {
                for id in try related(object, relationship) {
                    let member = ObjectKey(entityName: relationship.destination, id: id)
                    if seen.insert(member).inserted { queue.append(member) }
                }
            }
        }
        return members
    }

    /// The relationships of an entity that name the object holding it: to-one relationships whose
    /// inverse cascades.
    static func holders(of entity: EntityDescription, in schema: Schema) -> [RelationshipDescription] {
        entity.toOneRelationships.filter { relationship in
            schema.inverse(of: relationship)?.deleteRule == .cascade
        }
    }
}

extension WriteContext {
    /// The zone of the object holding `object` (a note's folder), when it has one that this store
    /// mirrors: the zone `object` belongs in.
    func holderZone(of object: ObjectKey, in schema: Schema, ledger: Ledger) throws -> MirrorZone.Key? {
        guard let entity = schema.entity(named: object.entityName),
            let snapshot = try fetchSnapshot(entityName: entity.name, id: object.id)
        else { return nil }
        for relationship in ShareGraph.holders(of: entity, in: schema) {
            guard case .uuid(let holder)? = snapshot.values[relationship.name],
                let row = try ledger.find(holder.uuidString)
            else { continue }
            return row.zone
        }
        return nil
    }

    /// `object` and the objects its cascading relationships reach (``ShareGraph/members(of:in:related:)``).
    func shareGraph(of object: ObjectKey, in schema: Schema) throws -> [ObjectKey] {
        try ShareGraph.members(of: object, in: schema) { member, relationship in
            try relatedIDs(entityName: member.entityName, id: member.id, relationship: relationship.name)
        }
    }
}

/// Moves objects between zones inside a transaction: each record is uploaded whole in its new zone
/// and deleted from the zone it leaves if the server may have it there; links follow their objects
/// (``Ledger/linkZone(_:)``). The objects do not change, so history records nothing. What becomes
/// pending is stamped with the transaction's revision (``Ledger/revision()``).
struct ZoneMove {
    let ledger: Ledger
    let recordKeys: RecordKeys
    let schema: Schema
    let date: Date

    /// Moves `objects` into `zone`; answers whether anything moved.
    @discardableResult
    func move(_ objects: [ObjectKey], to zone: MirrorZone.Key) throws -> Bool {
        var moved = false
        var links: Set<String> = []
        for object in objects {
            let name = object.id.uuidString
            var row = try ledger.find(name) ?? RecordMetadata(recordName: name, entityName: object.entityName)
            for link in try ledger.links(of: object.id) { links.insert(link.recordName) }
            guard row.zone != zone else { continue }
            try moveRecord(&row, to: zone, keys: schema.entity(named: object.entityName).map { recordKeys($0) } ?? [])
            moved = true
        }
        for name in links.sorted() {
            guard var link = try ledger.find(name), let ends = link.link, try link.pendingUpload != .delete else { continue }
            let target = try ledger.linkZone(ends)
            guard link.zone != target else { continue }
            try moveRecord(&link, to: target, keys: [])
            moved = true
        }
        return moved
    }

    private func moveRecord(_ row: inout RecordMetadata, to zone: MirrorZone.Key, keys: Set<String>) throws {
        let revision = try ledger.revision()
        if row.mayBeOnServer {
            try ledger.addMoved(
                MovedRecord(
                    recordName: row.recordName, zone: row.zone, changeTag: row.changeTag, ancestor: try row.encodedAncestor(),
                    uploadRevision: revision))
        }
        // Moving back into a zone whose copy was still to be deleted: that copy stays and is
        // updated, with what this device knew of it (it may be on the server: forgetting that, a
        // delete here later would never reach it).
        let leftBehind = try ledger.moved(row.recordName, from: zone)
        try ledger.deleteMoved(row.recordName, from: zone)
        row.zone = zone
        row.forgetServerVersion()
        if let leftBehind {
            row.changeTag = leftBehind.changeTag
            row.mayBeOnServer = true
            row.setEncodedAncestor(leftBehind.ancestor)
        }
        row.refusal = nil
        // The whole record goes to its new zone; a move is not an edit, so the values changed here
        // and not yet uploaded keep the time they were changed (merges compare those times).
        let changed = try row.pendingUpload?.changeDates ?? [:]
        row.setPendingUpload(.save(full: true, keys: Dictionary(uniqueKeysWithValues: keys.map { ($0, changed[$0] ?? date) }))) {
            revision
        }
        try ledger.save(row)
    }
}
