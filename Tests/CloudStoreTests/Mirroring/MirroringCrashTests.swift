@testable import CloudStore
import CloudStoreTesting
import Foundation
import GRDB
import Testing

/// A device is killed (SIGKILL) at random points while it exports and imports; after a restart every
/// device converges, nothing it committed is lost, nothing is duplicated, and the file is intact.
///
/// `CLOUDSTORE_CRASH_SEEDS=N` runs N seeds instead of 50; `.ci/soak` (`CLOUDSTORE_SOAK=1`) runs 500.
@Suite("Mirroring: crashes during export and import lose nothing", .serialized)
struct MirroringCrashTests {
    static var seeds: Int {
        ProcessInfo.processInfo.environment["CLOUDSTORE_CRASH_SEEDS"].flatMap(Int.init) ?? ReliabilityRun.count(ci: 50, soak: 500)
    }

    @Test func killedDevicesConvergeWithNothingLostOrDuplicated() async throws {
        try await withServer { server in
            var killedDuringSync = 0
            for seed in 0..<Self.seeds {
                killedDuringSync += try await runSeed(UInt64(seed), server: server) ? 1 : 0
            }
            print("crash suite: seeds \(Self.seeds), killed while syncing \(killedDuringSync), lost 0, duplicated 0")
            #expect(killedDuringSync > 0, "some kills must land during a sync")
        }
    }

    /// Returns whether the kill landed while the child was syncing.
    func runSeed(_ seed: UInt64, server: MirrorServer) async throws -> Bool {
        let container = "iCloud.crash.s\(seed)"
        let directory = try TemporaryDirectory()
        var random = SeededRandomNumberGenerator(seed: seed &+ 1000)
        // Another device has data the crashing one imports.
        let b = try await Device.make("B", server: server.url) { $0.server?.containerIdentifier = container }
        let bNotes = (0..<3).map { Note(title: "B-\(seed)-\($0)") }
        try await b.write { context in for note in bNotes { try context.insert(note) } }
        try await b.sync()

        let store = directory.file("A.sqlite")
        let steps = 12 + random.next(upTo: 12)
        // Most seeds kill in the middle of a sync (a random moment after the k-th "sync" line, as
        // the child exports or imports); the others after a random line.
        let kill: ChildDevice.Kill =
            random.next(upTo: 10) < 7
            ? .duringSync(1 + random.next(upTo: 3), delay: .milliseconds(random.next(upTo: 40)))
            : .afterLine(1 + random.next(upTo: steps))
        let run = try await ChildDevice.run(
            store: store, server: server.url, container: container, steps: steps, seed: seed, kill: kill)

        // What the child committed: the notes it must still have, with their last titles. A change
        // announced but not confirmed may or may not have committed when the kill landed.
        var expected = Dictionary(uniqueKeysWithValues: bNotes.map { ($0.id, $0.title) })
        for change in run.committed where change.kind != .nothing { expected[change.id] = change.title }
        var expectedIfInFlightCommitted = expected
        if let change = run.inFlight, change.kind != .nothing { expectedIfInFlightCommitted[change.id] = change.title }

        // Restart the device and let everyone sync.
        let a = try await Device.make("A", server: server.url, directory: directory) { $0.server?.containerIdentifier = container }
        let integrity = try await a.store.read { context in try String.fetchAll(context.db, sql: "PRAGMA integrity_check") }
        #expect(integrity == ["ok"], "seed \(seed)")
        try await a.container.waitUntilSynced(timeout: .seconds(30))
        try await b.container.waitUntilSynced(timeout: .seconds(30))
        let c = try await Device.make("C", server: server.url) { $0.server?.containerIdentifier = container }
        try await c.sync()

        let onServer = try c.notes()
        #expect(onServer.count == Set(onServer.map(\.id)).count, "seed \(seed): duplicated objects")
        let converged = Dictionary(uniqueKeysWithValues: onServer.map { ($0.id, $0.title) })
        #expect(
            converged == expected || converged == expectedIfInFlightCommitted,
            "seed \(seed): lost or resurrected objects; child said:\n\(run.output.joined(separator: "\n"))")
        #expect(try a.contents() == c.contents(), "seed \(seed)")
        #expect(try b.contents() == c.contents(), "seed \(seed)")
        for device in [a, b, c] { await device.close() }
        return run.killedWhileSyncing
    }
}
