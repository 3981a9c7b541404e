import CloudStore
import Foundation
import Synchronization

/// The arrays live results delivered.
final class Delivered: Sendable {
    let value = Mutex<[[BenchModelNote]]>([])
}

/// Item 10: what typed queries cost over the same query written with a `Condition`, and what
/// live results do under a stream of commits.
struct QueryBenchmarks {
    /// Fetches in one timed run of the 20-row queries.
    static let fetches = 1_000
    static let notes = 10_000

    let directory: URL
    let store: PersistentStore

    init(directory: URL) throws {
        self.directory = directory
        store = try PersistentStore(
            url: directory.appendingPathComponent("query.sqlite"), schema: BenchNote.querySchema,
            logger: StoreBenchmarks.quietLogger)
        let notes = BenchNote.make(Self.notes).map(BenchModelNote.init)
        try store.write { context in for note in notes { try context.insert(note) } }
    }

    var all: [Benchmark] {
        let store = store
        let fetches = Self.fetches
        return [
            Benchmark(name: "query.typed20", summary: "\(fetches) fetches of 20 notes: #Predicate, SortDescriptor, fetchLimit") {
                {
                    try store.read { context in
                        for index in 0..<fetches {
                            let priority = Int64(index % 5)
                            let descriptor = FetchDescriptor<BenchModelNote>(
                                predicate: #Predicate { $0.priority == priority && !$0.archived },
                                sortBy: [SortDescriptor(\.created, order: .reverse)], fetchLimit: 20)
                            guard try context.fetch(descriptor).count == 20 else { throw BenchError("expected 20 notes") }
                        }
                    }
                }
            },
            Benchmark(name: "query.condition20", summary: "the same fetches with a Condition and SortKeys") {
                {
                    try store.read { context in
                        for index in 0..<fetches {
                            let priority = Int64(index % 5)
                            let notes = try context.fetch(
                                BenchModelNote.self, where: .equals("priority", priority) && .equals("archived", false),
                                sortBy: [.descending("created"), .ascending("id")], limit: 20)
                            guard notes.count == 20 else { throw BenchError("expected 20 notes") }
                        }
                    }
                }
            },
        ]
    }

    /// Keeps every array the live results of `descriptor` deliver, as they come.
    func follow(_ descriptor: FetchDescriptor<BenchModelNote>, removingDuplicates: Bool = false) -> (Delivered, Task<Void, any Error>) {
        let arrays = Delivered()
        let results = removingDuplicates ? store.results(for: descriptor).removeDuplicates() : store.results(for: descriptor)
        let consumer = Task { [arrays] in
            for try await results in results {
                arrays.value.withLock { $0.append(results) }
            }
        }
        return (arrays, consumer)
    }

    /// Returns once the arrays delivered satisfy `condition`; throws after a minute.
    static func wait(for arrays: Delivered, _ condition: @escaping @Sendable ([[BenchModelNote]]) -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while !arrays.value.withLock({ condition($0) }) {
            guard ContinuousClock.now < deadline else { throw BenchError("live results stopped") }
            await Task.yield()
        }
    }

