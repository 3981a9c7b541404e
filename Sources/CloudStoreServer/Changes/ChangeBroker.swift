import Foundation
import Synchronization

/// Wakes the long polls of this process waiting on a partition when it changes.
///
/// A waiter subscribes *before* it reads the state it waits to see change, then waits; a change
/// published in between is not lost, because the subscription remembers the partition's generation
/// at the time it was taken:
///
/// ```swift
/// let subscription = broker.subscribe(partition.key)
/// defer { broker.unsubscribe(subscription) }
/// if try await nothingChangedYet() {
///     await broker.wait(subscription, timeout: .seconds(30))
/// }
/// ```
final class ChangeBroker: Sendable {
    struct Subscription: Sendable {
        fileprivate let key: String
        fileprivate let id: Int
        fileprivate let generation: UInt64
    }

    private struct Entry {
        var generation: UInt64 = 0
        var subscribers = 0
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var nextID = 0
    }

    private let state = Mutex(State())

    func subscribe(_ key: String) -> Subscription {
        state.withLock { state in
            state.nextID += 1
            var entry = state.entries[key] ?? Entry()
            entry.subscribers += 1
            state.entries[key] = entry
            return Subscription(key: key, id: state.nextID, generation: entry.generation)
        }
    }

    func unsubscribe(_ subscription: Subscription) {
        let continuation = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard var entry = state.entries[subscription.key] else { return nil }
            let continuation = entry.waiters.removeValue(forKey: subscription.id)
            entry.subscribers -= 1
            state.entries[subscription.key] = entry.subscribers == 0 ? nil : entry
            return continuation
        }
        continuation?.resume()
    }

    /// The partitions with a subscriber now: what ``ChangePoll`` reads.
    var watchedKeys: Set<String> {
        state.withLock { Set($0.entries.keys) }
    }

    /// Wakes every waiter of a partition.
    func publish(_ key: String) {
        let continuations = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            guard var entry = state.entries[key] else { return [] }
            entry.generation &+= 1
            let waiters = Array(entry.waiters.values)
            entry.waiters = [:]
            state.entries[key] = entry
            return waiters
        }
        for continuation in continuations { continuation.resume() }
    }

    /// Whether the partition changed since the subscription was taken.
    func hasChanged(_ subscription: Subscription) -> Bool {
        state.withLock { $0.entries[subscription.key]?.generation != subscription.generation }
    }

    /// Returns when the partition changes after the subscription was taken (at once if it already
    /// did), when the timeout passes, or when the task is cancelled.
    func wait(_ subscription: Subscription, timeout: Duration) async {
        await wait(anyOf: [subscription], timeout: timeout)
    }

    /// Returns when any of the subscriptions' partitions changes after it was taken, when the
    /// timeout passes, or when the task is cancelled.
    func wait(anyOf subscriptions: [Subscription], timeout: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            for subscription in subscriptions {
                group.addTask { await self.waitForChange(subscription) }
            }
            group.addTask { try? await Task.sleep(for: timeout) }
            await group.next()
            group.cancelAll()
        }
    }

    func waitForChange(_ subscription: Subscription) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let resumeNow = state.withLock { state -> Bool in
                    guard var entry = state.entries[subscription.key],
                        entry.generation == subscription.generation, !Task.isCancelled
                    else { return true }
                    entry.waiters[subscription.id] = continuation
                    state.entries[subscription.key] = entry
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let continuation = state.withLock { state in
                state.entries[subscription.key]?.waiters.removeValue(forKey: subscription.id)
            }
            continuation?.resume()
        }
    }
}
