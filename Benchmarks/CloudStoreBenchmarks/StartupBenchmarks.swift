import CloudStoreCLI
import CloudStoreTesting
import Foundation

/// Item 11: how long `cloudstore serve` takes from its spawn to the line that says it listens,
/// with 10 and with 1,000 containers declared by `--container` options: the start of an instance
/// in a rolling restart. The child is this executable running the code of `cloudstore`
/// (``runAsCloudstore()``), timed alternately by size after one untimed start of each, and on
/// PostgreSQL on a layout that is current (the untimed start prepares it).
struct StartupBenchmarks {
    /// The environment variable that makes this executable run as `cloudstore`.
    static let childVariable = "CLOUDSTORE_BENCH_AS_CLOUDSTORE"

    let directory: URL
    let postgresURL: String?
    /// Timed starts of each size.
    var runs = 5
    var counts = [10, 1_000]

    func run(_ backend: Backend) async throws -> [Figure] {
        let root = directory.appendingPathComponent("startup-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let tokens = root.appendingPathComponent("tokens.json")
        try JSONEncoder().encode(BenchServer.users).write(to: tokens)
        let storage: [String]
        switch backend {
        case .sqlite: storage = ["--data", root.appendingPathComponent("data").path]
        case .postgres:
            guard let postgresURL else { throw BenchError("the PostgreSQL backend needs --postgres URL") }
            storage = ["--postgres", postgresURL]
        }
        func arguments(_ count: Int) -> [String] {
            ["--tokens", tokens.path] + storage + (0..<count).flatMap { ["--container", "iCloud.com.example.bench.c\($0)"] }
        }
        var seconds: [Int: [Double]] = [:]
        for count in counts { _ = try await Self.start(arguments(count)) }
        for _ in 0..<runs {
            for count in counts { seconds[count, default: []].append(try await Self.start(arguments(count))) }
        }
        let name = backend.rawValue
        var figures = counts.map { count in
            let sorted = seconds[count, default: []].sorted()
            return Figure(
                item: 11, "start to listening, \(count) containers, \(name)", percentile(sorted, 0.5) * 1000, "ms",
                String(
                    format: "`cloudstore serve` with %d --container options, spawn to its listening line; median of %d, %.1f–%.1f ms",
                    count, sorted.count, (sorted.first ?? 0) * 1000, (sorted.last ?? 0) * 1000))
        }
        if let few = counts.first, let many = counts.last, few != many {
            let ratio = percentile(seconds[many, default: []].sorted(), 0.5) / percentile(seconds[few, default: []].sorted(), 0.5)
            figures.append(
                Figure(
                    item: 11, "start with \(many) / \(few) containers, \(name)", ratio, "×",
                    "the two medians above", goal: .atMost(2)))
        }
        return figures
    }

    /// Seconds from spawning `cloudstore serve <arguments>` to its listening line; then stops it.
    static func start(_ arguments: [String]) async throws -> Double {
        let clock = ContinuousClock()
        let started = clock.now
        let process = try await ServerProcess.launch(
            arguments, executable: BenchServer.selfExecutable, environment: [childVariable: "1"])
        let elapsed = started.duration(to: clock.now).inSeconds
        await process.terminate()
        return elapsed
    }

    /// Runs the command line as `cloudstore` does, when this executable was started as its child.
    static func runAsCloudstore() async -> Never {
        exit(await CloudStoreCommand.run(Array(CommandLine.arguments.dropFirst()), output: .standard, handlesSignals: true))
    }
}
