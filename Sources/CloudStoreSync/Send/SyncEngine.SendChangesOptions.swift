import CloudStoreWire

extension SyncEngine {
    /// Which pending changes a send covers.
    ///
    /// ```swift
    /// try await engine.sendChanges(.init(scope: .zoneIDs([notesZone])))
    /// ```
    public struct SendChangesOptions: Hashable, Sendable {
        /// The pending changes a send may send.
        public enum Scope: Hashable, Sendable {
            /// Every pending change.
            case all
            /// Changes of records in these zones, and changes of these zones.
            case zoneIDs([ZoneID])
            /// Changes of these records, and pending changes of their zones.
            case recordIDs([RecordID])

            /// Whether a record change falls in the scope.
            public func contains(_ recordID: RecordID) -> Bool {
                switch self {
                case .all: true
                case .zoneIDs(let zoneIDs): zoneIDs.contains(recordID.zoneID)
                case .recordIDs(let recordIDs): recordIDs.contains(recordID)
                }
            }

            /// Whether a zone change falls in the scope.
            public func contains(_ zoneID: ZoneID) -> Bool {
                switch self {
                case .all: true
                case .zoneIDs(let zoneIDs): zoneIDs.contains(zoneID)
                case .recordIDs(let recordIDs): recordIDs.contains { $0.zoneID == zoneID }
                }
            }

            /// Whether a pending record change falls in the scope: filter
            /// ``SyncEngine/State/pendingRecordZoneChanges`` with it when building a batch.
            public func contains(_ change: PendingRecordZoneChange) -> Bool { contains(change.recordID) }
            /// Whether a pending zone change falls in the scope.
            public func contains(_ change: PendingDatabaseChange) -> Bool { contains(change.zoneID) }
        }

        /// The pending changes to send; every one by default.
        public var scope: Scope

        /// Options that send the pending changes in `scope`.
        public init(scope: Scope = .all) {
            self.scope = scope
        }
    }

    /// Why the engine is sending or fetching.
    public enum SyncReason: Hashable, Sendable {
        /// The scheduler decided (changes were added, a push arrived, a retry was due).
        case scheduled
        /// The app called ``SyncEngine/sendChanges(_:)`` or ``SyncEngine/fetchChanges(_:)``.
        case manual
    }

    /// What the engine is sending, passed to ``SyncEngineDelegate/nextRecordZoneChangeBatch(_:syncEngine:)``.
    public struct SendChangesContext: Hashable, Sendable {
        /// Whether the scheduler or the app started the send.
        public let reason: SyncReason
        /// The scope the batch must respect: return only changes it contains.
        public let options: SendChangesOptions
        /// Records to leave out of the batch: those in flight (the engine asks for the next batch
        /// while the previous one is being sent, and a record is never in two batches at once),
        /// and those the engine will not send again in this send (they failed and wait for a
        /// retry, or were tried too often). A delegate that builds batches from
        /// ``SyncEngine/State/pendingRecordZoneChanges`` with
        /// ``SyncEngine/RecordZoneChangeBatch/init(pendingChanges:context:atomicByZone:recordProvider:)``
        /// need not look: that initializer skips them. One that tracks its own changes
        /// (``SyncEngine/State/hasPendingUntrackedChanges``) must, and should fill the batch with
        /// the changes after them (a batch that comes back empty while one is in flight is only
        /// asked for again after that one is settled).
        public var recordIDsToSkip: Set<RecordID> { limits.excludedRecordIDs }
        /// The most record changes one batch may hold.
        public var maxRecordCount: Int { limits.maxCount }
        /// The limits a batch is filled to, with the records to leave out: what
        /// ``SyncEngine/RecordZoneChangeBatch/init(pendingChanges:context:atomicByZone:recordProvider:)`` reads.
        var limits = BatchLimits.default

        init(reason: SyncReason, options: SendChangesOptions) {
            self.reason = reason
            self.options = options
        }
    }
}
