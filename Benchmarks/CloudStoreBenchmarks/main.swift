import CloudStoreLogging
import Foundation
import GRDBSQLite
import Logging

/// `cloudstore-bench [--only GROUPS] [--quick] [--json FILE] [--markdown FILE] [--postgres URL] ...`
///
/// Build and run in release: `swift run -c release cloudstore-bench`. See ``BenchOptions/usage``.
if ProcessInfo.processInfo.environment[StartupBenchmarks.childVariable] != nil {
    await StartupBenchmarks.runAsCloudstore()
}
// With `CLOUDSTORE_DEBUG`, every logger (the engines' and the stores' too, not only the devices')
// writes millisecond timestamps, so the hops of one propagation can be timed.
if ProcessInfo.processInfo.environment[DebugLevel.environmentVariable] != nil {
    LoggingSystem.bootstrap { CloudStoreLogHandler(label: $0, level: .fromEnvironment) }
}
let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case "serve":
    try await BenchServer.serve(Array(arguments.dropFirst()))
    exit(0)
case "bootstrap":
    try await ScaleBenchmarks.bootstrap(Array(arguments.dropFirst()))
    exit(0)
case "asset":
    try await AssetBenchmarks.child(Array(arguments.dropFirst()))
    exit(0)
default:
    break
}

let options: BenchOptions
do {
    options = try BenchOptions(arguments)
} catch {
    FileHandle.standardError.write(Data("cloudstore-bench: \(error)\n\n\(BenchOptions.usage)\n".utf8))
    exit(64)
}
if options.help {
    say(BenchOptions.usage)
    exit(0)
}

let runStart = ContinuousClock.now
let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cloudstore-bench-\(UUID().uuidString)")
try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: directory) }

let machine = Machine.current(sqlite: String(cString: sqlite3_libversion()))
let sizes = options.sizes
say("CloudStore benchmarks — \(machine.summary)")
say("groups: \(options.groups.map(\.rawValue).joined(separator: ", "))\(options.quick ? " (quick sizes)" : "")")
say("store timings: median and minimum of \(options.iterations) runs after \(options.warmUp) warm-up run(s)\n")

var measurements: [Measurement] = []
var figures: [Figure] = []
var skipped: [String] = []

@MainActor
func report(_ new: [Figure]) {
    for figure in new {
        say("  " + figure.name.padding(toLength: 60, withPad: " ", startingAt: 0) + figure.formattedValue.leftPadded(to: 10) + " " + figure.unit)
    }
    figures += new
}

// Items 1-3: local saves and fetches.
let storeGroups = options.groups.filter { $0 == .save || $0 == .fetch }
if !storeGroups.isEmpty {
    var harness = Harness()
    harness.filter = options.filter
    harness.iterations = options.iterations
    harness.warmUp = options.warmUp
    let store = StoreBenchmarks(directory: directory, saveCount: sizes.save, fetchCount: sizes.fetch)
    let benchmarks = store.all.filter { benchmark in storeGroups.contains { benchmark.name.hasPrefix($0.rawValue + ".") } }
    if harness.selected(benchmarks).contains(where: { $0.name.hasPrefix("fetch") }) {
        try store.prepareFetchDatabase()
    }
    measurements = try harness.run(benchmarks)
    let item = { (name: String) in name.hasPrefix("fetch") ? 3 : name.contains("nohistory") ? 2 : 1 }
    figures += measurements.map { measurement in
        Figure(
            item: item(measurement.name), measurement.name, measurement.medianSeconds * 1000, "ms",
            "\(measurement.summary); median of \(measurement.iterations), min \(String(format: "%.1f", measurement.minimumSeconds * 1000)) ms")
    }
    report(
        [
            ratio(item: 1, "save: CloudStore with history / GRDB Codable", "save.cloudstore", "save.grdb.codable", goal: .atMost(1.5), in: measurements),
            ratio(item: 1, "save: @Model with history / GRDB Codable", "save.cloudstore.model", "save.grdb.codable", goal: .atMost(0.7), in: measurements),
            ratio(item: 1, "save: CloudStore with history / raw SQLite", "save.cloudstore", "save.raw", in: measurements),
            ratio(item: 1, "save: GRDB Codable / raw SQLite", "save.grdb.codable", "save.raw", in: measurements),
            ratio(item: 1, "save from snapshots, with history / GRDB Codable", "save.cloudstore.snapshots", "save.grdb.codable", in: measurements),
            ratio(item: 2, "history overhead: save with / without history", "save.cloudstore", "save.cloudstore.nohistory", goal: .atMost(1.3), in: measurements),
            ratio(item: 2, "history overhead, from snapshots", "save.cloudstore.snapshots", "save.cloudstore.snapshots.nohistory", goal: .atMost(1.3), in: measurements),
            ratio(item: 3, "fetch: CloudStore entities / GRDB Codable", "fetch.cloudstore", "fetch.grdb.codable", goal: .atMost(1.0), in: measurements),
            ratio(item: 3, "fetch: @Model entities / GRDB Codable", "fetch.cloudstore.model", "fetch.grdb.codable", goal: .atMost(0.5), in: measurements),
            ratio(item: 3, "fetch: CloudStore snapshots / GRDB Codable", "fetch.cloudstore.snapshots", "fetch.grdb.codable", in: measurements),
            ratio(item: 3, "fetch: GRDB Codable / raw SQLite", "fetch.grdb.codable", "fetch.raw", in: measurements),
        ].compactMap { $0 })
    report(
        measurements.filter { $0.name.hasPrefix("save.commits.") }.map { measurement in
            Figure(
                item: 1, "commits/s, \(measurement.name)", Double(StoreBenchmarks.commitCount) / measurement.medianSeconds,
                "commits/s", "\(measurement.summary); the store's durability setting, one commit per save")
        })
}

