import CloudStoreWire

extension SyncEngine {
    /// Record changes to send in one go, as CKSyncEngine's `RecordZoneChangeBatch`.
    ///
    /// The engine sends one `records/modify` request per zone (more when the batch is larger than
    /// its limits). A record with a `recordChangeTag` is sent as an `update` (only the fields it
    /// holds change on the server), one without as a `create`; a delete is a `delete` with the change
    /// tag ``recordChangeTagsToDelete`` gives for it (refused with `CONFLICT` and the server's copy
    /// when the record changed since, so another device's edit is never deleted unseen), else a
    /// `forceDelete`.
    ///
    /// ```swift
    /// // Fill up to the engine's limits from the pending changes, loading records lazily:
    /// let batch = await SyncEngine.RecordZoneChangeBatch(pendingChanges: changes, context: context) { recordID in
    ///     await store.record(for: recordID)   // nil skips the change; it stays pending
    /// }
    /// // Or name the records yourself:
    /// let batch = SyncEngine.RecordZoneChangeBatch(recordsToSave: [note], recordIDsToDelete: [oldID])
    /// ```
    public struct RecordZoneChangeBatch: Sendable {
        /// The records to save, in order: each as the server should have it after the save.
        public var recordsToSave: [Record] {
            didSet { encodedSaves = [:] }
        }
        /// The records to delete.
        public var recordIDsToDelete: [RecordID]
        /// The change tag of the version each delete is meant for, where the app knows it: such a
        /// delete fails with `CONFLICT` (in ``SyncEngine/Event/SentRecordZoneChanges/failedRecordDeletes``,
        /// with the server's copy) if the record changed on the server since.
        public var recordChangeTagsToDelete: [RecordID: String] = [:]
        /// When true, each zone's changes succeed or fail together (`atomic` on the wire).
        public var atomicByZone: Bool
        /// Whether the delegate has more changes of its own to send after this batch
        /// (``SyncEngine/State/hasPendingUntrackedChanges``), besides the records the send skips:
        /// true (the default) has the engine ask again, while this batch travels, until the
        /// delegate answers nil; false says this batch is all there is for now, which saves the
        /// engine a question. A delegate that tracks its changes in the state need not set it.
        ///
        /// ```swift
        /// var batch = await SyncEngine.RecordZoneChangeBatch(pendingChanges: changes, context: context) { … }
        /// batch?.hasMorePendingChanges = queue.count > changes.count
        /// ```
        public var hasMorePendingChanges = true
        /// Each save's operation JSON, as encoded to size the batch while it was filled: the
        /// request sends those bytes instead of encoding the record again. Emptied when
        /// ``recordsToSave`` changes.
        var encodedSaves: [RecordID: [UInt8]] = [:]

        /// A batch of exactly these saves and deletes, with no record loaded lazily; the engine
        /// splits it into requests within its limits. Each record should appear once: a record
        /// named twice is sent the first time only.
        public init(recordsToSave: [Record] = [], recordIDsToDelete: [RecordID] = [], atomicByZone: Bool = false) {
            self.recordsToSave = recordsToSave
            self.recordIDsToDelete = recordIDsToDelete
            self.atomicByZone = atomicByZone
        }

        /// Fills a batch from pending changes, in order, up to the count and size limits of the
        /// send `context` (the one ``SyncEngineDelegate/nextRecordZoneChangeBatch(_:syncEngine:)``
        /// was given), leaving out its ``SendChangesContext/recordIDsToSkip``.
        ///
        /// `recordProvider` is called for each save that may still fit; returning nil skips that
        /// change: it is not sent and stays pending. Returns nil when nothing was added.
        public init?(
            pendingChanges: [PendingRecordZoneChange], context: SendChangesContext, atomicByZone: Bool = false,
            recordProvider: @Sendable (RecordID) async -> Record?
        ) async {
            let limits = context.limits
            var filler = BatchFiller(limits: limits)
            for change in pendingChanges where !filler.isFull {
                guard !limits.excludedRecordIDs.contains(change.recordID) else { continue }
                switch change {
                case .deleteRecord(let recordID):
                    filler.offer(delete: recordID)
                case .saveRecord(let recordID):
                    guard let record = await recordProvider(recordID) else { continue }
                    filler.offer(save: record)
                }
            }
            guard !filler.isEmpty else { return nil }
            self.init(recordsToSave: filler.saves, recordIDsToDelete: filler.deletes, atomicByZone: atomicByZone)
            encodedSaves = filler.encodedSaves
        }

        var isEmpty: Bool { recordsToSave.isEmpty && recordIDsToDelete.isEmpty }

        /// The saves with their zones named as `normalize` names them, those in `excluded` left
        /// out, keeping the bytes encoded while filling (``encodedSaves``) unless `normalize`
        /// changed a record: leaving records out changes nothing in the others' bytes.
        mutating func keepSaves(normalizing normalize: (Record) -> Record, excluding excluded: Set<RecordID>) {
            let original = recordsToSave
            let normalized = original.map(normalize)
            let encoded = encodedSaves
            recordsToSave = normalized.filter { !excluded.contains($0.recordID) }
            if zip(original, normalized).allSatisfy({ $0.recordID == $1.recordID }) { encodedSaves = encoded }
        }
    }

    /// The limits a batch is filled to. The engine puts them in the ``SendChangesContext`` it asks
    /// its delegate for a batch with; records the engine will not send again in the current pass
    /// are excluded.
    struct BatchLimits: Hashable, Sendable {
        var maxCount: Int
        var maxBytes: Int
        var excludedRecordIDs: Set<RecordID> = []

        static let `default` = BatchLimits(
            maxCount: Configuration.defaultMaxBatchCount, maxBytes: Configuration.defaultMaxBatchBytes)
    }
}

/// Adds changes to a batch while they fit: at most `maxCount` changes and `maxBytes` of encoded
/// operations, except that a first change always fits (the server then says whether it is too large).
struct BatchFiller {
    let limits: SyncEngine.BatchLimits
    private(set) var saves: [Record] = []
    /// The JSON of each save's operation, encoded to size it.
    private(set) var encodedSaves: [RecordID: [UInt8]] = [:]
    private(set) var deletes: [RecordID] = []
    private(set) var bytes = 0
    /// Set once a change did not fit: later changes would not be in order.
    private(set) var isClosed = false

    init(limits: SyncEngine.BatchLimits) { self.limits = limits }

    var count: Int { saves.count + deletes.count }
    var isEmpty: Bool { count == 0 }
    var isFull: Bool { isClosed || count >= limits.maxCount }

    mutating func offer(save record: Record) {
        let encoded = RecordBatchPlan.encoded(RecordBatchPlan.operation(saving: record))
        guard fits(encoded.count + 1) else { return }
        saves.append(record)
        // A record named twice is sent once, the first time (``RecordBatchPlan``): its bytes are the first's.
        if !encoded.isEmpty, encodedSaves[record.recordID] == nil { encodedSaves[record.recordID] = encoded }
    }

    mutating func offer(delete recordID: RecordID) {
        let size = RecordBatchPlan.encodedSize(of: RecordBatchPlan.operation(deleting: recordID))
        if fits(size) { deletes.append(recordID) }
    }

    private mutating func fits(_ size: Int) -> Bool {
        guard !isFull else { return false }
        guard isEmpty || bytes + size <= limits.maxBytes else {
            isClosed = true
            return false
        }
        bytes += size
        return true
    }
}
