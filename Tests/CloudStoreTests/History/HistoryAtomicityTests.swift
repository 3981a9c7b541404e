import CloudStore
import Foundation
import Testing

/// A save writes its rows and its history transaction in one SQLite transaction.
/// A writer killed at any moment leaves both or neither.
@Suite struct HistoryAtomicityTests {
    @Test func writerKilledInsideTransaction_leavesNeitherRowsNorHistory() async throws {
        let fixture = try StoreFixture()
        try await fixture.store.write { try $0.insert(Note(title: "before")) }
        let before = try fixture.store.history(after: nil)
        let wal = fixture.url.path + "-wal"
        func walSize() -> Int { ((try? FileManager.default.attributesOfItem(atPath: wal))?[.size] as? Int) ?? 0 }
        let walBefore = walSize()
        // 20,000 notes with 200-byte bodies overflow the child's page cache (1 MiB for this
        // command), so pages of the open transaction are already in the WAL file when it is killed.
        let (child, output) = try TestHelperProcess.start([
            "hang-in-write", fixture.url.path, RepositoryPaths.notesSchema.path, "20000",
        ])
        #expect(await output.nextLine() == "inside")
        child.signal(SIGKILL)
        #expect(await child.waitForExit() == .signaled(SIGKILL))
        #expect(walSize() > walBefore + 1_000_000)

        let reopened = try fixture.reopen()
        try await reopened.read { context throws in
            #expect(try context.count(Note.self) == 1)
            #expect(try context.count(Note.self, where: .beginsWith("title", "uncommitted")) == 0)
        }
        #expect(try reopened.history(after: nil) == before)
        // The store keeps working after the crash.
        try await reopened.write { try $0.insert(Note(title: "after")) }
        #expect(try await reopened.read { try $0.count(Note.self) } == 2)
    }

    @Test func writerKilledAtAnyMoment_rowsAndHistoryAgree() async throws {
        let fixture = try StoreFixture()
        let (child, output) = try TestHelperProcess.start([
            "write-forever", fixture.url.path, RepositoryPaths.notesSchema.path,
        ])
        // Let it commit a few transactions, then kill it wherever it is (likely mid-transaction).
        for _ in 0..<3 { _ = await output.nextLine() }
        child.signal(SIGKILL)
        await child.waitForExit()

        let reopened = try fixture.reopen()
        let history = try reopened.history(after: nil)
        #expect(history.count >= 3)
        let inserted = Set(history.flatMap(\.changes).map(\.objectID))
        let rows = Set(try await reopened.read { try $0.fetchIDs(entityName: "Note") })
        #expect(rows == inserted)
        #expect(rows.count == history.count * 50)
    }
}