// Item 10: typed queries and live results.
if options.groups.contains(.query) {
    say("\nquery")
    var harness = Harness()
    harness.filter = options.filter
    // Runs of 1,000 fetches take about 40 ms: more of them, alternating typed and Condition.
    harness.iterations = options.iterations * 3
    harness.warmUp = options.warmUp
    let queries = try QueryBenchmarks(directory: directory)
    let timed = try harness.run(queries.all, alternating: true)
    measurements += timed
    report(
        timed.map { measurement in
            Figure(
                item: 10, measurement.name, measurement.medianSeconds * 1_000_000 / Double(QueryBenchmarks.fetches), "µs",
                "\(measurement.summary); per fetch, median of \(measurement.iterations)")
        }
            + [ratio(item: 10, "typed fetch of 20 / the same with a Condition", "query.typed20", "query.condition20", goal: .atMost(1.1), in: timed)]
            .compactMap { $0 })
    report(try await queries.liveResults(commits: sizes.liveCommits))
}

// Item 4: query generations.
if options.groups.contains(.generations) {
    say("\ngenerations")
    report(try GenerationBenchmarks(directory: directory, pins: sizes.pins, writes: sizes.generationWrites).run())
}

// Item 11: start time with many containers, before the groups that need a server.
if options.groups.contains(.startup) {
    for backend in Backend.allCases {
        if backend == .postgres && options.postgresURL == nil {
            skipped.append("startup on PostgreSQL: no PostgreSQL (pass --postgres URL or set CLOUDSTORE_TEST_POSTGRES_URL)")
            say("\nstartup, \(backend.rawValue): skipped: no PostgreSQL")
            continue
        }
        say("\nstartup, \(backend.rawValue)")
        report(
            try await StartupBenchmarks(directory: directory, postgresURL: options.postgresURL, runs: options.quick ? 3 : 5)
                .run(backend))
    }
}

// Items 5-9: through a server child process, on each backend.
for group in options.groups where group.needsServer {
    let backends = group == .scale ? [Backend.sqlite] : Backend.allCases
    for backend in backends {
        if backend == .postgres && options.postgresURL == nil {
            skipped.append("\(group.rawValue) on PostgreSQL: no PostgreSQL (pass --postgres URL or set CLOUDSTORE_TEST_POSTGRES_URL)")
            say("\n\(group.rawValue), \(backend.rawValue): skipped: no PostgreSQL")
            continue
        }
        say("\n\(group.rawValue), \(backend.rawValue)")
        let server = try await BenchServer.start(backend, postgresURL: options.postgresURL, directory: directory)
        do {
            switch group {
            case .sync:
                for count in sizes.sync {
                    // A server of its own for the encrypted runs: the first one's schema has the
                    // plain fields, which a record type's encrypted ones cannot replace.
                    let sealedServer = try await BenchServer.start(backend, postgresURL: options.postgresURL, directory: directory)
                    var sealed = SyncBenchmarks(directory: directory, server: sealedServer, ids: options.ids)
                    sealed.encrypted = true
                    let plain: [Figure], encrypted: [Figure]
                    do {
                        (plain, encrypted) = try await SyncBenchmarks.bulk(
                            count: count, runs: sizes.syncRuns,
                            plain: SyncBenchmarks(directory: directory, server: server, ids: options.ids), encrypted: sealed)
                    } catch {
                        await sealedServer.stop()
                        throw error
                    }
                    await sealedServer.stop()
                    report(plain)
                    report(encrypted)
                    if let plainRate = plain.first(where: { $0.unit == "records/s" })?.value,
                        let encryptedRate = encrypted.first(where: { $0.unit == "records/s" })?.value
                    {
                        report([
                            Figure(
                                item: 5, "bulk sync \(count) notes, \(server.backend.rawValue): encrypted rate / plain rate",
                                encryptedRate / plainRate, "×", "every attribute encrypted against none, same run",
                                goal: .atLeast(0.8))
                        ])
                    }
                }
            case .latency: report(try await SyncBenchmarks(directory: directory, server: server).latency(changes: sizes.latencyChanges))
            case .scale: report(try await ScaleBenchmarks(directory: directory, server: server).run(counts: sizes.scale))
            case .asset:
                let assets = AssetBenchmarks(directory: directory, server: server)
                report(try await assets.run(mebibytes: sizes.assetMebibytes))
                report(try await assets.run(mebibytes: sizes.assetMebibytes, encrypted: true))
            case .server:
                report(try await ServerBenchmarks(server: server).modifyThroughput(clients: 4, requests: sizes.serverRequests))
                for spread in ServerBenchmarks.Spread.allCases {
                    report([try await ServerBenchmarks(server: server).hotZone(spread, requests: sizes.serverRequests * 2)])
                }
            case .save, .fetch, .generations, .query, .startup: break
            }
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }
}

let runReport = Report(
    machine: machine, date: Date(), commandLine: CommandLine.arguments, seconds: runStart.duration(to: .now).inSeconds,
    measurements: measurements, figures: figures, skipped: skipped)
say("\nCloudStore benchmarks — \(machine.summary)")
say(String(format: "whole run %.0f s\n", runReport.seconds))
say(runReport.table())

if let path = options.jsonPath {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    encoder.dateEncodingStrategy = .iso8601
    try encoder.encode(runReport).write(to: URL(fileURLWithPath: path))
    say("\nwrote \(path)")
}
if let path = options.markdownPath {
    try Data((runReport.markdown() + "\n").utf8).write(to: URL(fileURLWithPath: path))
    say("wrote \(path)")
}
