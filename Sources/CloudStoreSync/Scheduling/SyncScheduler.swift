/// Decides when an automatically syncing engine sends and fetches. A pure state machine: the
/// engine feeds it what happened, with the time, and asks it what to do next; it does no I/O and
/// reads no clock, so tests drive it directly.
///
/// - Changes added: send after `sendDebounce` of quiet, but no later than `maxSendDelay` after
///   the first unsent change. With `sendsAtLeadingEdge`, a change added while no send is in
///   flight or waiting goes at once; changes added while a send is in flight or waiting are
///   gathered by the debounce as before, so a burst of saves costs one send after the first.
/// - A push saying the database changed, or the poll timer when push is unavailable: fetch now.
/// - A failure: wait `retryAfter` when the server gave one, otherwise back off exponentially
///   (`backoffBase` doubling up to `backoffMax`) with jitter; then retry what failed.
/// - A success resets the back-off. The network coming back (a long poll succeeding again) ends a
///   back-off caused by the network, not one the server asked for.
/// - An authentication failure stops everything.
struct SyncScheduler: Sendable {
    struct Configuration: Sendable {
        var sendDebounce: Duration
        var maxSendDelay: Duration
        /// Nil: never poll.
        var pollInterval: Duration?
        var backoffBase: Duration
        var backoffMax: Duration
        var sendsAtLeadingEdge = false
    }

    enum Operation: Sendable, Hashable {
        case send, fetch
    }

    enum Action: Sendable, Hashable {
        case send
        case fetch
        /// Nothing to do before this time (or before new input).
        case wait(until: Duration)
        /// Nothing to do until new input.
        case idle
        case stop
    }

    /// Why the engine is backing off, which decides what ends it.
    enum BackoffCause: Sendable, Hashable {
        /// Connection failures and timeouts: ended early when the network is back.
        case network
        /// The server asked (`retryAfter`) or failed (5xx): waited out.
        case server
    }

    let configuration: Configuration
    private(set) var sendDueAt: Duration?
    private(set) var fetchDueAt: Duration?
    private(set) var backoffUntil: Duration?
    private(set) var backoffCause: BackoffCause?
    private(set) var consecutiveFailures = 0
    private(set) var pushAvailable: Bool
    private(set) var nextPollAt: Duration?
    private(set) var isStopped = false
    private var firstUnsentChangeAt: Duration?
    /// Whether a send is running: the leading edge waits for it to end.
    private(set) var isSending = false
    /// Whether the send now due is a leading edge's: changes added before it starts go with it.
    private var dueAtLeadingEdge = false

    /// A scheduler that fetches once at `now` (catching up on what changed while the app was not
    /// running), and sends then too when changes are pending.
    init(configuration: Configuration, now: Duration, pushAvailable: Bool, hasPendingChanges: Bool) {
        self.configuration = configuration
        self.pushAvailable = pushAvailable
        fetchDueAt = now
        if hasPendingChanges { sendDueAt = now }
        if !pushAvailable { nextPollAt = configuration.pollInterval.map { now + $0 } }
    }

    // MARK: Inputs

    mutating func changesAdded(at now: Duration) {
        let idle = firstUnsentChangeAt == nil && !isSending
        let first = firstUnsentChangeAt ?? now
        firstUnsentChangeAt = first
        if configuration.sendsAtLeadingEdge && idle {
            // The leading edge: at once. Changes that follow while it is in flight are gathered.
            dueAtLeadingEdge = true
            sendDueAt = min(sendDueAt ?? now, now)
        } else if !dueAtLeadingEdge {
            sendDueAt = min(now + configuration.sendDebounce, first + configuration.maxSendDelay)
        }
    }

    /// A long poll answered: the push channel works (and so does the network).
    mutating func pushReceived(changed: Bool, at now: Duration) {
        pushAvailable = true
        nextPollAt = nil
        networkRestored()
        if changed { fetchDueAt = min(fetchDueAt ?? now, now) }
    }

    /// The long poll failed: poll until it works again.
    mutating func pushFailed(at now: Duration) {
        pushAvailable = false
        if nextPollAt == nil { nextPollAt = configuration.pollInterval.map { now + $0 } }
    }

    /// The network works again: end a back-off the network caused.
    mutating func networkRestored() {
        guard backoffCause == .network else { return }
        backoffUntil = nil
        backoffCause = nil
        consecutiveFailures = 0
    }

    /// The engine starts an operation.
    mutating func willStart(_ operation: Operation) {
        switch operation {
        case .send:
            sendDueAt = nil
            firstUnsentChangeAt = nil
            dueAtLeadingEdge = false
            isSending = true
        case .fetch:
            fetchDueAt = nil
        }
    }

    /// `morePending`: after a send, whether changes in any scope are still pending.
    mutating func succeeded(_ operation: Operation, at now: Duration, morePending: Bool = false) {
        if operation == .send { isSending = false }
        consecutiveFailures = 0
        backoffUntil = nil
        backoffCause = nil
        if operation == .send && morePending { sendDueAt = min(sendDueAt ?? now, now) }
    }

    /// The operation failed and should be retried: after `retryAfter` when given, otherwise after an
    /// exponential back-off scaled by `jitter` (a random number in 0..<1).
    mutating func failed(
        _ operation: Operation, at now: Duration, cause: BackoffCause, retryAfter: Duration?, jitter: Double
    ) {
        if operation == .send { isSending = false }
        consecutiveFailures += 1
        let delay =
            retryAfter
            ?? Self.backoffDelay(
                failures: consecutiveFailures, base: configuration.backoffBase, max: configuration.backoffMax,
                jitter: jitter)
        let until = now + delay
        backoffUntil = max(backoffUntil ?? until, until)
        backoffCause = retryAfter != nil ? .server : cause
        switch operation {
        case .send: sendDueAt = min(sendDueAt ?? now, now)
        case .fetch: fetchDueAt = min(fetchDueAt ?? now, now)
        }
    }

    mutating func authenticationFailed() {
        isStopped = true
    }

    // MARK: Decisions

    /// What to do at `now`. Folds in the poll timer: when push is unavailable and a poll is due,
    /// a fetch becomes due and the next poll is set.
    mutating func nextAction(at now: Duration) -> Action {
        if isStopped { return .stop }
        if !pushAvailable, let poll = nextPollAt, poll <= now, let interval = configuration.pollInterval {
            fetchDueAt = min(fetchDueAt ?? now, now)
            nextPollAt = now + interval
        }
        let fetchAt = fetchDueAt.map(allowed)
        let sendAt = sendDueAt.map(allowed)
        if let fetchAt, fetchAt <= now { return .fetch }
        if let sendAt, sendAt <= now { return .send }
        let deadlines = [fetchAt, sendAt, pushAvailable ? nil : nextPollAt].compactMap { $0 }
        return deadlines.min().map { .wait(until: $0) } ?? .idle
    }

    private func allowed(_ due: Duration) -> Duration {
        max(due, backoffUntil ?? due)
    }

    /// `base · 2^(failures-1)`, capped at `max`, scaled into its upper half by `jitter` ("equal
    /// jitter"): retries spread out yet never come sooner than half the nominal delay.
    static func backoffDelay(failures: Int, base: Duration, max maximum: Duration, jitter: Double) -> Duration {
        let exponent = Swift.min(Swift.max(failures - 1, 0), 30)
        let nominal = Swift.min(base * (1 << exponent), maximum)
        let clamped = Swift.min(Swift.max(jitter, 0), 1)
        return nominal * (0.5 + 0.5 * clamped)
    }
}
