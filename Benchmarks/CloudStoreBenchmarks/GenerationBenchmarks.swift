import CloudStore
import Foundation
import GRDB

/// Item 4: query generations. The time to pin a reader (`makeQueryGeneration()`) and to release
/// it (`close()`), and the WAL file's size during `writes` one-note transactions while a generation
/// is pinned, compared with the same writes and no pinned reader, and after the release.
///
/// The writes use `synchronous = NORMAL` (the WAL's growth does not depend on it, and FULL would
/// make this an fsync benchmark); each updates one note's title, with history.
struct GenerationBenchmarks {
    let directory: URL
    let pins: Int
    let writes: Int

    func run() throws -> [Figure] {
        let store = try newStore()
        defer { try? store.close() }
        var notes = BenchNote.make(100)
        try store.write(author: "bench") { [notes] context in for note in notes { try context.insert(note) } }

        var pinTimes: [Double] = []
        var releaseTimes: [Double] = []
        for _ in 0..<pins {
            let start = ContinuousClock.now
            let generation = try store.makeQueryGeneration()
            let pinned = ContinuousClock.now
            generation.close()
            pinTimes.append(start.duration(to: pinned).inSeconds * 1e6)
            releaseTimes.append(pinned.duration(to: .now).inSeconds * 1e6)
        }
        pinTimes.sort()
        releaseTimes.sort()

        let walPath = store.url.path + "-wal"
        func update(_ count: Int) throws {
            for index in 0..<count {
                notes[index % notes.count].title = "Edit \(index)"
                let note = notes[index % notes.count]
                try store.write(author: "bench") { context in try context.update(note) }
            }
        }
        try store.checkpoint()
        try update(writes)
        let unpinnedWAL = try fileSize(walPath)

        try store.checkpoint()
        let generation = try store.makeQueryGeneration()
        let pinnedTitle = notes[0].title
        let pinnedCount = try generation.read { try $0.count(BenchNote.self) }
        try update(writes)
        let pinnedWAL = try fileSize(walPath)
        let stillSees = try generation.read { try $0.fetch(BenchNote.self, id: notes[0].id)?.title }
        guard pinnedCount == notes.count, stillSees == pinnedTitle else {
            throw BenchError("the pinned generation saw later writes (title \(stillSees ?? "nil"))")
        }
        generation.close()
        let releasedWrites = 100
        try update(releasedWrites)
        let afterRelease = try fileSize(walPath)
        let framesAfterRelease = try walFramesInUse(store.url.path)

        let mib = 1_048_576.0
        return [
            Figure(item: 4, "pin a query generation (makeQueryGeneration)", percentile(pinTimes, 0.5), "µs",
                String(format: "median of %d; p99 %.0f µs", pins, percentile(pinTimes, 0.99))),
            Figure(item: 4, "release a query generation (close)", percentile(releaseTimes, 0.5), "µs",
                String(format: "median of %d; p99 %.0f µs", pins, percentile(releaseTimes, 0.99))),
            Figure(item: 4, "WAL after \(writes) writes, no pinned reader", Double(unpinnedWAL) / mib, "MiB",
                "SQLite checkpoints every 1,000 pages and reuses the file"),
            Figure(item: 4, "WAL after \(writes) writes with a pinned reader", Double(pinnedWAL) / mib, "MiB",
                String(format: "%.1f× the unpinned run; the reader still saw its snapshot", Double(pinnedWAL) / Double(max(unpinnedWAL, 1)))),
            Figure(item: 4, "WAL in use after release + \(releasedWrites) writes", Double(framesAfterRelease * (4096 + 24) + 32) / mib, "MiB",
                String(format: "%d frames; the file stays %.1f MiB until a truncating checkpoint (PersistentStore.checkpoint())",
                       framesAfterRelease, Double(afterRelease) / mib)),
        ]
    }

    func newStore() throws -> PersistentStore {
        var configuration = PersistentStore.Configuration()
        configuration.synchronous = .normal
        return try PersistentStore(
            url: directory.appendingPathComponent("generations-\(UUID().uuidString).sqlite"), schema: BenchNote.schema,
            configuration: configuration, logger: StoreBenchmarks.quietLogger)
    }

    func fileSize(_ path: String) throws -> Int {
        try URL(fileURLWithPath: path).resourceValues(forKeys: [.fileSizeKey]).fileSize ?? 0
    }

    /// The frames written to the WAL since it was last restarted: `PRAGMA wal_checkpoint(PASSIVE)`'s
    /// log size, read on a connection of its own (the passive checkpoint copies what it can).
    func walFramesInUse(_ path: String) throws -> Int {
        let queue = try DatabaseQueue(path: path)
        return try queue.writeWithoutTransaction { db in
            try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(PASSIVE)").map { Int($0[1] as Int64) } ?? 0
        }
    }
}
