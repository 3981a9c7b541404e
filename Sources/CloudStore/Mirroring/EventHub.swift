import Foundation
import Synchronization

/// Delivers container events to every subscriber's stream.
final class EventHub: Sendable {
    private let subscribers = Mutex<[UUID: AsyncStream<PersistentCloudContainer.Event>.Continuation]>([:])

    func subscribe() -> AsyncStream<PersistentCloudContainer.Event> {
        let (stream, continuation) = AsyncStream<PersistentCloudContainer.Event>.makeStream(bufferingPolicy: .bufferingNewest(1000))
        let id = UUID()
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.removeValue(forKey: id) }
        }
        subscribers.withLock { $0[id] = continuation }
        return stream
    }

    func send(_ event: PersistentCloudContainer.Event) {
        for continuation in subscribers.withLock({ Array($0.values) }) {
            continuation.yield(event)
        }
    }

    func finish() {
        for continuation in subscribers.withLock({ subscribers in
            defer { subscribers.removeAll() }
            return Array(subscribers.values)
        }) {
            continuation.finish()
        }
    }
}

/// One piece of work in progress, to report its start and end with the same id.
struct EventTracker {
    let id = UUID()
    let kind: PersistentCloudContainer.Event.Kind
    let startDate: Date
    var counts = MirrorCounts()
    var failure: PersistentCloudContainer.SyncFailure?

    init(_ kind: PersistentCloudContainer.Event.Kind, startDate: Date = Date()) {
        self.kind = kind
        self.startDate = startDate
    }

    var started: PersistentCloudContainer.Event {
        PersistentCloudContainer.Event(
            id: id, kind: kind, startDate: startDate, endDate: nil, succeeded: true, error: nil, counts: counts)
    }

    func ended(at date: Date = Date()) -> PersistentCloudContainer.Event {
        PersistentCloudContainer.Event(
            id: id, kind: kind, startDate: startDate, endDate: date, succeeded: failure == nil, error: failure,
            counts: counts)
    }
}
