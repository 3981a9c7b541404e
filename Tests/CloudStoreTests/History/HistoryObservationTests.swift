import CloudStore
import Foundation
import Testing

@Suite struct HistoryObservationTests {
    /// Collects `count` transactions from a sequence.
    static func collect(_ sequence: HistoryTransactions, count: Int) async throws -> [HistoryTransaction] {
        try await withTimeout {
            var received: [HistoryTransaction] = []
            for try await transaction in sequence {
                received.append(transaction)
                if received.count == count { break }
            }
            return received
        }
    }

    @Test func observation_deliversEachCommitOnceInOrder() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let start = try store.currentHistoryToken()
        let observer = Task { try await Self.collect(store.transactions(after: start), count: 5) }
        for index in 0..<5 {
            try await store.write(author: "app") { try $0.insert(Note(title: "\(index)")) }
        }
        let received = try await observer.value
        #expect(received.map(\.token) == (try store.history(after: start)).map(\.token))
        #expect(received.count == 5)
    }

    @Test func observation_resumesFromASavedToken() async throws {
        let fixture = try StoreFixture()
        for index in 0..<3 {
            try await fixture.store.write { try $0.insert(Note(title: "\(index)")) }
        }
        let history = try fixture.store.history(after: nil)
        let saved = try JSONEncoder().encode(history[0].token)
        // A new store instance (as after a restart) resumes after the saved token.
        let reopened = try fixture.reopen()
        let token = try JSONDecoder().decode(HistoryToken.self, from: saved)
        let received = try await Self.collect(reopened.transactions(after: token), count: 2)
        #expect(received.map(\.token) == [history[1].token, history[2].token])
        // Starting from nil replays all kept history.
        let all = try await Self.collect(reopened.transactions(after: nil), count: 3)
        #expect(all.map(\.token) == history.map(\.token))
    }

    @Test func observation_filtersButStillMovesOn() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let observer = Task {
            try await Self.collect(store.transactions(after: nil, matching: .init(entities: ["Tag"])), count: 2)
        }
        try await store.write { try $0.insert(Tag(name: "first")) }
        try await store.write { try $0.insert(Note(title: "ignored")) }
        try await store.write { try $0.insert(Tag(name: "second")) }
        let received = try await observer.value
        #expect(received.flatMap(\.changes).map(\.entityName) == ["Tag", "Tag"])
    }

    @Test func observation_seesCommitsOfAnotherStoreOnTheSameFile() async throws {
        let fixture = try StoreFixture()
        let other = try fixture.reopen()
        let store = fixture.store
        let observer = Task { try await Self.collect(store.transactions(after: nil), count: 4) }
        for index in 0..<2 {
            try await other.write(author: "other") { try $0.insert(Note(title: "other-\(index)")) }
            try await store.write(author: "self") { try $0.insert(Note(title: "self-\(index)")) }
        }
        let received = try await observer.value
        #expect(received.map(\.author) == ["other", "self", "other", "self"])
        #expect(received.map(\.token) == received.map(\.token).sorted())
    }

    @Test func observation_acrossTwoProcesses_deliversEachTransactionOnceInOrder() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let start = try store.currentHistoryToken()
        let childCount = 20
        let observer = Task { try await Self.collect(store.transactions(after: start), count: childCount + 5) }
        let (child, output) = try TestHelperProcess.start([
            "write", fixture.url.path, RepositoryPaths.notesSchema.path, "\(childCount)",
        ])
        for index in 0..<5 {
            try await store.write(author: "parent") { try $0.insert(Note(title: "parent-\(index)")) }
        }
        #expect(await output.nextLine() == "done")
        #expect(await child.waitForExit() == .exited(0))

        let received = try await observer.value
        #expect(received.count == childCount + 5)
        #expect(received.map(\.token) == received.map(\.token).sorted())
        #expect(Set(received.map(\.token)).count == received.count)
        let childIDs = received.filter { $0.author == "helper" }.map { $0.changes[0].objectID }
        let childTitles = try await store.read { context in
            try childIDs.map { try context.fetchSnapshot(entityName: "Note", id: $0)?["title"] }
        }
        #expect(childTitles == (0..<childCount).map { .string("helper-\($0)") })
        #expect(received.filter { $0.author == "parent" }.count == 5)
    }

    @Test func observation_endsWhenTheStoreCloses() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let observer = Task { try await Self.collect(store.transactions(after: nil), count: 1) }
        try store.close()
        #expect(try await observer.value.isEmpty)
    }
}
