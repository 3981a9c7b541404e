/// Which long polls a polling round wakes, for `--notifications poll`
/// (``ServerConfiguration/ChangeNotifications/poll(interval:)``): each round reads the database
/// sequence of every partition this instance's long polls wait on, and wakes those whose sequence
/// moved since the round before.
///
/// A partition the rounds did not watch before is woken at once: its waiter read its state
/// before this round, and a change between that read and this round's would look like the
/// partition's first value and never wake it. The waiter reads again and, with nothing new, waits
/// again: one read more per new waiter, never a missed change. A partition with no row yet (never
/// written) counts as sequence 0.
///
/// ```swift
/// var poll = ChangePoll()
/// poll.round(watched: ["a"], sequences: ["a": 4])   // ["a"]: new to the rounds
/// poll.round(watched: ["a"], sequences: ["a": 4])   // []
/// poll.round(watched: ["a"], sequences: ["a": 5])   // ["a"]
/// ```
struct ChangePoll: Sendable {
    /// The sequence each watched partition had at the last round.
    private(set) var seen: [String: Int64] = [:]

    /// The keys to wake, given the partitions watched now and the sequences read for them; forgets
    /// partitions no longer watched.
    @discardableResult
    mutating func round(watched: Set<String>, sequences: [String: Int64]) -> [String] {
        var wake: [String] = []
        var next: [String: Int64] = [:]
        next.reserveCapacity(watched.count)
        for key in watched {
            let sequence = sequences[key] ?? 0
            if seen[key] != sequence { wake.append(key) }
            next[key] = sequence
        }
        seen = next
        return wake.sorted()
    }
}
