import CloudStoreWire
import Foundation
import Synchronization

/// What the server did lately, for the console: the last requests it answered and the last
/// failures, kept in memory (a bounded ring each), and running totals since it started.
///
/// ```swift
/// let activity = ServerActivity()
/// activity.record(ServerActivity.Request(time: Date(), method: "POST", route: "records/modify", status: 200, …))
/// activity.recentRequests.first?.route   // "records/modify"
/// ```
public final class ServerActivity: Sendable {
    /// One answered request. Never holds a token or a body.
    public struct Request: Sendable, Hashable {
        public var time: Date
        public var method: String
        /// The route's pattern, e.g. `database/1/:container/:environment/:database/records/modify`.
        public var route: String
        /// The container, when the path named one.
        public var container: String?
        public var status: Int
        public var duration: Duration
        /// Who called, e.g. `user _alice`; nil when the request did not authenticate.
        public var caller: String?
        /// The error's `serverErrorCode` and reason, for answers other than 2xx.
        public var errorCode: String?
        public var reason: String?

        public init(
            time: Date, method: String, route: String, container: String?, status: Int, duration: Duration,
            caller: String?, errorCode: String?, reason: String?
        ) {
            self.time = time
            self.method = method
            self.route = route
            self.container = container
            self.status = status
            self.duration = duration
            self.caller = caller
            self.errorCode = errorCode
            self.reason = reason
        }

        public var failed: Bool { status >= 400 }
    }

    /// Running totals since the server started.
    public struct Totals: Sendable, Hashable {
        public var requests = 0
        public var clientErrors = 0
        public var serverErrors = 0
        public var recordsWritten = 0
        public var recordsServed = 0
        public var throttled = 0
        public var storageErrors = 0
        public var longPollsWaiting = 0
    }

    private struct State {
        var requests: [Request] = []
        var failures: [Request] = []
        var totals = Totals()
    }

    /// How many requests and failures are kept.
    public let capacity: Int
    public let started: Date
    private let state = Mutex(State())

    public init(capacity: Int = 200, started: Date = Date()) {
        self.capacity = capacity
        self.started = started
    }

    /// The last requests answered, newest first.
    public var recentRequests: [Request] { state.withLock { $0.requests.reversed() } }
    /// The last answers of 400 and above, newest first.
    public var recentFailures: [Request] { state.withLock { $0.failures.reversed() } }
    public var totals: Totals { state.withLock { $0.totals } }

    func record(_ request: Request) {
        state.withLock { state in
            state.requests.append(request)
            if state.requests.count > capacity { state.requests.removeFirst(state.requests.count - capacity) }
            state.totals.requests += 1
            if request.status == 429 { state.totals.throttled += 1 }
            if request.status >= 500 {
                state.totals.serverErrors += 1
            } else if request.status >= 400 {
                state.totals.clientErrors += 1
            }
            guard request.failed else { return }
            state.failures.append(request)
            if state.failures.count > capacity { state.failures.removeFirst(state.failures.count - capacity) }
        }
    }

    func recordsWritten(_ count: Int) { state.withLock { $0.totals.recordsWritten += count } }
    func recordsServed(_ count: Int) { state.withLock { $0.totals.recordsServed += count } }
    func storageError() { state.withLock { $0.totals.storageErrors += 1 } }
    func longPollStarted() { state.withLock { $0.totals.longPollsWaiting += 1 } }
    func longPollEnded() { state.withLock { $0.totals.longPollsWaiting -= 1 } }
}
