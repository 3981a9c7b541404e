import CloudStoreSync
import Foundation
import GRDB
import Synchronization

/// Decides at commit what each save must upload: the unit-of-work observer a mirrored store
/// requires. In the save's own SQLite transaction it turns the save's changes into pending uploads
/// in `cloudstore_record_metadata` (per record: a save with the changed keys, or a delete), links
/// of many-to-many relationships included; once the save committed it tells the sync engine.
///
/// Imports (author `cloudstore.import`) are never recorded: what they make pending, mirroring
/// records itself.
struct PendingUploadRecorder: RequirableUnitOfWorkObserver {
    let schema: Schema
    let recordKeys: RecordKeys
    let publicEntities: PublicEntities
    /// The engines to wake once a save committed uploads; nil for another process's plain store.
    let wake: EngineWake?

    static let requiredName = "cloudstore.mirroring"

    var name: String { Self.requiredName }

    /// The recorder of a store instance that writes a mirrored file without mirroring it (another
    /// process's plain `PersistentStore`): it records as the container does, and wakes no engine
    /// (the mirroring process notices the commit).
    static func forOtherWriter(of db: Database, schema: Schema) throws -> PendingUploadRecorder {
        PendingUploadRecorder(schema: schema, recordKeys: RecordKeys(schema), publicEntities: try .stored(in: db), wake: nil)
    }

    func unitOfWorkWillCommit(_ unitOfWork: CommittingUnitOfWork) throws {
        guard unitOfWork.author != MirrorAuthor.import else { return }
        var recording = PendingUploadRecording(
            context: unitOfWork.context, schema: schema, recordKeys: recordKeys, publicEntities: publicEntities, date: unitOfWork.date)
        for change in unitOfWork.changes { try recording.record(change) }
        try recording.finish()
        guard let wake, !recording.scopes.isEmpty else { return }
        // The zones to save first are read in this transaction, from their rows.
        let (scopes, zones) = (recording.scopes, recording.scopes.contains(.private) ? try recording.ledger.zonesToSave() : [])
        unitOfWork.db.afterNextTransaction { _ in wake.wake(scopes, saving: zones) }
    }
}

/// The pending uploads one unit of work records, change by change (``PendingUpload/adding(_:at:to:mayBeOnServer:)``),
/// then the links of the many-to-many relationships it touched, compared with the mirrored ones.
struct PendingUploadRecording {
    let context: WriteContext
    /// The record metadata, in the unit of work's transaction.
    let ledger: Ledger
    let schema: Schema
    let recordKeys: RecordKeys
    /// The entities mirrored in the public database: their new objects go there.
    let publicEntities: PublicEntities
    /// When the changes being recorded were made (the edit times `lastWriterWins` compares).
    var date: Date
    /// The current user as the store last heard it, read when a public object is changed.
    private var userRecordName: String??
    private var dirtyLinks: Set<DirtyLinks> = []
    /// Objects inserted, and objects given another holder (``ShareGraph/holders(of:in:)``): their
    /// zone is decided once every change is recorded.
    private var inserted: [ObjectKey] = []
    private var reparented: [ObjectKey] = []
    /// The zones this store mirrors besides the primary one, read when first needed.
    private var zones: [MirrorZone.Key: MirrorZone]?
    /// The databases the recorded uploads go through; empty when nothing was recorded.
    private(set) var scopes: Set<DatabaseScope> = []

    /// A many-to-many relationship of one object whose links may differ from the mirrored ones.
    struct DirtyLinks: Hashable {
        var entity: String
        var id: UUID
        var relationship: String
        var side: LinkRecords.Side
    }

    init(context: WriteContext, schema: Schema, recordKeys: RecordKeys, publicEntities: PublicEntities = .none, date: Date) {
        self.context = context
        self.ledger = Ledger(context.db)
        self.schema = schema
        self.recordKeys = recordKeys
        self.publicEntities = publicEntities
        self.date = date
    }

    private var db: Database { context.db }

