import Foundation
import Synchronization

/// Knows the number of the last transaction committed to a store file and wakes observers
/// waiting for a newer one.
///
/// Commits of this store instance report themselves (``committed(_:)``) and wake observers at
/// once. Commits of other processes (or other store instances on the same file) are found by
/// polling the file's last transaction number while someone waits: the poll reads one row of
/// `sqlite_sequence`, so a short interval costs little, and nothing runs when nobody observes.
/// (inotify on the WAL file would also fire for this process's own writes and for checkpoints,
/// and is Linux-only; polling is portable and its latency is the configured interval.)
final class CommitMonitor: Sendable {
    private struct State {
        var latest: Int64 = 0
        /// How many times polling found commits made elsewhere.
        var externalCommits: Int64 = 0
        var waiters: [UUID: (after: Int64, continuation: CheckedContinuation<Void, Never>)] = [:]
        var isPolling = false
        var isClosed = false
    }

    private let state = Mutex(State())

    var isClosed: Bool { state.withLock(\.isClosed) }

    /// The number of the last transaction known to be committed.
    var latest: Int64 { state.withLock(\.latest) }

    /// How many times polling found transactions committed elsewhere (another process, another
    /// store instance on the file): a waiter compares it before and after waiting.
    var externalCommits: Int64 { state.withLock(\.externalCommits) }

    /// Records that transactions up to `number` are committed, waking those waiting for them.
    func committed(_ number: Int64, elsewhere: Bool = false) {
        let woken = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            guard number > state.latest else { return [] }
            state.latest = number
            if elsewhere { state.externalCommits += 1 }
            let ready = state.waiters.filter { $0.value.after < number }
            for id in ready.keys { state.waiters[id] = nil }
            return ready.values.map(\.continuation)
        }
        for continuation in woken { continuation.resume() }
    }

    /// Wakes everyone and stops polling; waits return at once from now on.
    func close() {
        let woken = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.isClosed = true
            defer { state.waiters = [:] }
            return state.waiters.values.map(\.continuation)
        }
        for continuation in woken { continuation.resume() }
    }

    /// Returns once a transaction after `number` is known to be committed, the monitor closes, or
    /// the task is cancelled. While anyone waits, `poll` is called every `interval` to learn about
    /// commits made elsewhere.
    func wait(after number: Int64, interval: Duration, poll: @escaping @Sendable () async -> Int64?) async {
        let id = UUID()
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let (ready, startPolling) = state.withLock { state -> (Bool, Bool) in
                    if state.isClosed || state.latest > number || Task.isCancelled { return (true, false) }
                    state.waiters[id] = (number, continuation)
                    defer { state.isPolling = true }
                    return (false, !state.isPolling)
                }
                if ready { continuation.resume() }
                if startPolling {
                    Task { await self.pollWhileWaited(interval: interval, poll: poll) }
                }
            }
        } onCancel: {
            let continuation = state.withLock { $0.waiters.removeValue(forKey: id)?.continuation }
            continuation?.resume()
        }
    }

    private func pollWhileWaited(interval: Duration, poll: @Sendable () async -> Int64?) async {
        while true {
            try? await Task.sleep(for: interval)
            if let number = await poll() { committed(number, elsewhere: true) }
            let keepPolling = state.withLock { state -> Bool in
                state.isPolling = !state.waiters.isEmpty && !state.isClosed
                return state.isPolling
            }
            if !keepPolling { return }
        }
    }
}
