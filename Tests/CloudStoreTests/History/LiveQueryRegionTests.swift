@testable import CloudStore
import CloudStoreTesting
import Foundation
import Synchronization
import Testing

/// Live results re-run only when a commit changes an object in the results, or one of the entity
/// that now matches the predicate; the decision alone, then through a store.
@Suite("Live results re-run only for commits that can change them")
struct LiveQueryRegionTests {
    static let (inside, outside, other) = (UUID(), UUID(), UUID())
    static let region = LiveQueryRegion(ids: [inside], skipsSome: false)

    @Test func theDecision() {
        let region = Self.region
        #expect(region.decision(for: nil) == .run, "purged history: nothing is known")
        #expect(region.decision(for: []) == .unchanged)
        #expect(region.decision(for: [(Self.inside, false)]) == .run, "an object in the results changed")
        #expect(region.decision(for: [(Self.outside, true), (Self.inside, true)]) == .run, "one in the results was deleted")
        #expect(region.decision(for: [(Self.outside, true)]) == .unchanged, "a deleted object outside was not in the results")
        #expect(region.decision(for: [(Self.outside, false), (Self.other, false), (Self.outside, false)]) == .runIfAnyMatches([Self.outside, Self.other]))
        #expect(LiveQueryRegion(ids: [], skipsSome: true).decision(for: [(Self.outside, true)]) == .run, "an offset window moves")
        let many = (0...LiveQueryRegion.testLimit).map { _ in (UUID(), false) }
        #expect(region.decision(for: many) == .run, "too many to test one by one")
    }

    /// Counts the runs of a live query; a test waits for a count.
    final class Runs: Sendable {
        private final class Box: Sendable {
            let state = Mutex<(count: Int, waiters: [(Int, CheckedContinuation<Void, Never>)])>((0, []))
        }

        private let box = Box()

        func ran() {
            let ready = box.state.withLock { state in
                state.count += 1
                let count = state.count
                defer { state.waiters.removeAll { $0.0 <= count } }
                return state.waiters.filter { $0.0 <= count }.map(\.1)
            }
            for continuation in ready { continuation.resume() }
        }

        var count: Int { box.state.withLock { $0.count } }

        /// Returns once the query has run `count` times.
        func reached(_ count: Int) async throws {
            try await withTimeout { [box] in
                await withCheckedContinuation { continuation in
                    let ready = box.state.withLock { state -> Bool in
                        if state.count >= count { return true }
                        state.waiters.append((count, continuation))
                        return false
                    }
                    if ready { continuation.resume() }
                }
            }
        }
    }

    @Test func notesOfOtherFolders_runNothing_aNoteMovedInRunsIt() async throws {
        let fixture = try StoreFixture(schema: NotesModel.schema)
        let store = fixture.store
        let (inbox, archive) = (Folder(title: "Inbox"), Folder(title: "Archive"))
        let kept = (0..<3).map { Note(title: "in \($0)", folder: inbox.id) }
        let elsewhere = (0..<5).map { Note(title: "out \($0)", folder: archive.id) }
        try await store.write { context in
            try context.insert(inbox)
            try context.insert(archive)
            for note in kept + elsewhere { try context.insert(note) }
        }
        let inboxID = inbox.id
        let runs = Runs()
        var results = store.results(for: FetchDescriptor<Note>(predicate: #Predicate { $0.folder == inboxID }, sortBy: [SortDescriptor(\.title)]))
        results.willRun = { runs.ran() }
        let relay = LiveResultsTests.Relay(results)
        #expect(try await relay.array(0).map(\.title) == ["in 0", "in 1", "in 2"])

        // Edits, inserts and deletes of notes in another folder, and other entities: no run.
        for (index, note) in elsewhere.enumerated() {
            try await store.write { context in
                var edited = note
                edited.title = "out \(index) edited"
                try context.update(edited)
            }
        }
        try await store.write { try $0.insert(Note(title: "new elsewhere", folder: archive.id)) }
        try await store.write { try $0.delete(elsewhere[0]) }
        try await store.write { try $0.insert(Tag(name: "tag")) }
        // A note moved into the inbox runs it once.
        try await store.write { context in try context.move(note: elsewhere[1].id, to: inboxID) }
        #expect(try await relay.array(1).map(\.title) == ["in 0", "in 1", "in 2", "out 1 edited"])
        #expect(runs.count == 2, "the first run and the move's")

        // A note of the results edited, then moved out: a run each.
        try await store.write { [kept] context in
            var edited = kept[0]
            edited.title = "in 0 edited"
            try context.update(edited)
        }
        #expect(try await relay.array(2).first?.title == "in 0 edited")
        try await store.write { context in try context.move(note: kept[1].id, to: archive.id) }
        #expect(try await relay.array(3).map(\.title) == ["in 0 edited", "in 2", "out 1 edited"])
        #expect(relay.count == 4 && runs.count == 4)
        try store.close()
    }

    @Test func removeDuplicates_skipsAnArrayEqualToTheLast() async throws {
        let fixture = try StoreFixture(schema: NotesModel.schema)
        let store = fixture.store
        let notes = (0..<4).map { Note(title: "note \($0)", pinned: true) }
        try await store.write { context in for note in notes { try context.insert(note) } }
        // The first two pinned notes: a change of the fourth matches the predicate, so the query
        // runs, and gives the same two.
        let firstTwo = FetchDescriptor<Note>(predicate: #Predicate { $0.pinned }, sortBy: [SortDescriptor(\.title)], fetchLimit: 2)
        let runs = Runs()
        var results = store.results(for: firstTwo).removeDuplicates()
        results.willRun = { runs.ran() }
        let relay = LiveResultsTests.Relay(results)
        #expect(try await relay.array(0).map(\.title) == ["note 0", "note 1"])
        var fourth = notes[3]
        fourth.priority = 9
        try await store.write { [fourth] in try $0.update(fourth) }
        try await runs.reached(2)
        var first = notes[0]
        first.priority = 1
        try await store.write { [first] in try $0.update(first) }
        #expect(try await relay.array(1).first?.priority == 1)
        #expect(runs.count == 3, "the fourth note's change ran the query")
        #expect(relay.count == 2, "and its equal array was skipped")
        try store.close()
    }

    @Test func anyMatches_testsThePredicateOnTheObjectsGiven() async throws {
        let fixture = try StoreFixture(schema: NotesModel.schema)
        let (pinned, plain) = (Note(title: "p", pinned: true), Note(title: "q"))
        try await fixture.store.write { context in
            try context.insert(pinned)
            try context.insert(plain)
        }
        try await fixture.store.read { context in
            let query = try context.compile(FetchDescriptor<Note>(predicate: #Predicate { $0.pinned && $0.title != "x" }))
            #expect(try context.anyMatches(query, among: [plain.id]) == false)
            #expect(try context.anyMatches(query, among: [plain.id, pinned.id]) == true)
            #expect(try context.anyMatches(query, among: [UUID()]) == false, "a deleted object matches nothing")
            let all = try context.compile(FetchDescriptor<Note>())
            #expect(try context.anyMatches(all, among: [plain.id]) == true)
        }
        try fixture.store.close()
    }
}
