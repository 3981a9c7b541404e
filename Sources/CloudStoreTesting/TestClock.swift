import Synchronization

/// A `Clock` whose time moves only when a test advances it, so code that waits (back-off,
/// `retryAfter`, debounce, polling) can be tested without sleeping.
///
/// ```swift
/// let clock = TestClock()
/// var configuration = SyncEngine.Configuration(database: database, stateSerialization: nil, delegate: device)
/// configuration.clock = clock
/// // … the engine hits a 429 with retryAfter 30 and waits:
/// await clock.waitForSleepers()
/// #expect(clock.nextDeadline == clock.now.advanced(by: .seconds(30)))
/// clock.advance(by: .seconds(30))   // the engine retries now
/// ```
public final class TestClock: Clock, Sendable {
    public struct Instant: InstantProtocol, CustomStringConvertible {
        /// Time since the clock's origin.
        public var offset: Duration

        public init(offset: Duration) { self.offset = offset }

        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
        public var description: String { "\(offset)" }
    }

    private struct Sleeper {
        var id: UInt64
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct Storage {
        var now: Instant
        var sleepers: [Sleeper] = []
        var nextID: UInt64 = 0
        var sleeperWaiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []

        /// Waiters whose sleeper count is reached, removed from the list.
        mutating func satisfiedWaiters() -> [CheckedContinuation<Void, Never>] {
            let count = sleepers.count
            let ready = sleeperWaiters.filter { $0.count <= count }.map(\.continuation)
            sleeperWaiters.removeAll { $0.count <= count }
            return ready
        }
    }

    private let storage: Mutex<Storage>

    public init(now: Instant = Instant(offset: .zero)) {
        storage = Mutex(Storage(now: now))
    }

    public var now: Instant { storage.withLock { $0.now } }
    public var minimumResolution: Duration { .zero }

    /// How many tasks are sleeping on this clock.
    public var sleeperCount: Int { storage.withLock { $0.sleepers.count } }

    /// The earliest deadline a task sleeps until, if any.
    public var nextDeadline: Instant? { storage.withLock { $0.sleepers.map(\.deadline).min() } }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        let id = storage.withLock { storage in
            storage.nextID += 1
            return storage.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Outcome { case slept, cancelled, waiting([CheckedContinuation<Void, Never>]) }
                let outcome = storage.withLock { storage -> Outcome in
                    if deadline <= storage.now { return .slept }
                    if Task.isCancelled { return .cancelled }
                    storage.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    return .waiting(storage.satisfiedWaiters())
                }
                switch outcome {
                case .slept: continuation.resume()
                case .cancelled: continuation.resume(throwing: CancellationError())
                case .waiting(let waiters): for waiter in waiters { waiter.resume() }
                }
            }
        } onCancel: {
            let sleeper = storage.withLock { storage -> Sleeper? in
                guard let index = storage.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return storage.sleepers.remove(at: index)
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves time forward and wakes every sleeper whose deadline has come, earliest first.
    public func advance(by duration: Duration) {
        let woken = storage.withLock { storage -> [Sleeper] in
            storage.now = storage.now.advanced(by: duration)
            let now = storage.now
            let due = storage.sleepers.filter { $0.deadline <= now }.sorted { $0.deadline < $1.deadline }
            storage.sleepers.removeAll { $0.deadline <= now }
            return due
        }
        for sleeper in woken { sleeper.continuation.resume() }
    }

    /// Returns once at least `count` tasks sleep on this clock; no real time passes.
    public func waitForSleepers(count: Int = 1) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = storage.withLock { storage -> Bool in
                if storage.sleepers.count >= count { return true }
                storage.sleeperWaiters.append((count, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }
}
