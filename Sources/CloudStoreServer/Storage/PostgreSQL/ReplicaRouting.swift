/// Which streaming replica serves a read, and whether its answer may stand (`--postgres-replica`).
///
/// A read goes to a replica only when the replica's snapshot holds every commit of the database
/// (partition) that the primary held when the read began: the primary's database sequence of the
/// partition is read first (one indexed row), then the read runs on the replica in one snapshot
/// that reads the replica's sequence too. A streaming replica replays commits in order, so a
/// snapshot at or past the primary's sequence holds everything a client can have been told of (its
/// own writes, and the changes a long poll or `changes/database` on the primary reported): the
/// answer is the one the primary would give, or a later one. Below it, the replica is behind, its
/// answer is dropped and the primary answers. A device never sees its token go back and never
/// misses a change.
///
/// Replicas take reads in turn; one whose read failed (it stopped, its connection broke) is left
/// out for a while, one second doubling to 30, and tried again after.
///
/// ```swift
/// var routing = ReplicaRouting(count: 2)
/// let replica = routing.next(now: now)                 // 0
/// routing.record(.failed, of: 0, now: now)             // 0 rests a second
/// routing.next(now: now)                               // 1
/// ReplicaRouting.mayAnswer(replicaSeq: 7, primarySeq: 8) // false: behind
/// ```
struct ReplicaRouting: Sendable {
    /// How a replica's read ended.
    enum Outcome: String, Sendable, CaseIterable {
        /// The replica had caught up and answered.
        case served
        /// The replica was behind the primary; the primary answered.
        case behind
        /// The read failed on the replica; the primary answered.
        case failed
    }

    /// One replica's record, as `/readyz` and the metrics show it.
    struct Record: Sendable, Equatable {
        var served = 0
        var behind = 0
        var failed = 0
        /// Failures since the last read it served.
        var failuresInARow = 0
        /// When it takes reads again after a failure (seconds on the routing's clock); nil: now.
        var restingUntil: Double?
    }

    private(set) var records: [Record]
    private var nextIndex = 0

    static let firstRest = 1.0
    static let longestRest = 30.0

    init(count: Int) {
        records = Array(repeating: Record(), count: count)
    }

    /// Whether a replica's answer may stand: its sequence of the partition is at or past the
    /// primary's (a partition the primary has no row of has nothing to miss).
    static func mayAnswer(replicaSeq: Int64?, primarySeq: Int64?) -> Bool {
        guard let primarySeq else { return true }
        guard let replicaSeq else { return false }
        return replicaSeq >= primarySeq
    }

    /// The replica to read from next, in turn among those not resting; nil when all rest (or
    /// there are none): the primary answers.
    mutating func next(now: Double) -> Int? {
        guard !records.isEmpty else { return nil }
        for offset in 0..<records.count {
            let index = (nextIndex + offset) % records.count
            if let until = records[index].restingUntil, until > now { continue }
            nextIndex = (index + 1) % records.count
            return index
        }
        return nil
    }

    /// Whether a replica takes reads now.
    func isAvailable(_ index: Int, now: Double) -> Bool {
        records[index].restingUntil.map { $0 <= now } ?? true
    }

    mutating func record(_ outcome: Outcome, of index: Int, now: Double) {
        switch outcome {
        case .served:
            records[index].served += 1
            records[index].failuresInARow = 0
            records[index].restingUntil = nil
        case .behind:
            records[index].behind += 1
            records[index].failuresInARow = 0
            records[index].restingUntil = nil
        case .failed:
            records[index].failed += 1
            records[index].failuresInARow += 1
            let rest = min(Self.firstRest * Double(1 << min(records[index].failuresInARow - 1, 16)), Self.longestRest)
            records[index].restingUntil = now + rest
        }
    }
}