    /// Records what one local change of an object makes pending.
    mutating func record(_ change: HistoryChange) throws {
        guard let entity = schema.entity(named: change.entityName), entity.isMirrored else { return }
        let recordName = change.objectID.uuidString
        var metadata =
            try ledger.find(recordName)
            ?? RecordMetadata(recordName: recordName, entityName: entity.name, zone: publicEntities.initialZone(of: entity.name))
        let object = ObjectKey(entityName: entity.name, id: change.objectID)
        try checkWritable(object, in: metadata.zone)
        let linkSides = LinkRecords.sides(of: entity, in: schema)
        let local: PendingUpload.Change
        switch change.changeType {
        case .insert:
            local = .insert(keys: recordKeys(entity))
            inserted.append(object)
            for (relationship, side) in linkSides {
                dirtyLinks.insert(DirtyLinks(entity: entity.name, id: change.objectID, relationship: relationship.name, side: side))
            }
        case .update:
            for (relationship, side) in linkSides where change.updatedProperties.contains(relationship.name) {
                dirtyLinks.insert(DirtyLinks(entity: entity.name, id: change.objectID, relationship: relationship.name, side: side))
            }
            let keys = change.updatedProperties.intersection(recordKeys(entity))
            guard !keys.isEmpty else { return }
            if ShareGraph.holders(of: entity, in: schema).contains(where: { keys.contains($0.name) }) {
                reparented.append(object)
            }
            // A local edit of a reference replaces one still waiting for its target: this device
            // never showed that value, so it goes into the conflict log as the server's that lost.
            let edited = Set(entity.toOneRelationships.map(\.name)).intersection(keys)
            for waiting in edited.isEmpty ? [] : try db.unresolvedReferences(of: entity.name, id: change.objectID)
            where edited.contains(waiting.relationship) {
                let current = try context.fetchSnapshot(entityName: entity.name, id: change.objectID)?.values[waiting.relationship]
                try db.log(
                    ConflictResolution.waitingReferenceReplaced(
                        of: ConflictResolution.Object(entityName: entity.name, id: change.objectID), property: waiting.relationship,
                        target: waiting.target, by: current ?? .null, at: date))
                try db.removeUnresolvedReferences(of: entity.name, id: change.objectID, relationship: waiting.relationship)
            }
            local = .update(keys: keys)
        case .delete:
            local = .delete
            try stopSharingIfRoot(object, in: metadata.zone)
            try db.removeUnresolvedReferences(of: entity.name, id: change.objectID)
            for var link in try ledger.links(of: change.objectID) where try link.pendingUpload != .delete {
                try add(.delete, to: &link)
            }
        }
        try add(local, to: &metadata)
    }

    /// Puts new and re-parented objects in the zone of the object that holds them, then records
    /// the links of the relationships the unit of work touched; call once, after every change.
    mutating func finish() throws {
        try placeInHolderZones()
        for links in dirtyLinks.sorted(by: { "\($0.id)\($0.relationship)" < "\($1.id)\($1.relationship)" }) {
            try reconcile(links)
        }
        dirtyLinks = []
    }

    /// A new object goes to the zone of its holder (a note added to a shared folder is shared), and
    /// so does an object moved to a holder in another zone, with its graph (``ShareGraph``). Inserts
    /// are placed until nothing changes, so a new holder placed later takes its new children along.
    private mutating func placeInHolderZones() throws {
        // A store that shares nothing keeps everything in the primary zone: nothing to look up.
        guard !inserted.isEmpty || !reparented.isEmpty, try !mirroredZones().isEmpty else { return }
        var changed = true
        var rounds = 0
        while changed && rounds <= inserted.count {
            changed = false
            rounds += 1
            for object in inserted {
                guard let zone = try context.holderZone(of: object, in: schema, ledger: ledger), let row = try ledger.find(object.id.uuidString),
                    row.zone != zone
                else { continue }
                try checkWritable(object, in: zone)
                try move([object], to: zone)
                changed = true
            }
        }
        for object in reparented {
            guard let zone = try context.holderZone(of: object, in: schema, ledger: ledger), let row = try ledger.find(object.id.uuidString),
                row.zone != zone
            else { continue }
            let graph = try context.shareGraph(of: object, in: schema)
            for member in graph { try checkWritable(member, in: zone) }
            try move(graph, to: zone)
            scopes.insert(row.zone.scope)
        }
    }

    private mutating func move(_ objects: [ObjectKey], to zone: MirrorZone.Key) throws {
        try ZoneMove(ledger: ledger, recordKeys: recordKeys, schema: schema, date: date).move(objects, to: zone)
        scopes.insert(zone.scope)
    }

