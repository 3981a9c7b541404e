import Foundation

/// A tiny benchmark harness: each benchmark prepares untimed state, then runs its timed body
/// once to warm up and `iterations` times to measure; the report gives the median and minimum.
/// Benchmarks that are not one timed body (sync, latency, memory) report ``Figure``s directly.
struct Benchmark {
    /// `group.case`, e.g. `save50k.cloudstore`.
    var name: String
    /// What one run does, for the table.
    var summary: String
    /// Builds untimed state for one run and returns the timed body.
    var prepare: () throws -> () throws -> Void
}

struct Measurement: Codable {
    var name: String
    var summary: String
    var iterations: Int
    var medianSeconds: Double
    var minimumSeconds: Double
}

struct Harness {
    var iterations = 5
    var warmUp = 1
    var filter: String?

    /// The benchmarks the filter selects: the one named exactly by it, else those whose name contains it.
    func selected(_ benchmarks: [Benchmark]) -> [Benchmark] {
        guard let filter else { return benchmarks }
        let exact = benchmarks.filter { $0.name == filter }
        return exact.isEmpty ? benchmarks.filter { $0.name.contains(filter) } : exact
    }

    /// Runs each benchmark `warmUp + iterations` times: one after the other, or alternating
    /// (one run of each in turn), so that a ratio of two benchmarks is not skewed by the host
    /// slowing down between them.
    func run(_ benchmarks: [Benchmark], alternating: Bool = false) throws -> [Measurement] {
        let selected = selected(benchmarks)
        var times = Array(repeating: [Double](), count: selected.count)
        func runOnce(_ index: Int, _ run: Int) throws {
            let body = try selected[index].prepare()
            let elapsed = try measured(body)
            if run >= warmUp { times[index].append(elapsed.inSeconds) }
        }
        if alternating {
            for run in 0..<(warmUp + iterations) {
                for index in selected.indices { try runOnce(index, run) }
            }
        } else {
            for index in selected.indices {
                for run in 0..<(warmUp + iterations) { try runOnce(index, run) }
            }
        }
        return zip(selected, times).map { benchmark, times in
            let times = times.sorted()
            let measurement = Measurement(
                name: benchmark.name, summary: benchmark.summary, iterations: iterations,
                medianSeconds: times[times.count / 2], minimumSeconds: times[0])
            say(
                "  " + benchmark.name.padding(toLength: 38, withPad: " ", startingAt: 0)
                    + String(format: "median %8.1f ms   min %8.1f ms", measurement.medianSeconds * 1000, measurement.minimumSeconds * 1000))
            return measurement
        }
    }
}

/// Runs a benchmark's timed body. Not inlined, so that `valgrind --tool=callgrind
/// --collect-atstart=no --toggle-collect='*measured*'` counts the instructions of the timed part
/// only (see Benchmarks/README.md).
@inline(never)
func measured(_ body: () throws -> Void) throws -> Duration {
    let start = ContinuousClock.now
    try body()
    return start.duration(to: .now)
}

extension Duration {
    var inSeconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
