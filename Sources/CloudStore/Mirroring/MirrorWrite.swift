import CloudStoreSync
import Foundation
import GRDB
import Logging

/// Mirroring's work inside one store transaction: it reads and writes objects through the write
/// context and the ledger (``Ledger``) through the same connection, so objects, metadata, pending
/// uploads and the sync engine's tokens commit together: a token is never ahead of the data it
/// covers, and what a save must upload is recorded with the save.
///
/// Every sync engine event is handled in one: an import applies fetched records and tombstones, an
/// acknowledgement settles what the server saved or refused, a batch takes the next pending
/// uploads, a decision carries out the app's choice. Changes it makes to objects are written with
/// the author `cloudstore.import`, so they are never uploaded back; what it leaves pending, it
/// records itself. It holds only what the transaction is made with; what its work learned and
/// leaves for after the commit travels in the ``MirrorEffects`` its functions are given.
///
/// ```swift
/// let write = try MirrorWrite(context: context, setup: setup, now: now)
/// var effects = MirrorEffects()
/// try write.acknowledge(sent, uploads: inFlight, lostAndFetched: [], stateKey: .engineState, &effects)
/// ```
final class MirrorWrite {
    let context: WriteContext
    /// The record metadata, zones and state, in this transaction.
    let ledger: Ledger
    /// What every transaction of the mirror is made with.
    let setup: MirrorSetup
    /// Seals encrypted attributes on upload and opens them on import.
    let sealing: RecordSealing
    let resolution: ConflictResolution
    /// The current user, once the server said (a participant's permission is looked up by it).
    let userRecordName: String?

    var db: Database { context.db }
    var schema: Schema { setup.schema }
    /// The fields of each entity's records.
    var recordKeys: RecordKeys { setup.recordKeys }
    /// The primary zone: where objects that are not shared live.
    var zoneID: ZoneID { setup.zoneID }
    /// The entities mirrored in the public database.
    var publicEntities: PublicEntities { setup.publicEntities }
    /// This device's ID as the server records it in `modified.deviceID`, when it mirrors.
    var deviceID: String? { setup.deviceID }
    var logger: Logger { setup.logger }
    var policy: ConflictPolicy { resolution.policy }
    var now: Date { resolution.now }

    init(context: WriteContext, setup: MirrorSetup, now: Date, keyring: EncryptionKeyring? = nil) throws {
        self.context = context
        self.ledger = Ledger(context.db)
        self.setup = setup
        self.resolution = ConflictResolution(policy: setup.policy, now: now)
        let user = try ledger.state(.userRecordName, as: String.self)
        self.userRecordName = user
        // An account key serves its user only: after an account change, records wait for the
        // new user's.
        self.sealing = RecordSealing(keyring: keyring.flatMap { $0.user == user ? $0 : nil })
    }

    /// The zone a metadata key names; `zoneID` is the primary zone.
    func zoneID(_ key: MirrorZone.Key) -> ZoneID {
        key.zoneID(primary: zoneID)
    }

    /// How metadata names a zone the engine named.
    func key(_ zoneID: ZoneID) -> MirrorZone.Key {
        MirrorZone.Key(zoneID, primary: self.zoneID)
    }

    /// Stores where a zone of the private database stands on the server: one that needs a save
    /// is asked for with the next wake of the engines, one that does not no longer is.
    func setServerState(_ state: ZoneServerState, of zoneID: ZoneID, _ effects: inout MirrorEffects) throws {
        guard var zone = try ledger.zone(zoneID) else { return }
        zone.serverState = state
        try ledger.save(zone)
        if state.needsSave { effects.wake.insert(.private) } else { effects.zonesNotToSave.append(zoneID) }
    }

    /// Stores where the primary zone stands on the server (``setServerState(_:of:_:)``).
    func setPrimaryZone(_ state: ZoneServerState, _ effects: inout MirrorEffects) throws {
        try setServerState(state, of: zoneID, &effects)
    }

    /// Stores a zone's row; a share change it holds is an upload to make.
    func save(_ zone: MirrorZone, _ effects: inout MirrorEffects) throws {
        try ledger.save(zone)
        if zone.pendingShare != nil { effects.wake.insert(zone.key.scope) }
        if zone.role != .sharedWithMe, zone.serverState.needsSave { effects.wake.insert(.private) }
    }

    /// Forgets a zone's row.
    func deleteZone(_ zoneID: ZoneID, _ effects: inout MirrorEffects) throws {
        try ledger.deleteZone(zoneID)
        effects.zonesNotToSave.append(zoneID)
    }

    /// Stores a record's metadata; a pending upload it holds wakes its database's engine.
    func save(_ metadata: RecordMetadata, _ effects: inout MirrorEffects) throws {
        try ledger.save(metadata)
        if metadata.hasPendingUpload && metadata.refusal == nil { effects.wake.insert(metadata.zone.scope) }
    }