    /// Deleting the object a share of this user's was made of stops that share, as
    /// `stopSharing` does: nothing is left to share, and participants lose access instead of
    /// keeping an empty share. (A participant deleting it deletes the object only.)
    private mutating func stopSharingIfRoot(_ object: ObjectKey, in zone: MirrorZone.Key) throws {
        guard zone.owner == nil, !zone.isPrimary, var shared = try mirroredZones()[zone], shared.role == .ownedShare,
            shared.root == object, shared.pendingShare != .delete
        else { return }
        shared.pendingShare = .delete
        try ledger.save(shared)
        zones?[zone] = shared
        scopes.insert(zone.scope)
    }

    /// Throws when `zone` is shared with this user read-only, or when the object is another
    /// user's in the public database: the unit of work is rolled back.
    private mutating func checkWritable(_ object: ObjectKey, in zone: MirrorZone.Key) throws {
        guard zone.owner != nil else { return }
        if zone == .publicDatabase {
            guard let creator = try db.publicCreator(of: object.id.uuidString) else { return }
            if userRecordName == nil { userRecordName = .some(try ledger.state(.userRecordName, as: String.self)) }
            guard let user = userRecordName ?? nil, user != creator else { return }
            throw ContainerError.notCreator(entityName: object.entityName, id: object.id, creator: creator)
        }
        guard let shared = try mirroredZones()[zone], shared.permission == .readOnly else { return }
        throw ContainerError.readOnlyShare(entityName: object.entityName, id: object.id, owner: zone.owner ?? "")
    }

    /// The zones the store mirrors besides the primary one, read once per unit of work.
    private mutating func mirroredZones() throws -> [MirrorZone.Key: MirrorZone] {
        if let zones { return zones }
        let read = Dictionary(try ledger.sharedZones().map { ($0.key, $0) }) { first, _ in first }
        zones = read
        return read
    }

    /// Adds one local change to a record's pending upload and stores the metadata (or forgets a
    /// record that never left the device and has nothing left to upload): ``Ledger/add(_:at:to:)``.
    private mutating func add(_ change: PendingUpload.Change, to metadata: inout RecordMetadata) throws {
        try ledger.add(change, at: date, to: &metadata)
        scopes.insert(metadata.zone.scope)
    }

    /// Makes the mirrored links of one object's many-to-many relationship match its local links.
    private mutating func reconcile(_ links: DirtyLinks) throws {
        guard let entity = schema.entity(named: links.entity),
            let relationship = entity.relationship(named: links.relationship)
        else { return }
        let exists = try context.exists(entityName: entity.name, id: links.id)
        let current =
            exists ? Set(try context.relatedIDs(entityName: entity.name, id: links.id, relationship: links.relationship)) : []
        var mirrored: [UUID: RecordMetadata] = [:]
        for row in try ledger.links(of: links.id) where try row.pendingUpload != .delete {
            guard let ends = row.link, ends.relationship == links.side.key else { continue }
            if links.side.isCanonical, ends.source == links.id { mirrored[ends.target] = row }
            if !links.side.isCanonical, ends.target == links.id { mirrored[ends.source] = row }
        }
        for member in current where mirrored[member] == nil {
            let ends = LinkRecords.ends(links.side, object: links.id, member: member)
            let name = LinkRecords.recordName(ends)
            let zone = try mirroredZones().isEmpty && publicEntities.isEmpty ? .primary : ledger.linkZone(ends)
            try checkWritable(ObjectKey(entityName: entity.name, id: links.id), in: zone)
            var row = try ledger.find(name)
                ?? RecordMetadata(recordName: name, entityName: LinkRecords.recordType, link: ends, zone: zone)
            try add(.insert(keys: []), to: &row)
        }
        for (member, var row) in mirrored where !current.contains(member) {
            // A link whose other object has not arrived here yet was never applied locally; it stays.
            guard try context.exists(entityName: relationship.destination, id: member) else { continue }
            try checkWritable(ObjectKey(entityName: entity.name, id: links.id), in: row.zone)
            try add(.delete, to: &row)
        }
    }
}

extension PersistentStore {
    /// The observers a store file can require: a mirrored file requires the recorder of its pending
    /// uploads.
    static let requirableObservers: [any RequirableUnitOfWorkObserver.Type] = [PendingUploadRecorder.self]
}
