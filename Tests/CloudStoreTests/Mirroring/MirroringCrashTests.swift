@testable import CloudStore
import Foundation
import GRDB
import Testing

/// A device is killed (SIGKILL) at random points while it exports and imports; after a restart every
/// device converges, nothing it committed is lost, nothing is duplicated, and the file is intact.
///
/// `CLOUDSTORE_CRASH_SEEDS=N` runs N seeds instead of 50 (the soak script runs thousands).
@Suite("Mirroring: crashes during export and import lose nothing", .serialized)
struct MirroringCrashTests {
    static var seeds: Int { ProcessInfo.processInfo.environment["CLOUDSTORE_CRASH_SEEDS"].flatMap(Int.init) ?? 50 }

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
        var random = SeededRandom(seed: seed &+ 1000)
        // Another device has data the crashing one imports.
        let b = try await Device.make("B", server: server.url) { $0.server?.containerIdentifier = container }
        let bNotes = (0..<3).map { Note(title: "B-\(seed)-\($0)") }
        try await b.write { context in for note in bNotes { try context.insert(note) } }
        try await b.sync()

        let store = directory.file("A.sqlite")
        let steps = 12 + random.next(upTo: 12)
        let (child, lines) = try TestHelperProcess.start([
            "device", store.path, RepositoryPaths.notesSchema.path, "\(steps)", server.url.absoluteString, container,
            "alice-token", "\(seed)",
        ])
        // Most seeds kill in the middle of a sync (a random moment after the k-th "sync" line, as
        // the child exports or imports); the others after a random line.
        let killAtSync = random.next(upTo: 10) < 7 ? 1 + random.next(upTo: 3) : nil
        let killAfter = 1 + random.next(upTo: steps)
        let delay = Duration.milliseconds(random.next(upTo: 40))
        var output: [String] = []
        var syncs = 0
        var killedWhileSyncing = false
        while let line = await lines.nextLine() {
            output.append(line)
            if line == "sync" { syncs += 1 }
            let due = killAtSync.map { line == "sync" && syncs == $0 } ?? (output.count == killAfter)
            if due || line == "done" {
                if line == "sync" {
                    killedWhileSyncing = true
                    try await Task.sleep(for: delay)  // a random moment inside the sync, not a wait for it
                }
                kill(child.processIdentifier, SIGKILL)
                break
            }
        }
        child.waitUntilExit()
        while let line = await lines.nextLine() { output.append(line) }

        // What the child committed: the notes it must still have, with their last titles. A change
        // announced ("intent") but not confirmed may or may not have committed when the kill landed.
        var expected = Dictionary(uniqueKeysWithValues: bNotes.map { ($0.id, $0.title) })
        var inFlight: (id: UUID, title: String?)?
        for line in output {
            let parts = line.split(separator: " ", maxSplits: 3).map(String.init)
            guard parts.count == 4, let id = UUID(uuidString: parts[2]) else { continue }
            let title = parts[1] == "delete" ? nil : parts[3]
            switch parts[0] {
            case "intent": inFlight = (id, title)
            case "commit": expected[id] = title; inFlight = nil
            default: continue
            }
        }
        var expectedIfInFlightCommitted = expected
        if let inFlight { expectedIfInFlightCommitted[inFlight.id] = inFlight.title }

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
            "seed \(seed): lost or resurrected objects; child said:\n\(output.joined(separator: "\n"))")
        #expect(try a.contents() == c.contents(), "seed \(seed)")
        #expect(try b.contents() == c.contents(), "seed \(seed)")
        for device in [a, b, c] { await device.close() }
        return killedWhileSyncing
    }
}

extension LineReader {
    /// The next line without blocking the caller's thread.
    func nextLine() async -> String? {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: self.next()) }
        }
    }
}