    /// Notes that `recordName` must be deleted from `zone`, a pending upload.
    func addMoved(_ moved: MovedRecord, _ effects: inout MirrorEffects) throws {
        try ledger.addMoved(moved)
        effects.wake.insert(moved.zone.scope)
    }

    /// Forgets a record: it is neither on the server nor to upload.
    func forget(_ recordName: String) throws {
        try ledger.forget(recordName)
    }

    /// Writes conflicts to the log, one line each at debug level 3.
    func log(_ conflicts: [ConflictRecord], _ effects: inout MirrorEffects) throws {
        for conflict in conflicts {
            try db.log(conflict)
            logger.debug(
                "conflict resolved",
                metadata: [
                    "entity": "\(conflict.entityName)", "record": "\(conflict.objectID.uuidString)",
                    "keys": "\(conflict.property)", "policy": "\(conflict.policy)",
                    "winner": "\(conflict.losingSide == .local ? "server" : "local")",
                    "loser": "\(conflict.losingSide.rawValue)",
                ])
        }
        effects.counts.conflicts += conflicts.count
    }

    /// The values of an object as its record carries them.
    func recordValues(_ snapshot: EntitySnapshot, _ entity: EntityDescription) -> [String: AttributeValue] {
        let keys = recordKeys(entity)
        return snapshot.values.filter { keys.contains($0.key) }
    }

    /// Stores a sync engine's state under its database's key (``CloudMirror/stateKey(_:)``).
    func saveEngineState(_ state: SyncEngine.State.Serialization, as key: MirrorStateKey) throws {
        try ledger.setState(key, encoding: state)
    }

    /// Records a failure as the last one (``MirrorStateKey/lastError``), in the transaction that
    /// learned it; it marks the import or export under way as failed.
    func recordFailure(_ failure: PersistentCloudContainer.SyncFailure, _ effects: inout MirrorEffects) throws {
        try ledger.setState(.lastError, encoding: MirrorFailure(failure))
        effects.failures.append(failure)
    }

    /// Records that an import (or, with `export`, an export) ended without a failure at `date`, and
    /// clears the last failure once it is past (``MirrorFailure/isPast(lastImport:lastExport:pendingUploads:)``).
    func recordSuccess(export: Bool, at date: Date) throws {
        try ledger.setState(export ? .lastExport : .lastImport, encoding: date)
        guard let failure = try ledger.state(.lastError, as: MirrorFailure.self) else { return }
        let past = try failure.isPast(
            lastImport: ledger.state(.lastImport, as: Date.self), lastExport: ledger.state(.lastExport, as: Date.self),
            pendingUploads: ledger.pendingCount())
        if past { try ledger.setState(.lastError, nil) }
    }
}

/// What every ``MirrorWrite`` of a mirror is made with, once: the schema and its record keys, the
/// primary zone, the public entities, the conflict policy, this device's ID and the logger.
struct MirrorSetup: Sendable {
    let schema: Schema
    let recordKeys: RecordKeys
    let zoneID: ZoneID
    let publicEntities: PublicEntities
    let policy: ConflictPolicy
    let deviceID: String?
    let logger: Logger
    /// The entities a to-one relationship points to: only their objects can have references
    /// waiting for them (``Database/takeUnresolvedReferences(to:)``), so an arriving object of
    /// another entity asks for none.
    let referencedEntities: Set<String>
    /// The entities on either end of a many-to-many relationship: only their objects are in links.
    let linkedEntities: Set<String>

    init(schema: Schema, zoneID: ZoneID, publicEntities: PublicEntities, policy: ConflictPolicy, deviceID: String?, logger: Logger) {
        self.schema = schema
        self.recordKeys = RecordKeys(schema)
        self.referencedEntities = Set(schema.entities.flatMap { $0.toOneRelationships.map(\.destination) })
        self.linkedEntities = Set(
            schema.entities.flatMap { entity in LinkRecords.sides(of: entity, in: schema).flatMap { [entity.name, $0.0.destination] } })
        self.zoneID = zoneID
        self.publicEntities = publicEntities
        self.policy = policy
        self.deviceID = deviceID
        self.logger = logger
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

    /// Counts of zero.
    public init() {}

    /// The two counts added up, field by field.
    public static func + (lhs: MirrorCounts, rhs: MirrorCounts) -> MirrorCounts {
        var sum = lhs
        sum.saved += rhs.saved
        sum.deleted += rhs.deleted
        sum.conflicts += rhs.conflicts
        sum.failed += rhs.failed
        return sum
    }

    /// Whether nothing was counted.
    public var isEmpty: Bool { self == MirrorCounts() }
}

/// The author of every write mirroring makes to objects; its transactions are never uploaded.
public enum MirrorAuthor {
    /// `"cloudstore.import"`: the author of the history transactions that apply other devices'
    /// changes; filter history with it to tell them from this device's own edits
    /// (`HistoryFilter(excludingAuthors: [MirrorAuthor.import])`).
    public static let `import` = "cloudstore.import"
}
