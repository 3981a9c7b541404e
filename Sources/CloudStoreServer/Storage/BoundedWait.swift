import Synchronization

/// Waits for a task's end for at most a while: how a stopping server waits for work that a library
/// may never finish, without hanging its shutdown on it.
///
/// PostgresNIO 1.33's pool, cancelled at a shutdown, now and then never returns from `run()` (about
/// one full test run in two, each starting a few hundred servers, hung there with every connection
/// closed and nothing left to wait for). A server waits for it a few seconds and then stops anyway,
/// saying so.
///
/// ```swift
/// let pool = Task { await client.run() }
/// // ... at shutdown:
/// pool.cancel()
/// if await BoundedWait.untilEnd(of: pool, atMost: .seconds(5)) == .timedOut { logger.warning(...) }
/// ```
enum BoundedWait {
    enum Outcome: Equatable, Sendable {
        case ended
        case timedOut
    }

    /// Returns when `task` ends or `limit` passed on `clock`, whichever comes first. The task goes
    /// on when the time is up: it is not cancelled here.
    static func untilEnd<C: Clock>(
        of task: Task<Void, Never>, atMost limit: C.Duration, clock: C = ContinuousClock()
    ) async -> Outcome {
        let answer = Answer()
        return await withCheckedContinuation { continuation in
            answer.wait(with: continuation)
            let timer = Task {
                do { try await clock.sleep(for: limit) } catch { return }  // cancelled: the task ended first
                answer.give(.timedOut)
            }
            Task {
                await task.value
                timer.cancel()
                answer.give(.ended)
            }
        }
    }

    /// The first outcome, handed to the waiter once.
    private final class Answer: Sendable {
        private let waiter = Mutex<CheckedContinuation<Outcome, Never>?>(nil)

        func wait(with continuation: CheckedContinuation<Outcome, Never>) {
            waiter.withLock { $0 = continuation }
        }

        func give(_ outcome: Outcome) {
            waiter.withLock { waiter in
                defer { waiter = nil }
                return waiter
            }?.resume(returning: outcome)
        }
    }
}
