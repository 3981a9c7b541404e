import CloudStoreWire
import Logging
import Synchronization

// The background work of an engine: the scheduling loop, which runs what the scheduler decides,
// and the push listener, which long-polls the server. Both hold the engine weakly, so an engine
// nobody references ends, and its deinit cancels them.

extension SyncEngine {
    enum LoopStep: Sendable {
        case again
        case wait(until: Duration)
        case idle
        case stop
    }

    /// One turn of the scheduling loop: absorb the app's state changes, then run what is due.
    func loopStep() async -> LoopStep {
        if isStopped || delegate == nil { return .stop }
        wake.clear()
        await absorbStateChanges()
        guard configuration.automaticallySync else { return .idle }
        let action = scheduler.nextAction(at: clock.now)
        logger.trace("Scheduler decided", metadata: ["action": "\(action)"])
        switch action {
        case .stop: return .stop
        case .idle: return .idle
        case .wait(let deadline): return .wait(until: deadline)
        case .fetch:
            scheduler.willStart(.fetch)
            await runScheduled(.fetch)
            return .again
        case .send:
            scheduler.willStart(.send)
            await runScheduled(.send)
            return .again
        }
    }

    private func runScheduled(_ operation: SyncScheduler.Operation) async {
        do {
            try await runOperation { engine in
                switch operation {
                case .send:
                    try await engine.send(SendChangesContext(reason: .scheduled, options: SendChangesOptions()))
                case .fetch:
                    let context = FetchChangesContext(reason: .scheduled, options: FetchChangesOptions())
                    let options = await engine.nextFetchChangesOptions(context)
                    try await engine.fetch(
                        FetchChangesContext(reason: .scheduled, options: options ?? context.options))
                }
            }
        } catch {
            logger.debug("Scheduled operation failed", metadata: ["operation": "\(operation)", "error": "\(error)"])
        }
    }

    /// The delegate's options for a scheduled fetch, once the events queued before were delivered.
    private func nextFetchChangesOptions(_ context: FetchChangesContext) async -> FetchChangesOptions? {
        await deliverEvents()
        guard let delegate else { return nil }
        delegateCalls.record()
        return await delegate.nextFetchChangesOptions(context, syncEngine: self)
    }

    /// The long poll answered: push works, and maybe the database changed; `pushed` is what its
    /// answer carried for the next fetch.
    func pushAnswered(changed: Bool, pushed: PushedChanges? = nil) {
        logger.debug("Long poll answered", metadata: ["changed": "\(changed)"])
        if changed { pushedChanges = pushed }
        scheduler.pushReceived(changed: changed, at: clock.now)
        wake.signal()
    }

    /// The long poll asked from the database token `since`, naming `zoneTokens`, answered.
    /// Answers the zone tokens the next poll names: by the time it answers, the fetch this one
    /// woke has brought each changed zone to the token the answer lists for it.
    @discardableResult
    func pushAnswered(changed: Bool, response: NotificationsResponse, since: String?, zoneTokens: [ZoneID: String])
        -> [ZoneID: String]
    {
        pushAnswered(
            changed: changed,
            pushed: since.map { PushedChanges(response, since: $0, zoneTokens: zoneTokens, normalize: normalized) })
        let expected = changed ? PushedChanges.expectedZoneTokens(after: response, normalize: normalized) : [:]
        return state.withStorage { PushedChanges.zoneTokens(in: $0, expecting: expected) }
    }

    /// The long poll failed: fall back to polling until it works again.
    func pushFailed(_ error: any Error) {
        logger.info("Long poll failed; polling until push works again", metadata: ["error": "\(error)"])
        scheduler.pushFailed(at: clock.now)
        wake.signal()
    }

    /// Stops the engine for good after the server rejected its credentials, and reports a sign-out.
    /// The caller holds the operation turn.
    func stop(because error: CloudError) async {
        guard !isStopped else { return }
        isStopped = true
        scheduler.authenticationFailed()
        tasks.cancelListener()
        logger.error(
            "Server rejected the credentials; sync engine stopped",
            metadata: ["error": "\(error)", "user": "\(currentUserRecordName ?? "unknown")"])
        let previousUser = currentUserRecordName ?? state.withStorage { $0.userRecordName }
        emit(.accountChange(Event.AccountChange(changeType: .signOut(previousUser: previousUser))))
        wake.signal()
    }

    func stopFromListener(because error: CloudError) async {
        try? await runOperation { engine in await engine.stop(because: error) }
    }

    // MARK: Loops

