import Foundation

/// The benchmark groups, in the order they run; `--only` takes their names.
enum BenchGroup: String, CaseIterable {
    /// Items 1 and 2: local saves, with and without history, against GRDB and raw SQLite.
    case save
    /// Item 3: fetches into entities against GRDB and raw SQLite.
    case fetch
    /// Item 4: pinning query generations, WAL growth.
    case generations
    /// Item 5: bulk sync from one device to another through a server.
    case sync
    /// Item 6: propagation latency of one change.
    case latency
    /// Item 7: bootstrap time and peak memory of a fresh device.
    case scale
    /// Item 8: server `records/modify` throughput with concurrent clients.
    case server
    /// Item 9: one large attachment synced as an asset: MB/s and peak memory of both devices and the server.
    case asset
    /// Item 10: typed queries against the same query as a `Condition`, and live results.
    case query
    /// Item 11: `cloudstore serve`'s start to listening with 10 and 1,000 declared containers.
    case startup

    var needsServer: Bool { ![.save, .fetch, .generations, .query, .startup].contains(self) }
}

/// How many records each benchmark uses: the sizes, or small ones for a quick check.
struct BenchSizes {
    var save = 50_000
    var fetch = 200_000
    var pins = 200
    var generationWrites = 10_000
    /// Notes of each bulk sync run, smallest first.
    var sync = [10_000]
    /// Runs of each bulk sync size; the run with the median records/s is reported.
    var syncRuns = 1
    var latencyChanges = 200
    var scale = [10_000, 100_000]
    /// Requests per client, 200 records each.
    var serverRequests = 50
    /// The attachment of the asset benchmark, in MiB.
    var assetMebibytes = 100
    /// Commits of each live results run.
    var liveCommits = 1_000

    static let quick = BenchSizes(
        save: 5_000, fetch: 20_000, pins: 50, generationWrites: 1_000, sync: [1_000], latencyChanges: 20,
        scale: [1_000, 10_000], serverRequests: 5, assetMebibytes: 10, liveCommits: 100)
}

/// The command line of `cloudstore-bench`.
struct BenchOptions {
    static let usage = """
        usage: cloudstore-bench [--only GROUP,...] [--quick] [--json FILE] [--markdown FILE]
                                [--postgres URL] [--iterations N] [--warmup N] [--filter TEXT]
                                [--save N] [--fetch N] [--sync N,N] [--sync-runs N] [--scale N,N]
                                [--asset MIB] [--ids time-ordered|random]

          --only        groups to run: \(BenchGroup.allCases.map(\.rawValue).joined(separator: ", "))
                        (default all; "history" is an alias of save)
          --quick       small sizes (a tenth or less) for a check that everything runs
          --json        write every figure, the machine and the command line as JSON
          --markdown    write the results table as Markdown (Benchmarks/README.md's table)
          --postgres    a PostgreSQL URL for the PostgreSQL server rows; default
                        $CLOUDSTORE_TEST_POSTGRES_URL; without one those rows are skipped
          --iterations  timed runs of each store benchmark (default 3, quick 2; the queries run three times as many)
          --warmup      untimed runs before them (default 1)
          --filter      only store benchmarks whose name contains TEXT (e.g. save.raw)
          --save, --fetch  rows for the store benchmarks (default 50000 and 200000)
          --asset       MiB of the asset benchmark's attachment (default 100, quick 10)
          --sync        notes of each bulk sync run, smallest first (default 10000); several
                        sizes show whether the CPU per record stays flat (3000,30000)
          --sync-runs   runs of each bulk sync size (default 1), plain and encrypted
                        alternating; the run with the median records/s is reported, with the
                        others' range (the host's noise)
          --ids         how the bulk sync's notes get their ids: time-ordered (default,
                        UUID.timeOrdered(), as the docs recommend) or random (UUID())
          --scale       record counts of the bootstrap runs, smallest first (default 10000,100000)

        Build in release: swift build -c release --product cloudstore-bench
        """

    var groups = BenchGroup.allCases
    var quick = false
    var help = false
    var jsonPath: String?
    var markdownPath: String?
    var postgresURL = ProcessInfo.processInfo.environment["CLOUDSTORE_TEST_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }
    var iterations = 3
    var warmUp = 1
    var filter: String?
    var sizes = BenchSizes()
    var ids = BenchNote.IDs.timeOrdered

    init(_ arguments: [String]) throws {
        var remaining = arguments[...]
        var save: Int?
        var fetch: Int?
        var iterations: Int?
        var scale: [Int]?
        var sync: [Int]?
        var syncRuns: Int?
        var asset: Int?
        func value(_ name: String) throws -> String {
            guard let value = remaining.popFirst() else { throw BenchError("\(name) needs a value") }
            return value
        }
        func counts(_ name: String) throws -> [Int] {
            try value(name).split(separator: ",").map { count in
                guard let count = Int(count), count > 0 else { throw BenchError("\(name) needs positive counts") }
                return count
            }
        }
        func number(_ name: String) throws -> Int {
            guard let number = Int(try value(name)), number > 0 else { throw BenchError("\(name) needs a positive number") }
            return number
        }
        while let argument = remaining.popFirst() {
            switch argument {
            case "--only":
                groups = try value(argument).split(separator: ",").map { name in
                    let name = name == "history" ? "save" : name.trimmingCharacters(in: .whitespaces)
                    guard let group = BenchGroup(rawValue: name) else {
                        throw BenchError("unknown group \"\(name)\" in --only")
                    }
                    return group
                }
                groups = BenchGroup.allCases.filter(groups.contains)
            case "--quick": quick = true
            case "--help", "-h": help = true
            case "--json": jsonPath = try value(argument)
            case "--markdown": markdownPath = try value(argument)
            case "--postgres": postgresURL = try value(argument)
            case "--iterations": iterations = try number(argument)
            case "--warmup": warmUp = Int(try value(argument)) ?? 1
            case "--filter": filter = try value(argument)
            case "--save": save = try number(argument)
            case "--fetch": fetch = try number(argument)
            case "--scale": scale = try counts(argument)
            case "--sync": sync = try counts(argument)
            case "--sync-runs": syncRuns = try number(argument)
            case "--asset": asset = try number(argument)
            case "--ids":
                let name = try value(argument)
                guard let kind = BenchNote.IDs(rawValue: name) else {
                    throw BenchError("--ids takes time-ordered or random, not \"\(name)\"")
                }
                ids = kind
            default: throw BenchError("unknown argument \(argument)")
            }
        }
        if quick { sizes = .quick }
        self.iterations = iterations ?? (quick ? 2 : 3)
        if let save { sizes.save = save }
        if let fetch { sizes.fetch = fetch }
        if let scale { sizes.scale = scale }
        if let sync { sizes.sync = sync }
        if let syncRuns { sizes.syncRuns = syncRuns }
        if let asset { sizes.assetMebibytes = asset }
    }
}