    /// Live results of the notes while `commits` units of work change tags, then while `commits`
    /// change notes, each consumed as fast as they come.
    func liveResults(commits: Int) async throws -> [Figure] {
        let descriptor = FetchDescriptor<BenchModelNote>(
            predicate: #Predicate { $0.pinned }, sortBy: [SortDescriptor(\.created, order: .reverse)], fetchLimit: 50)
        let (arrays, consumer) = follow(descriptor)
        func waitFor(_ condition: @escaping @Sendable ([[BenchModelNote]]) -> Bool) async throws {
            try await Self.wait(for: arrays, condition)
        }
        try await waitFor { $0.count == 1 }
        let base = Date(timeIntervalSince1970: 1_900_000_000)

        // Commits to another entity, then one to a note: only the note's runs the query.
        var started = ContinuousClock.now
        for index in 0..<commits {
            try await store.write { try $0.insert(BenchTag(name: "tag \(index)")) }
        }
        let marker = BenchModelNote(BenchNote.note(0, base: base))
        var marked = marker
        marked.pinned = true
        let pinned = marked
        try await store.write { try $0.insert(pinned) }
        try await waitFor { $0.last?.first?.id == pinned.id }
        let unrelatedTime = started.duration(to: .now)
        let unrelatedRuns = arrays.value.withLock { $0.count } - 2

        // Commits to the notes the query reads, consumed as they come: at most one array each.
        let before = arrays.value.withLock { $0.count }
        started = ContinuousClock.now
        var last = pinned
        for index in 1...commits {
            var note = BenchModelNote(BenchNote.note(index, base: base.addingTimeInterval(Double(index))))
            note.pinned = true
            try await store.write { [note] in try $0.insert(note) }
            last = note
        }
        let lastID = last.id
        try await waitFor { $0.last?.first?.id == lastID }
        let relatedTime = started.duration(to: .now)
        let delivered = arrays.value.withLock { $0.count } - before
        consumer.cancel()

        // A query over the 50 notes of one folder (a `color` here) while commits edit notes of
        // other folders: those change neither the results nor what matches, so nothing runs.
        let folder = "inbox"
        let folderNotes = (0..<50).map { index -> BenchModelNote in
            var note = BenchModelNote(BenchNote.note(index, base: base.addingTimeInterval(-Double(index + 1))))
            note.color = folder
            return note
        }
        try await store.write { context in for note in folderNotes { try context.insert(note) } }
        let others = try await store.read { context in
            try context.fetch(FetchDescriptor<BenchModelNote>(predicate: #Predicate { $0.color != folder }, fetchLimit: commits))
        }
        let (folderArrays, folderConsumer) = follow(
            FetchDescriptor<BenchModelNote>(predicate: #Predicate { $0.color == folder }, sortBy: [SortDescriptor(\.title)]))
        func waitForFolder(_ condition: @escaping @Sendable ([[BenchModelNote]]) -> Bool) async throws {
            try await Self.wait(for: folderArrays, condition)
        }
        try await waitForFolder { $0.count == 1 }
        started = ContinuousClock.now
        for (index, note) in others.enumerated() {
            var edited = note
            edited.title = "edited \(index)"
            try await store.write { [edited] in try $0.update(edited) }
        }
        var marked2 = folderNotes[0]
        marked2.title = "~ last"
        let marker2 = marked2
        try await store.write { try $0.update(marker2) }
        try await waitForFolder { $0.last?.last?.title == "~ last" }
        let folderTime = started.duration(to: .now)
        let folderRuns = folderArrays.value.withLock { $0.count } - 2
        folderConsumer.cancel()

        // Edits of pinned notes past the newest 50 match the query, so it runs, and give the same
        // 50: with removeDuplicates none of those arrays is delivered.
        let newest = FetchDescriptor<BenchModelNote>(
            predicate: #Predicate { $0.pinned }, sortBy: [SortDescriptor(\.created, order: .reverse)], fetchLimit: 50)
        var older = newest
        older.fetchOffset = 50
        older.fetchLimit = commits
        let past = try await store.read { [older] in try $0.fetch(older) }
        let (unique, uniqueConsumer) = follow(newest, removingDuplicates: true)
        try await Self.wait(for: unique) { $0.count == 1 }
        for (index, note) in past.enumerated() {
            var edited = note
            edited.title = "older \(index)"
            try await store.write { [edited] in try $0.update(edited) }
        }
        guard var top = unique.value.withLock({ $0.first?.first }) else { throw BenchError("no pinned notes") }
        top.title = "newest edited"
        try await store.write { [top] in try $0.update(top) }
        try await Self.wait(for: unique) { $0.last?.first?.title == "newest edited" }
        let repeated = unique.value.withLock { $0.count } - 2
        uniqueConsumer.cancel()
        return [
            Figure(
                item: 10, "live results: queries run for \(commits) commits to another entity", Double(unrelatedRuns), "runs",
                "\(commits) one-tag units of work, then one note; \(String(format: "%.0f", unrelatedTime.inSeconds * 1_000_000 / Double(commits))) µs per commit",
                goal: .atMost(0)),
            Figure(
                item: 10, "live results: arrays for \(commits) commits to the observed entity", Double(delivered), "arrays",
                "\(commits) one-note units of work, consumed as they come; the last array holds the last note; \(String(format: "%.0f", relatedTime.inSeconds * 1_000_000 / Double(commits))) µs per commit",
                goal: .atMost(Double(commits))),
            Figure(
                item: 10, "live results: queries run for \(others.count) commits to notes of other folders", Double(folderRuns), "runs",
                "a query over one folder's 50 notes; \(others.count) one-note edits elsewhere, then one in the folder; \(String(format: "%.0f", folderTime.inSeconds * 1_000_000 / Double(others.count + 1))) µs per commit",
                goal: .atMost(10)),
            Figure(
                item: 10, "live results: equal arrays delivered with removeDuplicates for \(past.count) edits past the limit", Double(repeated),
                "arrays", "the newest 50 pinned notes; \(past.count) edits of older pinned ones (each runs the query), then one of the newest",
                goal: .atMost(0)),
        ]
    }
}
