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
struct PendingUploadRecorder: UnitOfWorkObserver {
    let schema: Schema
    let signal: PendingUploadSignal

    var name: String { MirrorMetadata.observerName }

    func unitOfWorkWillCommit(_ unitOfWork: CommittingUnitOfWork) throws {
        guard unitOfWork.author != MirrorAuthor.import else { return }
        var recording = PendingUploadRecording(context: unitOfWork.context, schema: schema, date: unitOfWork.date)
        for change in unitOfWork.changes { try recording.record(change) }
        try recording.finish()
        guard recording.hasRecorded else { return }
        let signal = signal
        unitOfWork.db.afterNextTransaction { _ in signal.uploadsPending() }
    }
}

/// Tells the sync engine that uploads are pending, from any thread: after a save committed some,
/// or a mirroring transaction did. Before the store's zone is on the server it also asks for the
/// zone to be saved first.
final class PendingUploadSignal: Sendable {
    private struct Target {
        var state: SyncEngine.State?
        var zoneID: ZoneID
        var zoneSaved = false
    }

    private let target: Mutex<Target>

    init(zoneID: ZoneID) {
        target = Mutex(Target(zoneID: zoneID))
    }

    /// The engine to tell, once it exists.
    func attach(_ state: SyncEngine.State, zoneSaved: Bool) {
        target.withLock { target in
            target.state = state
            target.zoneSaved = zoneSaved
        }
    }

    /// Whether the zone is on the server (false after it was deleted or the account changed).
    func setZoneSaved(_ saved: Bool) {
        target.withLock { $0.zoneSaved = saved }
    }

    func uploadsPending() {
        let (state, saveZone) = target.withLock { target in
            (target.state, target.zoneSaved ? nil : target.zoneID)
        }
        guard let state else { return }
        if let saveZone { state.add(pendingDatabaseChanges: [.saveZone(saveZone)]) }
        state.hasPendingUntrackedChanges = true
    }
}

/// The pending uploads one unit of work records, change by change (``PendingUpload/adding(_:at:to:mayBeOnServer:)``),
/// then the links of the many-to-many relationships it touched, compared with the mirrored ones.
struct PendingUploadRecording {
    let context: WriteContext
    let schema: Schema
    /// When the changes being recorded were made (the edit times `lastWriterWins` compares).
    var date: Date
    private var revision: Int64?
    private var dirtyLinks: Set<DirtyLinks> = []
    /// Whether any pending upload was written.
    private(set) var hasRecorded = false

    /// A many-to-many relationship of one object whose links may differ from the mirrored ones.
    struct DirtyLinks: Hashable {
        var entity: String
        var id: UUID
        var relationship: String
        var side: LinkRecords.Side
    }

    init(context: WriteContext, schema: Schema, date: Date) {
        self.context = context
        self.schema = schema
        self.date = date
    }

    private var db: Database { context.db }

    /// Records what one local change of an object makes pending.
    mutating func record(_ change: HistoryChange) throws {
        guard let entity = schema.entity(named: change.entityName), entity.isMirrored else { return }
        let recordName = change.objectID.uuidString
        var metadata = try db.recordMetadata(recordName) ?? RecordMetadata(recordName: recordName, entityName: entity.name)
        let linkSides = LinkRecords.sides(of: entity, in: schema)
        let local: PendingUpload.Change
        switch change.changeType {
        case .insert:
            local = .insert(keys: entity.recordKeys)
            for (relationship, side) in linkSides {
                dirtyLinks.insert(DirtyLinks(entity: entity.name, id: change.objectID, relationship: relationship.name, side: side))
            }
        case .update:
            for (relationship, side) in linkSides where change.updatedProperties.contains(relationship.name) {
                dirtyLinks.insert(DirtyLinks(entity: entity.name, id: change.objectID, relationship: relationship.name, side: side))
            }
            let keys = change.updatedProperties.intersection(entity.recordKeys)
            guard !keys.isEmpty else { return }
            // A local edit of a reference replaces one still waiting for its target.
            for relationship in entity.toOneRelationships where keys.contains(relationship.name) {
                try db.removeUnresolvedReferences(of: entity.name, id: change.objectID, relationship: relationship.name)
            }
            local = .update(keys: keys)
        case .delete:
            local = .delete
            try db.removeUnresolvedReferences(of: entity.name, id: change.objectID)
            for var link in try db.linkMetadata(of: change.objectID) where link.pendingUpload != .delete {
                try add(.delete, to: &link)
            }
        }
        try add(local, to: &metadata)
    }

    /// Records the links of the relationships the unit of work touched; call once, after every change.
    mutating func finish() throws {
        for links in dirtyLinks.sorted(by: { "\($0.id)\($0.relationship)" < "\($1.id)\($1.relationship)" }) {
            try reconcile(links)
        }
        dirtyLinks = []
    }

    /// Adds one local change to a record's pending upload and stores the metadata (or forgets a
    /// record that never left the device and has nothing left to upload).
    private mutating func add(_ change: PendingUpload.Change, to metadata: inout RecordMetadata) throws {
        let upload = PendingUpload.adding(
            change, at: date, to: metadata.pendingUpload, mayBeOnServer: metadata.mayBeOnServer)
        let revision = try nextRevision()
        metadata.setPendingUpload(upload) { revision }
        metadata.refusal = nil
        if upload == nil && !metadata.mayBeOnServer {
            try db.deleteRecordMetadata(metadata.recordName)
        } else {
            try db.save(metadata)
        }
        hasRecorded = true
    }

    private mutating func nextRevision() throws -> Int64 {
        if let revision { return revision }
        let next = try db.nextUploadRevision()
        revision = next
        return next
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
        for row in try db.linkMetadata(of: links.id) where row.pendingUpload != .delete {
            guard let ends = row.link, ends.relationship == links.side.key else { continue }
            if links.side.isCanonical, ends.source == links.id { mirrored[ends.target] = row }
            if !links.side.isCanonical, ends.target == links.id { mirrored[ends.source] = row }
        }
        for member in current where mirrored[member] == nil {
            let ends = LinkRecords.ends(links.side, object: links.id, member: member)
            let name = LinkRecords.recordName(ends)
            var row = try db.recordMetadata(name)
                ?? RecordMetadata(recordName: name, entityName: LinkRecords.recordType, link: ends)
            try add(.insert(keys: []), to: &row)
        }
        for (member, var row) in mirrored where !current.contains(member) {
            // A link whose other object has not arrived here yet was never applied locally; it stays.
            guard try context.exists(entityName: relationship.destination, id: member) else { continue }
            try add(.delete, to: &row)
        }
    }
}