    static func runLoop(_ engine: WeakReference<SyncEngine>, wake: WakeSignal, clock: EngineClock) async {
        while !Task.isCancelled {
            let step: LoopStep
            if let strong = engine.value {
                step = await strong.loopStep()
            } else {
                return
            }
            switch step {
            case .again: continue
            case .stop: return
            case .idle: await wake.wait()
            case .wait(let deadline): await wake.wait(until: deadline, on: clock)
            }
        }
    }

    static func listenForPush(
        _ engine: WeakReference<SyncEngine>, since token: String, database: any CloudDatabase, clock: EngineClock,
        configuration: Configuration
    ) async {
        var since: String? = token
        var failures = 0
        // The zones whose first page an answer may carry, unless the engine fetches only some
        // record types: those whose token the state holds, or will hold once a woken fetch ran.
        let namesZones = configuration.recordTypes == nil
        var expectedZoneTokens: [ZoneID: String]?
        while !Task.isCancelled {
            do {
                let asked = since
                var zoneTokens: [ZoneID: String] = [:]
                if namesZones {
                    zoneTokens = expectedZoneTokens ?? engine.value?.state.withStorage { PushedChanges.zoneTokens(in: $0) } ?? [:]
                }
                expectedZoneTokens = nil
                let response = try await database.waitForChanges(
                    since: asked, zoneTokens: zoneTokens.values.sorted(), timeout: configuration.longPollTimeout)
                failures = 0
                since = response.syncToken
                guard let strong = engine.value else { return }
                let subscribed = strong.state.withStorage { $0.subscribedRecordTypes }
                expectedZoneTokens = await strong.pushAnswered(
                    changed: configuration.isWoken(by: response, scope: database.scope, subscribed: subscribed),
                    response: response, since: asked, zoneTokens: zoneTokens)
            } catch {
                let cloudError = error as? CloudError
                if Task.isCancelled || error is CancellationError || cloudError?.kind == .cancelled { return }
                if let cloudError, cloudError.isAuthenticationFailure {
                    await engine.value?.stopFromListener(because: cloudError)
                    return
                }
                guard let strong = engine.value else { return }
                if since != nil && Self.rejectsToken(cloudError?.serverError) {
                    // Listen from now on, and fetch to cover what changed since the rejected token.
                    since = nil
                    await strong.pushAnswered(changed: true)
                    continue
                }
                failures += 1
                await strong.pushFailed(error)
                let delay = SyncScheduler.backoffDelay(
                    failures: failures, base: configuration.backoffBase,
                    max: max(configuration.backoffBase, min(configuration.backoffMax, configuration.longPollTimeout)),
                    jitter: configuration.jitter())
                do {
                    try await clock.sleep(until: clock.now + delay)
                } catch {
                    return
                }
            }
        }
    }
}

/// A weak reference that can cross tasks.
final class WeakReference<Object: AnyObject & Sendable>: Sendable {
    private let storage: Mutex<WeakBox>

    private struct WeakBox: Sendable {
        weak var object: Object?
    }

    init(_ object: Object) { storage = Mutex(WeakBox(object: object)) }

    var value: Object? { storage.withLock { $0.object } }
}

/// The engine's background tasks: the scheduling loop and the push listener.
final class BackgroundTasks: Sendable {
    private let loop = Mutex<Task<Void, Never>?>(nil)
    private let listener = Mutex<Task<Void, Never>?>(nil)
    private let isListenerStopped = Mutex(false)

    /// Starts the loop (always: it also delivers state updates for the app's own changes) and,
    /// when the state already holds a database token, the push listener.
    func start(engine: SyncEngine) {
        let reference = WeakReference(engine)
        let wake = engine.wake
        let clock = engine.clock
        loop.withLock { $0 = Task { await SyncEngine.runLoop(reference, wake: wake, clock: clock) } }
        startListenerIfNeeded(engine: engine)
    }

    /// Starts the push listener once, when syncing automatically with push and the state holds a
    /// database token to listen from. Without a token the server would wait for changes after the
    /// moment the poll arrives, and miss those made since the last fetch: so the engine calls this
    /// again after each successful fetch.
    func startListenerIfNeeded(engine: SyncEngine) {
        let configuration = engine.configuration
        guard configuration.automaticallySync && configuration.listensForPush,
            let since = engine.state.withStorage({ $0.databaseToken })
        else { return }
        let reference = WeakReference(engine)
        let database = engine.database
        let clock = engine.clock
        listener.withLock { listener in
            guard listener == nil, !isListenerStopped.withLock({ $0 }) else { return }
            listener = Task {
                await SyncEngine.listenForPush(
                    reference, since: since, database: database, clock: clock, configuration: configuration)
            }
        }
    }

    func cancelListener() {
        isListenerStopped.withLock { $0 = true }
        listener.withLock { $0 }?.cancel()
    }

    func cancelAll() {
        loop.withLock { $0 }?.cancel()
        cancelListener()
    }
}
