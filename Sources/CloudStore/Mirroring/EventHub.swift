import CloudStoreLogging
import Foundation
import Logging
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

/// One piece of work in progress, to report its start, its progress and its end with the same id.
struct EventTracker {
    let id = UUID()
    let kind: PersistentCloudContainer.Event.Kind
    let startDate: Date
    var counts = MirrorCounts()
    var failure: PersistentCloudContainer.SyncFailure?
    /// The records the work set out to handle, when known.
    var total: Int?
    var pacing = ProgressLogPacing()

    init(_ kind: PersistentCloudContainer.Event.Kind, startDate: Date = Date(), total: Int? = nil) {
        self.kind = kind
        self.startDate = startDate
        self.total = total
    }

    var started: PersistentCloudContainer.Event { event(.started, endDate: nil) }

    var progressed: PersistentCloudContainer.Event { event(.progress, endDate: nil) }

    func ended(at date: Date = Date()) -> PersistentCloudContainer.Event { event(.ended, endDate: date) }

    private func event(_ phase: PersistentCloudContainer.Event.Phase, endDate: Date?) -> PersistentCloudContainer.Event {
        PersistentCloudContainer.Event(
            id: id, kind: kind, phase: phase, startDate: startDate, endDate: endDate,
            succeeded: phase != .ended || failure == nil, error: phase == .ended ? failure : nil, counts: counts,
            total: total, activity: [], localDataDecision: nil)
    }

    /// The event that reports share activity (``PersistentCloudContainer/Event/Kind/sharing``).
    static func sharing(_ activity: [ShareActivity], at date: Date = Date()) -> PersistentCloudContainer.Event {
        PersistentCloudContainer.Event(
            id: UUID(), kind: .sharing, phase: .ended, startDate: date, endDate: date, succeeded: true, error: nil,
            counts: MirrorCounts(), total: nil, activity: activity, localDataDecision: nil)
    }

    /// The event that asks the app to decide about local data (``PersistentCloudContainer/Event/Kind/localDataDecision``).
    static func localDataDecision(_ decision: PersistentCloudContainer.LocalDataDecision) -> PersistentCloudContainer.Event {
        PersistentCloudContainer.Event(
            id: UUID(), kind: .localDataDecision, phase: .ended, startDate: decision.date, endDate: decision.date,
            succeeded: true, error: nil, counts: MirrorCounts(), total: nil, activity: [], localDataDecision: decision)
    }

    /// The event that reports fetched records refused for an encrypted field that did not open
    /// (``PersistentCloudContainer/Event/Kind/decryptionRefused``).
    static func decryptionRefused(_ refusals: [PersistentCloudContainer.DecryptionRefusal], at date: Date = Date()) -> PersistentCloudContainer.Event {
        PersistentCloudContainer.Event(
            id: UUID(), kind: .decryptionRefused, phase: .ended, startDate: date, endDate: date, succeeded: true, error: nil,
            counts: MirrorCounts(), total: nil, activity: [], localDataDecision: nil, decryptionRefusals: refusals)
    }

    /// The level-1 line for work under way: running totals and the rate since the start.
    func progressMetadata(at date: Date = Date()) -> Logger.Metadata {
        let seconds = max(date.timeIntervalSince(startDate), 0.001)
        let done = counts.saved + counts.deleted + counts.failed
        var metadata: Logger.Metadata = [
            "done": "\(done)", "saved": "\(counts.saved)", "deleted": "\(counts.deleted)",
            "rate": "\(Int((Double(done) / seconds).rounded()))/s",
            "elapsed": "\(LogFormat.duration(seconds: seconds))",
        ]
        if let total { metadata["total"] = "\(total)" }
        return metadata
    }
}

/// When to write the next progress line: at most one per interval, so long work logs a steady
/// trickle and short work none.
struct ProgressLogPacing {
    var interval: TimeInterval = 2
    private var last: Date?

    /// Whether a line is due at `date` for work that started at `start`; records it when so.
    mutating func due(at date: Date, startedAt start: Date) -> Bool {
        guard date.timeIntervalSince(last ?? start) >= interval else { return false }
        last = date
        return true
    }
}
