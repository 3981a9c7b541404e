import CloudStore
import Foundation
import Testing

@Suite struct QueryGenerationTests {
    @Test func pinnedReader_keepsItsSnapshotWhileAnotherConnectionWrites() throws {
        let fixture = try StoreFixture()
        let note = Note(title: "original")
        try fixture.store.write { try $0.insert(note) }
        let generation = try fixture.store.makeQueryGeneration()
        let pinnedToken = try generation.token

        // Another store instance (another connection, as another process would be) changes everything.
        let other = try fixture.reopen()
        try other.write { context in
            var changed = note
            changed.title = "changed"
            try context.update(changed)
            try context.insert(Note(title: "new"))
        }
        try generation.read { context throws in
            #expect(try context.fetch(Note.self, id: note.id)?.title == "original")
            #expect(try context.count(Note.self) == 1)
        }
        #expect(try generation.token == pinnedToken)
        #expect(try fixture.store.read { try $0.count(Note.self) } == 2)

        try generation.advance()
        try generation.read { context throws in
            #expect(try context.fetch(Note.self, id: note.id)?.title == "changed")
            #expect(try context.count(Note.self) == 2)
        }
        #expect(try generation.token == fixture.store.currentHistoryToken())
    }

    @Test func manyPinnedReaders_eachSeeTheirOwnGeneration() async throws {
        let fixture = try StoreFixture()
        var generations: [QueryGeneration] = []
        for index in 0..<8 {
            generations.append(try fixture.store.makeQueryGeneration())
            try await fixture.store.write { try $0.insert(Note(title: "\(index)")) }
        }
        let counts = try await withThrowingTaskGroup(of: (Int, Int).self) { group in
            for (index, generation) in generations.enumerated() {
                group.addTask { (index, try await generation.read { try $0.count(Note.self) }) }
            }
            return try await group.reduce(into: [Int: Int]()) { $0[$1.0] = $1.1 }
        }
        #expect(counts == Dictionary(uniqueKeysWithValues: (0..<8).map { ($0, $0) }))
    }

    @Test func writingThroughAGeneration_advancesIt() throws {
        let fixture = try StoreFixture()
        let generation = try fixture.store.makeQueryGeneration()
        try generation.write(author: "app") { try $0.insert(Note(title: "mine")) }
        #expect(try generation.read { try $0.count(Note.self) } == 1)
        generation.close()
        let error = storeError { _ = try generation.read { try $0.count(Note.self) } }
        #expect(error?.code == .closed)
    }

    @Test func pinnedReaders_neverBlockTheWriter_andReleasingThemLetsTheWALCheckpoint() throws {
        var configuration = PersistentStore.Configuration()
        configuration.busyTimeout = .zero  // a blocked write would fail at once instead of waiting
        let fixture = try StoreFixture(configuration: configuration)
        let wal = fixture.url.path + "-wal"
        func walSize() throws -> Int { (try FileManager.default.attributesOfItem(atPath: wal)[.size] as? Int) ?? 0 }
        func write(batches: Range<Int>) throws {
            for batch in batches {
                try fixture.store.write { context in
                    for index in 0..<100 {
                        try context.insert(Note(title: "\(batch)-\(index)", body: String(repeating: "x", count: 100)))
                    }
                }
            }
        }

        // Let SQLite's automatic checkpoints (every 1,000 pages) settle the WAL at its working size.
        try write(batches: 0..<30)
        let settled = try walSize()

        // While generations are pinned, every write succeeds, and the WAL keeps growing because
        // checkpoints cannot move past the pinned snapshots.
        let generations = try (0..<3).map { _ in try fixture.store.makeQueryGeneration() }
        try write(batches: 30..<70)
        #expect(try walSize() > settled * 2)
        #expect(try generations[0].read { try $0.count(Note.self) } == 3_000)

        // Released, the next commit's automatic checkpoint completes, and from then on the WAL
        // is reused from its start: the same amount of writing no longer grows it.
        for generation in generations { generation.close() }
        try write(batches: 70..<71)
        let released = try walSize()
        try write(batches: 71..<110)
        #expect(try walSize() == released)
        try fixture.store.checkpoint()
        #expect(try walSize() == 0)
        #expect(try fixture.store.read { try $0.count(Note.self) } == 11_000)
    }
}
