import CloudStoreWire
import Logging
import Synchronization

/// Syncs an app's own persistence with a cloud database: CKSyncEngine's shape, over HTTP, on Linux.
///
/// The app owns its data. It tells the engine which records and zones changed
/// (``state``), hands over records when the engine builds a batch, and persists what the engine
/// reports (fetched records, acknowledged saves, the state) through its ``SyncEngineDelegate``.
/// The engine owns the protocol: sync tokens, paging, batching within the server's limits,
/// retries with back-off, push, conflicts and account changes.
///
/// ```swift
/// let engine = SyncEngine(SyncEngine.Configuration(
///     database: HTTPCloudDatabase(baseURL: serverURL, container: "iCloud.com.example.notes",
///                                 token: token, deviceID: deviceID),
///     stateSerialization: store.savedSyncState(),
///     delegate: syncManager))
///
/// // After a local edit:
/// engine.state.add(pendingRecordZoneChanges: [.saveRecord(note.recordID)])
///
/// // Pull to refresh (or in tests, with automaticallySync off):
/// try await engine.fetchChanges()
/// try await engine.sendChanges()
/// ```
///
/// With `automaticallySync` on, the engine fetches once when it starts, sends shortly after
/// changes are added, fetches when the server's long poll reports a change (or on a timer while
/// push is unavailable), and retries failed work with exponential back-off, honouring the
/// server's `retryAfter`.
///
/// Operations run one at a time and deliver their events one at a time. An engine that got
/// `AUTHENTICATION_FAILED` or `AUTHENTICATION_REQUIRED` reports
/// ``Event/AccountChange/ChangeType/signOut(previousUser:)`` and stops for good; make a new one.
public actor SyncEngine {
    /// The database this engine syncs with.
    public nonisolated let database: any CloudDatabase
    /// Pending changes, tokens and the signed-in user.
    public nonisolated let state: State

    let configuration: Configuration
    weak var delegate: (any SyncEngineDelegate)?
    let logger: Logger
    let clock: EngineClock
    let wake = WakeSignal()
    let inbox: StateInbox
    let tasks = BackgroundTasks()
    var scheduler: SyncScheduler

    /// The user the server reported for the credentials, once checked.
    var currentUserRecordName: String?
    var hasCheckedAccount = false
    var isStopped = false
    /// The state's version the delegate was last given (``emitStateUpdateIfNeeded()``).
    var lastEmittedStateVersion: UInt64
    /// Events waiting to be delivered (``emit(_:)``).
    var queuedEvents: [Event] = []
    /// How many times the engine called its delegate, for tests and diagnostics.
    nonisolated let delegateCalls = CallCounter()
    /// Receipts of recent asset uploads, for a batch sent again soon.
    var assetReceipts = AssetReceiptCache()
    /// Per zone, the sync token the next `records/modify` of this send carries
    /// (``CloudStoreWire/RecordsModifyRequest/syncToken``): the token the zone's last answer gave,
    /// or nil when it gave none. A zone without an entry sends the state's token. Emptied when a
    /// send begins.
    var tokensToSend: [ZoneID: String?] = [:]
    /// What the last long poll's answer carried for the next scheduled fetch (``PushedChanges``).
    var pushedChanges: PushedChanges?

    private var isOperationRunning = false
    private var operationWaiters: [CheckedContinuation<Void, Never>] = []
    private var operationCancellers: [UInt64: @Sendable () -> Void] = [:]
    private var nextOperationID: UInt64 = 0

    /// Creates an engine and, with `automaticallySync` on, starts syncing in the background.
    public init(_ configuration: Configuration) {
        self.configuration = configuration
        self.database = configuration.database
        self.delegate = configuration.delegate
        self.logger = configuration.logger
        let clock = EngineClock(configuration.clock)
        self.clock = clock
        let state = State(configuration.stateSerialization)
        self.state = state
        let hasPending = state.withStorage { storage in
            !storage.recordChanges.isEmpty || !storage.databaseChanges.isEmpty || storage.hasPendingUntrackedChanges
        }
        self.scheduler = SyncScheduler(
            configuration: configuration.schedulerConfiguration, now: clock.now,
            pushAvailable: configuration.listensForPush, hasPendingChanges: hasPending)
        self.lastEmittedStateVersion = state.withStorage { $0.version }
        if let assetDirectory = configuration.assetDirectory {
            Self.removeLeftoverAssets(in: assetDirectory, logger: configuration.logger)
        }
        let inbox = StateInbox()
        self.inbox = inbox
        let wake = self.wake
        state.setObserver { addedChanges in
            inbox.post(addedChangesAt: addedChanges ? clock.now : nil)
            wake.signal()
        }
        tasks.start(engine: self)
    }

    deinit {
        tasks.cancelAll()
        wake.signal()
    }

    // MARK: Manual operations

    /// Fetches changes from the server now, bypassing the scheduler, and returns once the
    /// delegate handled every resulting event.
    ///
    /// Throws ``CloudError`` when a request failed as a whole (network, timeout, 5xx, 429): the
    /// fetch stopped there, the tokens saved so far are kept, and the scheduler retries later when
    /// syncing automatically. Throws ``SyncEngineError`` when the engine stopped or the fetch was
    /// cancelled.
    ///
    /// ```swift
    /// try await engine.fetchChanges()                                   // everything
    /// try await engine.fetchChanges(.init(scope: .zoneIDs([notesZone]))) // one zone
    /// ```
    public func fetchChanges(_ options: FetchChangesOptions = FetchChangesOptions()) async throws {
        try await runOperation { engine in
            try await engine.fetch(FetchChangesContext(reason: .manual, options: options))
        }
    }

    /// Sends pending changes now, bypassing the scheduler: zone changes first, then batches of
    /// record changes from the delegate until it returns nil or nothing in scope is pending.
    /// Returns once the delegate handled every resulting event.
    ///
    /// Per-record failures (conflicts, missing zones, …) never throw: they arrive as
    /// ``Event/sentRecordZoneChanges(_:)``. Throws ``CloudError`` when a request failed as a
    /// whole (network, timeout, 5xx, 429): the changes stay pending. Throws ``SyncEngineError``
    /// when the engine stopped or the send was cancelled.
    ///
    /// ```swift
    /// engine.state.add(pendingRecordZoneChanges: [.saveRecord(noteID)])
    /// try await engine.sendChanges()
    /// ```
    public func sendChanges(_ options: SendChangesOptions = SendChangesOptions()) async throws {
        try await runOperation { engine in
            try await engine.send(SendChangesContext(reason: .manual, options: options))
        }
    }

    /// Cancels the operations in flight. Their changes stay pending (a request may still have
    /// reached the server); a manual call that was cancelled throws ``SyncEngineError/Code/cancelled``.
    /// With `automaticallySync` on, the engine retries later.
    public func cancelOperations() {
        for cancel in operationCancellers.values { cancel() }
    }

    // MARK: Operations

    /// Runs `body` as an operation: one at a time, cancellable by ``cancelOperations()``.
    func runOperation(_ body: @escaping @Sendable (isolated SyncEngine) async throws -> Void) async throws {
        nextOperationID += 1
        let id = nextOperationID
        let task = Task {
            await self.acquireOperation()
            defer { self.releaseOperation() }
            do {
                try await body(self)
            } catch {
                await self.deliverEvents()
                throw error
            }
            await self.deliverEvents()
        }
        operationCancellers[id] = { task.cancel() }
        defer { operationCancellers[id] = nil }
        try await withTaskCancellationHandler {
            try await task.value
        } onCancel: {
            task.cancel()
        }
    }

    private func acquireOperation() async {
        guard isOperationRunning else {
            isOperationRunning = true
            return
        }
        await withCheckedContinuation { operationWaiters.append($0) }
    }

    private func releaseOperation() {
        if operationWaiters.isEmpty {
            isOperationRunning = false
        } else {
            operationWaiters.removeFirst().resume()
        }
    }

    /// Fails with the right error when the engine cannot work.
    func checkCanOperate() throws {
        if isStopped { throw SyncEngineError.stopped(because: nil) }
        if delegate == nil { throw SyncEngineError.delegateReleased }
        if Task.isCancelled { throw SyncEngineError.cancelled }
    }

    /// Turns an operation's failure into the error its caller sees, tells the scheduler, and stops
    /// the engine on an authentication failure.
    func settle(_ error: any Error, of operation: SyncScheduler.Operation) async -> any Error {
        if error is CancellationError || (error as? SyncEngineError)?.code == .cancelled {
            return settleCancellation(of: operation)
        }
        if let error = error as? SyncEngineError { return error }
        guard let error = error as? CloudError else {
            scheduler.failed(operation, at: clock.now, cause: .server, retryAfter: nil, jitter: configuration.jitter())
            return error
        }
        if error.isAuthenticationFailure {
            await stop(because: error)
            return SyncEngineError.stopped(because: error)
        }
        if error.kind == .cancelled { return settleCancellation(of: operation) }
        let cause: SyncScheduler.BackoffCause = error.kind == .network || error.kind == .timeout ? .network : .server
        scheduler.failed(
            operation, at: clock.now, cause: cause, retryAfter: error.retryAfter.map { .seconds($0) },
            jitter: configuration.jitter())
        logger.info(
            "Operation failed; retrying later",
            metadata: ["operation": "\(operation)", "error": "\(error)", "retryAfter": "\(error.retryAfter ?? 0)"])
        return error
    }

    private func settleCancellation(of operation: SyncScheduler.Operation) -> SyncEngineError {
        scheduler.failed(operation, at: clock.now, cause: .server, retryAfter: nil, jitter: configuration.jitter())
        return .cancelled
    }

    // MARK: Events

    /// Queues an event for the delegate. Queued events go in order, several in one call
    /// (``deliverEvents()``), before the engine next calls the delegate and before the operation
    /// that queued them returns. A state update replaces the ones queued before it, and so does
    /// an event that carries the state (``queue(_:carryingStateAt:)``).
    func emit(_ event: Event) {
        if case .stateUpdate = event { queuedEvents.removeAll { if case .stateUpdate = $0 { true } else { false } } }
        queuedEvents.append(event)
    }

    /// Queues an event that carries the state as it was at `version`: no state update is due for
    /// what it carries.
    func queue(_ event: Event, carryingStateAt version: UInt64) {
        queuedEvents.removeAll { if case .stateUpdate = $0 { true } else { false } }
        queuedEvents.append(event)
        lastEmittedStateVersion = version
    }

    /// Hands the queued events to the delegate in one call and waits until it handled them.
    func deliverEvents() async {
        guard !queuedEvents.isEmpty else { return }
        let events = queuedEvents
        queuedEvents = []
        guard let delegate else {
            logger.warning("Dropped events: the delegate was released", metadata: ["count": "\(events.count)"])
            return
        }
        for event in events { logger.trace("Delivering event", metadata: ["event": "\(event)"]) }
        delegateCalls.record()
        await delegate.handleEvents(events, syncEngine: self)
    }

    /// Queues ``Event/stateUpdate(_:)`` when the state changed since the last one the delegate
    /// was given.
    func emitStateUpdateIfNeeded() {
        let (version, serialization) = state.withStorage { ($0.version, $0.serialization) }
        guard version != lastEmittedStateVersion else { return }
        lastEmittedStateVersion = version
        emit(.stateUpdate(Event.StateUpdate(stateSerialization: serialization)))
    }

    /// Drains changes the app made to the state and delivers a state update for them; called by
    /// the scheduling loop, so apps hear about their own changes without syncing automatically.
    func absorbStateChanges() async {
        if let added = inbox.take() {
            scheduler.changesAdded(at: added.first)
            scheduler.changesAdded(at: added.last)
        }
        let version = state.withStorage { $0.version }
        guard version != lastEmittedStateVersion, !isStopped else { return }
        await acquireOperation()
        emitStateUpdateIfNeeded()
        await deliverEvents()
        releaseOperation()
    }

    // MARK: Zone IDs

    /// The zone as the app names it: without an owner when the current user owns it, as
    /// CKSyncEngine uses `CKCurrentUserDefaultName`. Server answers name the owner; apps need not.
    func normalized(_ zoneID: ZoneID) -> ZoneID {
        guard let owner = zoneID.ownerRecordName, owner == currentUserRecordName else { return zoneID }
        return zoneID.withoutOwner
    }

    func normalized(_ recordID: RecordID) -> RecordID {
        RecordID(recordName: recordID.recordName, zoneID: normalized(recordID.zoneID))
    }

    func normalized(_ record: Record) -> Record {
        var record = record
        record.zoneID = normalized(record.recordID.zoneID)
        return record
    }

    func normalized(_ change: PendingRecordZoneChange) -> PendingRecordZoneChange {
        switch change {
        case .saveRecord(let recordID): .saveRecord(normalized(recordID))
        case .deleteRecord(let recordID): .deleteRecord(normalized(recordID))
        }
    }
}

extension CloudError {
    /// Whether the server rejected the credentials.
    var isAuthenticationFailure: Bool {
        code == .authenticationFailed || code == .authenticationRequired
    }
}

/// Counts calls, from any thread, without a lock: how often an engine called its delegate
/// (``SyncEngine/delegateCalls``).
final class CallCounter: Sendable {
    private let count = Atomic(0)

    /// The calls counted so far.
    var value: Int { count.load(ordering: .relaxed) }

    func record() { count.add(1, ordering: .relaxed) }
}

/// Changes the app made to the state since the scheduling loop last looked.
final class StateInbox: Sendable {
    /// When changes were first and last added since the loop last looked.
    private let added = Mutex<(first: Duration, last: Duration)?>(nil)

    func post(addedChangesAt time: Duration?) {
        guard let time else { return }
        added.withLock { $0 = ($0?.first ?? time, time) }
    }

    func take() -> (first: Duration, last: Duration)? {
        added.withLock { value in
            defer { value = nil }
            return value
        }
    }
}
