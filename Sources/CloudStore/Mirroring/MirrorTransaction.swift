import CloudStoreSync
import Foundation
import GRDB

/// Mirroring's work inside one store transaction: it reads and writes objects through the write
/// context and its own metadata through the same connection, so rows, metadata and sync state
/// commit together (DESIGN.md invariants 2 and 3).
///
/// Export and import share it: export folds local history into pending uploads and builds the
/// records to send; import applies fetched records and tombstones. Changes it makes to objects are
/// written with the author `cloudstore.import`, so they are never exported back.
final class MirrorTransaction {
    let context: WriteContext
    let schema: Schema
    let zoneID: ZoneID
    let policy: ConflictPolicy
    /// This device's ID as the server records it in `modified.deviceID`, when it mirrors.
    let deviceID: String?
    let now: Date
    /// What the sync engine must have pending for each record this transaction touched, handed to
    /// it once the transaction committed.
    private(set) var engineWork: [String: EngineWork] = [:]
    /// What the transaction did, for events and logs.
    var counts = MirrorCounts()
    /// For each record this transaction touched, whether an upload of it was pending before the
    /// transaction began (see ``mayBeOnServer(_:)``).
    private var pendingBefore: [String: Bool] = [:]
    /// Objects whose parent an import deleted without cascading (see ``deleteImported(entityName:id:)``).
    var orphans: [Orphan] = []

    var db: Database { context.db }

    init(context: WriteContext, schema: Schema, zoneID: ZoneID, policy: ConflictPolicy, deviceID: String? = nil, now: Date) {
        self.context = context
        self.schema = schema
        self.zoneID = zoneID
        self.policy = policy
        self.deviceID = deviceID
        self.now = now
    }

    /// Whether the server may have the record: it does as far as this device knows, or an upload of
    /// it was pending before this transaction and may have been applied with its answer lost (the
    /// device was killed, say). Deleting such a record must reach the server; a record created and
    /// deleted within one transaction never left the device.
    func mayBeOnServer(_ row: MirroredRecord) -> Bool {
        if row.isOnServer { return true }
        if let pending = pendingBefore[row.recordName] { return pending }
        pendingBefore[row.recordName] = row.pending != nil
        return row.pending != nil
    }

    func recordID(_ recordName: String) -> RecordID {
        RecordID(recordName: recordName, zoneID: zoneID)
    }

    /// Stores a metadata row and notes what the engine now has to do for the record.
    func store(_ record: MirroredRecord) throws {
        try db.save(record)
        switch record.pending {
        case .save?: engineWork[record.recordName] = .save
        case .delete?: engineWork[record.recordName] = .delete
        case nil: engineWork[record.recordName] = EngineWork.none
        }
    }

    /// Forgets a record: it is neither on the server nor to upload.
    func forget(_ recordName: String) throws {
        try db.deleteMirroredRecord(recordName)
        engineWork[recordName] = EngineWork.none
    }

    func log(_ conflicts: [ConflictRecord]) throws {
        for conflict in conflicts { try db.log(conflict) }
        counts.conflicts += conflicts.count
    }

    /// The values of an object as its record carries them.
    func recordValues(_ snapshot: EntitySnapshot, _ entity: EntityDescription) -> [String: AttributeValue] {
        let keys = entity.recordKeys
        return snapshot.values.filter { keys.contains($0.key) }
    }
}

/// What the sync engine must have pending for one record.
enum EngineWork: Sendable {
    case save, delete, none

    /// The engine's pending changes to add and to remove for a record.
    static func changes(
        _ work: [String: EngineWork], zoneID: ZoneID
    ) -> (add: [SyncEngine.PendingRecordZoneChange], remove: [SyncEngine.PendingRecordZoneChange]) {
        var add: [SyncEngine.PendingRecordZoneChange] = []
        var remove: [SyncEngine.PendingRecordZoneChange] = []
        for (name, work) in work.sorted(by: { $0.key < $1.key }) {
            let id = RecordID(recordName: name, zoneID: zoneID)
            switch work {
            case .save: add.append(.saveRecord(id))
            case .delete: add.append(.deleteRecord(id))
            case .none: remove += [.saveRecord(id), .deleteRecord(id)]
            }
        }
        return (add, remove)
    }
}

/// What mirroring did, for events, status and logs.
public struct MirrorCounts: Hashable, Sendable {
    /// Objects and links saved (export: uploaded; import: written locally).
    public var saved = 0
    /// Objects and links deleted.
    public var deleted = 0
    /// Values that lost a conflict.
    public var conflicts = 0
    /// Uploads the server refused for good (see the status's last error).
    public var failed = 0

    public init() {}

    public static func + (lhs: MirrorCounts, rhs: MirrorCounts) -> MirrorCounts {
        var sum = lhs
        sum.saved += rhs.saved
        sum.deleted += rhs.deleted
        sum.conflicts += rhs.conflicts
        sum.failed += rhs.failed
        return sum
    }

    public var isEmpty: Bool { self == MirrorCounts() }
}
