import Synchronization

/// Wakes the engine's scheduling loop when something happened: changes were added, a push
/// arrived, an operation finished. A signal sent while nobody waits is kept for the next wait.
final class WakeSignal: Sendable {
    private struct Waiting {
        var isSignalled = false
        var waiter: (id: UInt64, continuation: CheckedContinuation<Void, Never>)?
        var nextID: UInt64 = 0
    }

    private let waiting = Mutex(Waiting())

    func signal() {
        let continuation = waiting.withLock { waiting -> CheckedContinuation<Void, Never>? in
            guard let waiter = waiting.waiter else {
                waiting.isSignalled = true
                return nil
            }
            waiting.waiter = nil
            return waiter.continuation
        }
        continuation?.resume()
    }

    /// Forgets a kept signal: called right before the loop reads all its inputs, which covers it.
    func clear() {
        waiting.withLock { $0.isSignalled = false }
    }

    /// Returns at the next signal (at once if one is kept), or when the task is cancelled.
    func wait() async {
        let id = waiting.withLock { waiting in
            waiting.nextID += 1
            return waiting.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let resumeNow = waiting.withLock { waiting -> Bool in
                    if waiting.isSignalled {
                        waiting.isSignalled = false
                        return true
                    }
                    if Task.isCancelled { return true }
                    waiting.waiter?.continuation.resume()
                    waiting.waiter = (id, continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let continuation = waiting.withLock { waiting -> CheckedContinuation<Void, Never>? in
                guard let waiter = waiting.waiter, waiter.id == id else { return nil }
                waiting.waiter = nil
                return waiter.continuation
            }
            continuation?.resume()
        }
    }

    /// Returns at the next signal or at `deadline` on `clock`, whichever comes first.
    func wait(until deadline: Duration, on clock: EngineClock) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await clock.sleep(until: deadline) }
            group.addTask { await self.wait() }
            await group.next()
            group.cancelAll()
        }
    }
}
