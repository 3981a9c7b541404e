import Foundation
import GRDBSQLite

/// `cloudstore-bench [--filter TEXT] [--iterations N] [--warmup N] [--save N] [--fetch N] [--json FILE]`
///
/// Build and run in release: `swift run -c release cloudstore-bench`.
let arguments = Array(CommandLine.arguments.dropFirst())
func option(_ name: String) -> String? {
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}
if arguments.contains("--help") {
    print("usage: cloudstore-bench [--filter TEXT] [--iterations N] [--warmup N] [--save N] [--fetch N] [--json FILE]")
    exit(0)
}
var harness = Harness()
harness.filter = option("--filter")
harness.iterations = option("--iterations").flatMap(Int.init) ?? 5
harness.warmUp = option("--warmup").flatMap(Int.init) ?? 1
let saveCount = option("--save").flatMap(Int.init) ?? 50_000
let fetchCount = option("--fetch").flatMap(Int.init) ?? 200_000

let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cloudstore-bench-\(UUID().uuidString)")
try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: directory) }

let machine = Machine.current(sqlite: String(cString: sqlite3_libversion()))
print("CloudStore benchmarks — \(machine.cpu), \(machine.cores) cores, Linux \(machine.kernel), SQLite \(machine.sqlite)")
print("median and minimum of \(harness.iterations) runs after \(harness.warmUp) warm-up run(s)\n")

let store = StoreBenchmarks(directory: directory, saveCount: saveCount, fetchCount: fetchCount)
if harness.selected(store.all).contains(where: { $0.name.hasPrefix("fetch") }) {
    try store.prepareFetchDatabase()
}
let results = try harness.run(store.all)

let ratios = [
    ratio("history overhead (save with / without history)", "save.cloudstore", "save.cloudstore.nohistory", goal: 1.3, in: results),
    ratio("history overhead, snapshots (with / without)", "save.cloudstore.snapshots", "save.cloudstore.snapshots.nohistory", goal: 1.3, in: results),
    ratio("save: CloudStore with history / GRDB Codable", "save.cloudstore", "save.grdb.codable", goal: 1.5, in: results),
    ratio("save: CloudStore without history / GRDB Codable", "save.cloudstore.nohistory", "save.grdb.codable", in: results),
    ratio("save: GRDB Codable / raw SQLite", "save.grdb.codable", "save.raw", in: results),
    ratio("save: CloudStore with history / raw SQLite", "save.cloudstore", "save.raw", in: results),
    ratio("fetch: CloudStore entities / GRDB Codable", "fetch.cloudstore", "fetch.grdb.codable", in: results),
    ratio("fetch: CloudStore snapshots / GRDB Codable", "fetch.cloudstore.snapshots", "fetch.grdb.codable", in: results),
    ratio("fetch: GRDB Codable / raw SQLite", "fetch.grdb.codable", "fetch.raw", in: results),
].compactMap { $0 }

if !ratios.isEmpty {
    print("\nratios (of medians)")
    for ratio in ratios {
        let goal = ratio.goal.map { "  goal ≤ " + String(format: "%.1f", $0) + "× " + (ratio.value <= $0 ? "met" : "MISSED") } ?? ""
        print("  " + ratio.name.padding(toLength: 52, withPad: " ", startingAt: 0) + String(format: "%5.2f×", ratio.value) + goal)
    }
}

if let path = option("--json") {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    encoder.dateEncodingStrategy = .iso8601
    try encoder.encode(Report(machine: machine, date: Date(), measurements: results, ratios: ratios))
        .write(to: URL(fileURLWithPath: path))
    print("\nwrote \(path)")
}
