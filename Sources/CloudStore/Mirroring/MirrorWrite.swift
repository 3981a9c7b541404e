import CloudStoreSync
import Foundation
import GRDB
import Logging

/// Mirroring's work inside one store transaction: it reads and writes objects through the write
/// context and record metadata through the same connection, so objects, metadata, pending uploads
/// and the sync engine's tokens commit together: a token is never ahead of the data it covers, and
/// what a save must upload is recorded with the save.
///
/// Every sync engine event is handled by one of these: an import applies fetched records and
/// tombstones, an acknowledgement settles what the server saved or refused, a batch takes the next
/// pending uploads. Changes it makes to objects are written with the author `cloudstore.import`,
/// so they are never uploaded back; what it leaves pending, it records itself.
final class MirrorWrite {
    let context: WriteContext
    let schema: Schema
    /// The primary zone: where objects that are not shared live.
    let zoneID: ZoneID
    /// The entities mirrored in the public database.
    let publicEntities: PublicEntities
    /// Seals encrypted attributes on upload and opens them on import.
    let sealing: RecordSealing
    let resolution: ConflictResolution
    /// This device's ID as the server records it in `modified.deviceID`, when it mirrors.
    let deviceID: String?
    let logger: Logger
    /// What the transaction did, for events and logs.
    var counts = MirrorCounts()
    /// Whether the transaction left uploads pending (the engine is told once it committed).
    var hasPendingUploads = false
    /// Whether the transaction left a share change pending.
    var hasPendingShareChanges = false
    /// Who joined, left or was invited to a share, for the container's events.
    var activity: [PersistentCloudContainer.ShareActivity] = []
    /// The current user, once the server said (a participant's permission is looked up by it).
    let userRecordName: String?
    /// Uploads the server refused for good in this transaction, by record name.
    var refused: [String: ServerError] = [:]
    /// Share changes the server refused for good in this transaction, by zone.
    var refusedShares: [ZoneID: ServerError] = [:]
    /// Saves whose version the server no longer has, to wait for a fetch before they go
    /// again (``UnheardCreates/lostOnServer(_:)``), by record name.
    var waitForFetch: Set<String> = []
    /// Records whose version the server lacked before and a fetch covered since: their next
    /// such failure is decided at once (``UnheardCreates/lostAndFetched``).
    var lostAndFetched: Set<String> = []
    private var revision: Int64?
    private var recordKeysCache = RecordKeysCache()
    /// Objects whose parent an import deleted without cascading (see ``deleteImported(entityName:id:)``).
    var orphans: [Orphan] = []
    /// Objects whose tombstones the current fetch brought: a reference to one of them is cleared
    /// instead of waiting for a target that will not come.
    var deletedOnServer: Set<UUID> = []

    /// Zones of the private database whose state on the server this transaction stored, and
    /// whether each needs a save now (``ZoneServerState/needsSave``): the engine is told once the
    /// transaction committed, never before.
    private(set) var zonesToSave: [ZoneID: Bool] = [:]
    /// Whether records kept aside for a unique key are being applied again (``applyKeptAside()``).
    var applyingKeptAside = false
    /// Whether any record waits aside, once this transaction knows (``Database/hasKeptAside()``).
    var keptAside: Bool?
    /// The records whose version kept aside this transaction replaced by a newer one: kept aside
    /// again, they were seen before (a debug line, not a second warning).
    var replacedKeptAside: Set<String> = []
    /// Whether any fetched record waits for decryption, once this transaction knows.
    var awaitingDecryption: Bool?
    /// Whether this transaction kept, replaced or forgot a record waiting for its key: files kept
    /// for such records may be unneeded since (``CloudMirror/removeUnneededWaitingFiles()``).
    var mayLeaveWaitingFiles = false
    /// Fetched records this transaction refused because an encrypted field did not open.
    var decryptionRefusals: [PersistentCloudContainer.DecryptionRefusal] = []
    /// The primary zone's state, when this transaction stored it.
    private(set) var primaryZoneState: ZoneServerState?

    var db: Database { context.db }
    var policy: ConflictPolicy { resolution.policy }
    var now: Date { resolution.now }

    init(
        context: WriteContext, schema: Schema, zoneID: ZoneID, publicEntities: PublicEntities = .none, policy: ConflictPolicy,
        deviceID: String? = nil, now: Date, logger: Logger, keyring: EncryptionKeyring? = nil
    ) throws {
        self.context = context
        self.schema = schema
        self.zoneID = zoneID
        self.publicEntities = publicEntities
        self.resolution = ConflictResolution(policy: policy, now: now)
        self.deviceID = deviceID
        self.logger = logger
        let user = try context.db.mirrorState(.userRecordName, as: String.self)
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

    /// Stores where the primary zone stands on the server.
    func setPrimaryZone(_ state: ZoneServerState) throws {
        try db.setMirrorState(.primaryZone, encoding: state)
        primaryZoneState = state
        zonesToSave[zoneID] = state.needsSave
    }

    /// Stores a mirror zone's row.
    func save(_ zone: MirrorZone) throws {
        try db.save(zone)
        if zone.role == .ownedShare { zonesToSave[zone.zoneID] = !zone.saved }
    }

    /// Forgets a mirror zone.
    func deleteZone(_ zoneID: ZoneID) throws {
        try db.deleteMirrorZone(zoneID)
        zonesToSave[zoneID] = false
    }

    /// Stores a record's metadata.
    func save(_ metadata: RecordMetadata) throws {
        try db.save(metadata)
        if metadata.hasPendingUpload && metadata.refusal == nil { hasPendingUploads = true }
    }

    /// Sets what a record has pending, stamped with this transaction's upload revision.
    func setPendingUpload(_ upload: PendingUpload?, of metadata: inout RecordMetadata) throws {
        // Clearing needs no look at what was pending (it stays JSON, undecoded).
        guard upload == nil ? metadata.hasPendingUpload : try upload != metadata.pendingUpload else { return }
        try metadata.setPendingUpload(upload) { try uploadRevision() }
    }

    /// This transaction's upload revision, taken from the store-wide counter the first time.
    func uploadRevision() throws -> Int64 {
        if let revision { return revision }
        let next = try db.nextUploadRevision()
        revision = next
        return next
    }

    /// Forgets a record: it is neither on the server nor to upload.
    func forget(_ recordName: String) throws {
        try db.deleteRecordMetadata(recordName)
        try db.deleteSealedAssets(of: recordName)
    }

    /// Writes conflicts to the log, one line each at debug level 3.
    func log(_ conflicts: [ConflictRecord]) throws {
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
        counts.conflicts += conflicts.count
    }

    /// The fields of an entity's records (``EntityDescription/recordKeys``), built once per transaction.
    func recordKeys(of entity: EntityDescription) -> Set<String> {
        recordKeysCache.keys(of: entity)
    }

    /// The values of an object as its record carries them.
    func recordValues(_ snapshot: EntitySnapshot, _ entity: EntityDescription) -> [String: AttributeValue] {
        let keys = recordKeys(of: entity)
        return snapshot.values.filter { keys.contains($0.key) }
    }

    /// Stores a sync engine's state: the private database's under ``MirrorStateKey/engineState``,
    /// the shared database's under ``MirrorStateKey/sharedEngineState``.
    func saveEngineState(_ state: SyncEngine.State.Serialization, as key: MirrorStateKey = .engineState) throws {
        try db.setMirrorState(key, encoding: state)
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
