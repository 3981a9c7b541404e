import CloudStore
import CloudStoreLogging
import Foundation
import Logging

/// Items 5 and 6: two devices of one user mirroring through a server child process over loopback,
/// both syncing by themselves (`automaticallySync`: debounced export, long-poll push).
struct SyncBenchmarks {
    let directory: URL
    let server: BenchServer
    /// How the bulk sync's notes get their ids.
    var ids = BenchNote.IDs.timeOrdered
    /// Whether every note attribute is end-to-end encrypted (``BenchNote/encryptedSchema``): the
    /// devices share one key file, so only the first run pays for the passphrase.
    var encrypted = false

    static let passphrase = "bench passphrase"

    /// A device of `user0`: a container on a fresh store file.
    func device(_ name: String, automatic: Bool = true, zoneName: String? = nil) async throws -> PersistentCloudContainer {
        var options = PersistentCloudContainer.Options(
            server: .init(url: server.url, containerIdentifier: server.containerIdentifier, token: "user0-token", deviceID: name))
        options.automaticallySync = automatic
        options.zoneName = zoneName
        options.encryptionKeyStore = FileEncryptionKeyStore(url: directory.appendingPathComponent("bench.keys"))
        let container = try await PersistentCloudContainer(
            url: directory.appendingPathComponent("\(name)-\(UUID().uuidString.prefix(8)).sqlite"),
            schema: encrypted ? BenchNote.encryptedSchema : BenchNote.schema, options: options, logger: Self.deviceLogger(name))
        if encrypted { try await container.setUpEncryption(passphrase: Self.passphrase) }
        return container
    }

    /// The devices' mirroring log, with millisecond timestamps, at the level `CLOUDSTORE_DEBUG`
    /// names (each hop of a propagation shows); without it, quiet.
    static func deviceLogger(_ name: String) -> Logger {
        guard ProcessInfo.processInfo.environment[DebugLevel.environmentVariable] != nil else { return StoreBenchmarks.quietLogger }
        return Logger(label: "bench.\(name)") { CloudStoreLogHandler(label: $0, level: .fromEnvironment) }
    }

    /// Item 5: A saves `count` notes in one unit of work; the time until B has imported them all.
    func bulk(count: Int) async throws -> [Figure] {
        let zone = "Bulk\(UUID().uuidString.prefix(6))"
        let a = try await device("bulk-a", zoneName: zone)
        let b = try await device("bulk-b", zoneName: zone)
        try await a.waitUntilSynced()
        try await b.waitUntilSynced()
        let notes = BenchNote.make(count, ids: ids)
        let after = try b.store.currentHistoryToken()
        let (serverCPU, clientCPU) = (server.cpuSeconds, processCPUSeconds())

        let start = ContinuousClock.now
        try await a.store.write(author: "bench") { context in for note in notes { try context.insert(note) } }
        let saved = ContinuousClock.now
        async let uploaded = Self.syncedAt(a)
        try await withTimeout(.seconds(600), "B to import \(count) notes") {
            try await Self.imported(count, into: b.store, after: after)
        }
        let done = ContinuousClock.now
        let uploadedAt = try await uploaded
        let serverSeconds = server.cpuSeconds - serverCPU
        let clientSeconds = processCPUSeconds() - clientCPU
        try await a.close()
        try await b.close()

        let total = start.duration(to: done).inSeconds
        let backend = server.backend.rawValue + (encrypted ? ", every attribute encrypted" : "")
        let cpu = String(format: "CPU: server %.1f s, both devices %.1f s", serverSeconds, clientSeconds)
        return [
            Figure(item: 5, "bulk sync \(count) notes A → B, \(backend): end to end", total, "s",
                "\(ids.rawValue) ids; "
                    + String(format: "A's save %.2f s, A's upload done at %.2f s; ", start.duration(to: saved).inSeconds,
                       start.duration(to: uploadedAt).inSeconds) + cpu),
            Figure(item: 5, "bulk sync \(count) notes, \(backend): records/s end to end", Double(count) / total, "records/s",
                "\(count) / end-to-end time", goal: .atLeast(5_000)),
            Figure(item: 5, "bulk sync \(count) notes, \(backend): device CPU per record", clientSeconds / Double(count) * 1e6, "µs",
                "both devices' CPU time / \(count); flat across sizes when nothing grows with the queue"),
            Figure(item: 5, "bulk sync \(count) notes, \(backend): server CPU per record", serverSeconds / Double(count) * 1e6, "µs",
                "the server process's CPU time / \(count)"),
        ]
    }

    /// Item 5 on `plain` and on `encrypted` (each on its server), `runs` times each, alternating:
    /// the host's drift over the minutes the runs take falls on both alike, not on whichever ran
    /// second. Answers each one's median run (``median(of:)``: this host's speed varies from one
    /// run to the next).
    static func bulk(count: Int, runs: Int, plain: SyncBenchmarks, encrypted: SyncBenchmarks) async throws -> (
        plain: [Figure], encrypted: [Figure]
    ) {
        var (plainRuns, encryptedRuns): ([[Figure]], [[Figure]]) = ([], [])
        for _ in 0..<max(runs, 1) {
            plainRuns.append(try await plain.bulk(count: count))
            encryptedRuns.append(try await encrypted.bulk(count: count))
        }
        return (try median(of: plainRuns), try median(of: encryptedRuns))
    }

