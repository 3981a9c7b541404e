import CloudStore
import CloudStoreTesting
import Foundation

/// Item 7: a fresh device bootstraps a zone of `count` records. Each bootstrap runs in its own child
/// process (this executable, `cloudstore-bench bootstrap ...`), because a process's peak memory
/// (`VmHWM`) cannot be reset: the child reports its peak after opening the store and after the
/// bootstrap.
struct ScaleBenchmarks {
    let directory: URL
    let server: BenchServer

    /// What a bootstrap child prints as its last line.
    struct Outcome: Codable {
        var records: Int
        var seconds: Double
        /// Peak resident memory once the container is open, before the first fetch.
        var openedPeakKiB: Int
        /// Peak resident memory after the bootstrap.
        var peakKiB: Int
    }

    func run(counts: [Int]) async throws -> [Figure] {
        let seeding = ServerBenchmarks(server: server)
        var outcomes: [(count: Int, outcome: Outcome)] = []
        for count in counts {
            let zone = "Scale\(count)x\(UUID().uuidString.prefix(6))"
            try await seeding.seed(zoneName: zone, count: count)
            outcomes.append((count, try bootstrapChild(zone: zone, count: count)))
        }
        var figures: [Figure] = []
        for (count, outcome) in outcomes {
            figures.append(
                Figure(item: 7, "bootstrap \(count) records on a fresh device, \(server.backend.rawValue)", outcome.seconds, "s",
                    String(format: "%.0f records/s; child process", Double(outcome.records) / outcome.seconds)))
            figures.append(
                Figure(item: 7, "bootstrap \(count) records, \(server.backend.rawValue): records/s", Double(outcome.records) / outcome.seconds,
                    "records/s", "records / time to fetch and apply them all", goal: .atLeast(10_000)))
            figures.append(
                Figure(item: 7, "bootstrap \(count): peak memory (VmHWM)", Double(outcome.peakKiB) / 1024, "MiB",
                    String(format: "%.1f MiB once the container was open", Double(outcome.openedPeakKiB) / 1024)))
        }
        if let small = outcomes.first, let large = outcomes.last, large.count > small.count {
            let growth = Double(large.outcome.peakKiB - small.outcome.peakKiB) / 1024
            figures.append(
                Figure(item: 7, "bootstrap peak memory growth \(small.count) → \(large.count) records", growth, "MiB",
                    String(format: "%.0f bytes per extra record; goal: flat within 16 MiB",
                           growth * 1_048_576 / Double(large.count - small.count)),
                    goal: .atMost(16)))
        }
        return figures
    }

    /// Runs one bootstrap in a child process and reads its outcome.
    func bootstrapChild(zone: String, count: Int) throws -> Outcome {
        try runChild(
            [
                "bootstrap", "--url", server.url.absoluteString, "--container", server.containerIdentifier, "--zone", zone,
                "--count", String(count), "--store", directory.appendingPathComponent("\(zone).sqlite").path,
            ], what: "the bootstrap child for \(count) records")
    }

    /// The child: opens a fresh container on `zone`, syncs until it has `count` notes, prints an ``Outcome``.
    static func bootstrap(_ arguments: [String]) async throws {
        func option(_ name: String) throws -> String {
            guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else {
                throw BenchError("bootstrap needs \(name)")
            }
            return arguments[index + 1]
        }
        let count = Int(try option("--count")) ?? 0
        var options = PersistentCloudContainer.Options(
            server: .init(
                url: URL(string: try option("--url"))!, containerIdentifier: try option("--container"), token: "user0-token",
                deviceID: "bootstrap"))
        options.automaticallySync = false
        options.zoneName = try option("--zone")
        let container = try await PersistentCloudContainer(
            url: URL(fileURLWithPath: try option("--store")), schema: BenchNote.schema, options: options,
            logger: StoreBenchmarks.quietLogger)
        let opened = ProcessMemory.current()
        let start = ContinuousClock.now
        try await container.waitUntilSynced(timeout: .seconds(600))
        let seconds = start.duration(to: .now).inSeconds
        let records = try await container.store.read { try $0.count(BenchNote.self) }
        try await container.close()
        guard records == count else { throw BenchError("bootstrap fetched \(records) of \(count) notes") }
        let outcome = Outcome(records: records, seconds: seconds, openedPeakKiB: opened.peakKiB, peakKiB: ProcessMemory.current().peakKiB)
        print(String(decoding: try JSONEncoder().encode(outcome), as: UTF8.self))
    }
}

/// Runs this executable as a child with `arguments` and decodes the JSON of the last line it
/// prints: how the bootstrap and asset benchmarks measure a device in a process of its own.
func runChild<Outcome: Decodable>(_ arguments: [String], what: String) throws -> Outcome {
    let output = Pipe()
    let child = try ChildProcess.spawn(BenchServer.selfExecutable, arguments, standardOutput: .pipe(output))
    let data = output.fileHandleForReading.readDataToEndOfFile()
    let termination = child.waitUntilExit()
    let text = String(decoding: data, as: UTF8.self)
    guard termination == .exited(0), let line = text.split(separator: "\n").last,
        let outcome = try? JSONDecoder().decode(Outcome.self, from: Data(line.utf8))
    else {
        throw BenchError("\(what) failed (\(termination)):\n\(text)")
    }
    return outcome
}
