import CloudStore
import CloudStoreTesting
import Foundation
import Observation
import Synchronization
import Testing

/// Live results: the current array, then one after each commit that changed the query's entity,
/// whoever made it; nothing for commits to other entities; the latest state for a slow consumer.
@Suite("Live results follow the commits that change what they read")
struct LiveResultsTests {
    /// Keeps every array a live query delivers, as soon as it is delivered, so a test can count
    /// them: each array is one run of the query.
    final class Relay: Sendable {
        private struct State {
            var arrays: [[Note]] = []
            var waiters: [(index: Int, continuation: CheckedContinuation<Void, Never>)] = []
        }

        private final class Mailbox: Sendable {
            let state = Mutex(State())
        }

        private let mailbox = Mailbox()
        private let task = Mutex<Task<Void, Never>?>(nil)

        init(_ results: LiveResults<Note>) {
            let task = Task { [mailbox] in
                do {
                    for try await array in results {
                        let ready = mailbox.state.withLock { state in
                            state.arrays.append(array)
                            let count = state.arrays.count
                            defer { state.waiters.removeAll { $0.index < count } }
                            return state.waiters.filter { $0.index < count }.map(\.continuation)
                        }
                        for continuation in ready { continuation.resume() }
                    }
                } catch {
                    Issue.record(error)
                }
            }
            self.task.withLock { $0 = task }
        }

        deinit { task.withLock { $0?.cancel() } }

        /// The array delivered `index`th (from 0), once it is.
        func array(_ index: Int) async throws -> [Note] {
            try await withTimeout { [mailbox] in
                await withCheckedContinuation { continuation in
                    let ready = mailbox.state.withLock { state -> Bool in
                        if index < state.arrays.count { return true }
                        state.waiters.append((index, continuation))
                        return false
                    }
                    if ready { continuation.resume() }
                }
                return mailbox.state.withLock { $0.arrays[index] }
            }
        }

        /// How many arrays were delivered so far.
        var count: Int { mailbox.state.withLock { $0.arrays.count } }
    }

    static let titles = FetchDescriptor<Note>(sortBy: [SortDescriptor(\.title)])

    @Test func theFirstArray_thenOnePerCommitToTheEntity_andNoneForOtherEntities() async throws {
        let fixture = try StoreFixture(schema: NotesModel.schema)
        let store = fixture.store
        try await store.write { try $0.insert(Note(title: "a")) }
        let relay = Relay(store.results(for: Self.titles))
        #expect(try await relay.array(0).map(\.title) == ["a"])

        // Commits to other entities run no query: the next array is the note's.
        for index in 0..<10 {
            try await store.write { try $0.insert(Tag(name: "tag \(index)")) }
            try await store.write { try $0.insert(Folder(title: "folder \(index)")) }
        }
        try await store.write { try $0.insert(Note(title: "b")) }
        #expect(try await relay.array(1).map(\.title) == ["a", "b"])

        // A relationship's change through the other side changes the note: a new array.
        let folder = Folder(title: "Inbox")
        let note = try #require(try await store.read { try $0.fetch(FetchDescriptor<Note>()) }.first)
        try await store.write { [note] context in
            try context.insert(folder)
            try context.addRelated(entityName: "Folder", id: folder.id, relationship: "notes", note.id)
        }
        #expect(try await relay.array(2).first { $0.id == note.id }?.folder == folder.id)

        // A unit of work is never seen half done.
        try await store.write { context in
            try context.insert(Note(title: "c"))
            try context.insert(Note(title: "d"))
        }
        #expect(try await relay.array(3).map(\.title) == ["a", "b", "c", "d"])
        #expect(relay.count == 4)
        try store.close()
    }

    @Test func aSlowConsumer_getsTheLatestState_notABacklog() async throws {
        let fixture = try StoreFixture(schema: NotesModel.schema)
        let store = fixture.store
        var iterator = store.results(for: Self.titles).makeAsyncIterator()
        #expect(try await iterator.next()?.isEmpty == true)
        for index in 0..<1_000 {
            try await store.write { try $0.insert(Note(title: String(format: "%04d", index))) }
        }
        let latest = try #require(try await iterator.next())
        #expect(latest.count == 1_000)
        try await store.write { try $0.insert(Note(title: "last")) }
        #expect(try await iterator.next()?.last?.title == "last")
        try store.close()
    }

    @Test func aCommitOfAnotherProcess_producesOneNewArray() async throws {
        let fixture = try StoreFixture(schema: NotesModel.schema)
        let store = fixture.store
        let relay = Relay(store.results(for: Self.titles))
        #expect(try await relay.array(0).isEmpty == true)
        let (child, output) = try TestHelperProcess.start(["write", fixture.url.path, RepositoryPaths.notesSchema.path, "1"])
        #expect(await output.nextLine() == "done")
        #expect(await child.waitForExit() == .exited(0))
        #expect(try await relay.array(1).map(\.title) == ["helper-0"])
        // One array for the child's commit: the next one is this process's own.
        try await store.write { try $0.insert(Note(title: "parent")) }
        #expect(try await relay.array(2).map(\.title) == ["helper-0", "parent"])
        #expect(relay.count == 3)
        try store.close()
    }

    @Test func aSyncImport_producesOneNewArray() async throws {
        let server = try await TestServer.start()
        let a = try await TestDevice.make("A", schema: NotesModel.schema, server: server.baseURL)
        let b = try await TestDevice.make("B", schema: NotesModel.schema, server: server.baseURL)
        let relay = Relay(b.store.results(for: Self.titles))
        #expect(try await relay.array(0).isEmpty == true)
        let folder = Folder(title: "Trips")
        try await a.write { context in
            try context.insert(folder)
            try context.insert(Note(title: "Lisbon", folder: folder.id))
            try context.insert(Note(title: "Porto", folder: folder.id))
        }
        try await a.sync()
        try await b.sync()
        #expect(try await relay.array(1).map(\.title) == ["Lisbon", "Porto"])
        try await b.write { try $0.insert(Note(title: "local")) }
        #expect(try await relay.array(2).map(\.title) == ["Lisbon", "Porto", "local"])
        #expect(relay.count == 3)
        await a.close()
        await b.close()
        try await server.shutdown()
    }

    @Test func observedResults_changeAsTheStoreDoes() async throws {
        let fixture = try StoreFixture(schema: NotesModel.schema)
        let store = fixture.store
        let observed = ObservedResults(store: store, Self.titles)
        try await Self.waitForChange(of: observed) { $0.isEmpty }
        try await store.write { try $0.insert(Note(title: "observed")) }
        try await Self.waitForChange(of: observed) { $0.map(\.title) == ["observed"] }
        #expect(observed.error == nil)
        observed.cancel()
        try store.close()
    }

    /// Waits, through Observation, until the results satisfy `condition`.
    static func waitForChange(of observed: ObservedResults<Note>, until condition: @escaping @Sendable ([Note]) -> Bool) async throws {
        try await withTimeout {
            while true {
                let (stream, continuation) = AsyncStream<Void>.makeStream()
                let satisfied = withObservationTracking {
                    condition(observed.results)
                } onChange: {
                    continuation.yield()
                }
                if satisfied { return }
                var iterator = stream.makeAsyncIterator()
                await iterator.next()
            }
        }
    }
}