    /// The run with the median records/s, its records/s row noting the range of all runs.
    static func median(of all: [[Figure]]) throws -> [Figure] {
        guard all.count > 1 else { return all.first ?? [] }
        /// The records/s row of a run's figures.
        func rateIndex(_ figures: [Figure]) throws -> Int {
            guard let index = figures.firstIndex(where: { $0.unit == "records/s" }) else {
                throw BenchError("a bulk sync run reported no records/s figure")
            }
            return index
        }
        func rate(_ figures: [Figure]) throws -> Double { figures[try rateIndex(figures)].value }
        let rates = try all.map(rate)
        let order = rates.indices.sorted { rates[$0] < rates[$1] }
        var median = all[order[(all.count - 1) / 2]]
        median[try rateIndex(median)].detail += String(
            format: "; median of %d runs, %.0f–%.0f records/s", all.count, rates[order.first!], rates[order.last!])
        return median
    }

    /// When `device` has sent everything and fetched everything.
    static func syncedAt(_ device: PersistentCloudContainer) async throws -> ContinuousClock.Instant {
        try await device.waitUntilSynced(timeout: .seconds(600))
        return ContinuousClock.now
    }

    /// Returns once `count` Note inserts by the importer have committed in `store` after `token`.
    static func imported(_ count: Int, into store: PersistentStore, after token: HistoryToken?) async throws {
        var received = 0
        let filter = HistoryFilter(authors: [MirrorAuthor.import], entities: ["Note"])
        for try await transaction in store.transactions(after: token, matching: filter) {
            received += transaction.changes.count(where: { $0.changeType == .insert })
            if received >= count { return }
        }
        throw BenchError("the history sequence ended after \(received) of \(count) imported notes")
    }

    /// Item 6: one title change on A until B's `transactions(after:)` delivers its import, `changes`
    /// times: once with each change made as soon as B saw the previous one (back to back), once
    /// with 50 ms between them (each a change after a quiet spell, as a person's saves are); p50
    /// and p99. Either way nothing is being exported when the change is saved, so it goes at once.
    /// The p50 goal is 5 ms on SQLite and 8 ms on PostgreSQL (a server that answers over a socket).
    func latency(changes: Int) async throws -> [Figure] {
        let backend = server.backend.rawValue
        let p50Goal: Double = server.backend == .sqlite ? 5 : 8
        var figures: [Figure] = []
        for (gap, name) in [(Duration.zero, "back to back"), (.milliseconds(50), "50 ms apart")] {
            var latencies = try await propagationLatencies(changes: changes, gap: gap)
            latencies.sort()
            let detail = "\(changes) changes \(name), save on A → B's transactions(after:) delivers the import"
            figures += [
                Figure(item: 6, "propagation latency p50, \(name), \(backend)", percentile(latencies, 0.5), "ms", detail, goal: .atMost(p50Goal)),
                Figure(item: 6, "propagation latency p99, \(name), \(backend)", percentile(latencies, 0.99), "ms",
                    String(format: "max %.1f ms", latencies.last ?? 0), goal: .atMost(50)),
            ]
        }
        return figures
    }

    private func propagationLatencies(changes: Int, gap: Duration) async throws -> [Double] {
        let zone = "Latency\(UUID().uuidString.prefix(6))"
        let a = try await device("latency-a", zoneName: zone)
        let b = try await device("latency-b", zoneName: zone)
        let note = BenchNote.make(1)[0]
        let seeded = try b.store.currentHistoryToken()
        try await a.store.write(author: "bench") { [note] context in try context.insert(note) }
        try await withTimeout(.seconds(60), "B to import the first note") { try await Self.imported(1, into: b.store, after: seeded) }

        let filter = HistoryFilter(authors: [MirrorAuthor.import], entities: ["Note"])
        let after = try b.store.currentHistoryToken()
        let latencies = try await withTimeout(.seconds(Double(changes) * 2 + 30), "B to see \(changes) changes") {
            [note] in
            var note = note
            var changesOnB = b.store.transactions(after: after, matching: filter).makeAsyncIterator()
            var latencies: [Double] = []
            for index in 0..<changes {
                if gap > .zero { try await Task.sleep(for: gap) }
                note.title = "Change \(index)"
                let (id, expected) = (note.id, note.title)
                let start = ContinuousClock.now
                try await a.store.write(author: "bench") { [note] context in try context.update(note) }
                seen: while true {
                    guard let transaction = try await changesOnB.next() else { throw BenchError("B's history sequence ended") }
                    guard transaction.changes.contains(where: { $0.objectID == id }) else { continue }
                    let title = try await b.store.read { try $0.fetch(BenchNote.self, id: id)?.title }
                    if title == expected { break seen }
                }
                latencies.append(start.duration(to: .now).inSeconds * 1000)
            }
            return latencies
        }
        try await a.close()
        try await b.close()
        return latencies
    }
}

/// The value below which `fraction` of the sorted `values` lie (nearest rank).
func percentile(_ sorted: [Double], _ fraction: Double) -> Double {
    guard !sorted.isEmpty else { return .nan }
    let rank = Int((fraction * Double(sorted.count)).rounded(.up)) - 1
    return sorted[min(max(rank, 0), sorted.count - 1)]
}

/// Runs `body`, failing with a message naming what it waited for if it takes longer than `limit`.
func withTimeout<T: Sendable>(
    _ limit: Duration, _ what: String, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: limit)
            return nil
        }
        guard let first = try await group.next(), let result = first else {
            group.cancelAll()
            throw BenchError("timed out after \(limit) waiting for \(what)")
        }
        group.cancelAll()
        return result
    }
}
