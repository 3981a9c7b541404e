import Foundation

/// One figure of the report: a time, a rate, a size or a ratio, with the issue item it answers and,
/// for the figures the issue sets a goal on, whether the goal is met.
struct Figure: Codable {
    /// The item of issue 8 (1 local save … 9 assets), 10 typed queries and live results (issue 31), or
    /// 11 the start with many containers (issue 36).
    var item: Int
    var name: String
    var value: Double
    /// `ms`, `s`, `records/s`, `requests/s`, `×`, `MiB`, `KiB`, `µs`.
    var unit: String
    /// How it was measured, or what the ratio divides.
    var detail: String
    var goal: Goal?

    init(item: Int, _ name: String, _ value: Double, _ unit: String, _ detail: String = "", goal: Goal? = nil) {
        self.item = item
        self.name = name
        self.value = value
        self.unit = unit
        self.detail = detail
        self.goal = goal.map { goal in
            var goal = goal
            goal.met = goal.comparison == .atMost ? value <= goal.target : value >= goal.target
            return goal
        }
    }

    var formattedValue: String {
        switch value {
        case 0..<10 where unit == "×": String(format: "%.2f", value)
        case 0..<100: String(format: "%.1f", value)
        default: String(format: "%.0f", value)
        }
    }
}

/// A goal of the issue: at most or at least a target.
struct Goal: Codable {
    enum Comparison: String, Codable {
        case atMost = "≤"
        case atLeast = "≥"
    }

    var comparison: Comparison
    var target: Double
    /// Set by ``Figure/init(item:_:_:_:_:goal:)`` from the row's value.
    var met = false

    static func atMost(_ target: Double) -> Goal { Goal(comparison: .atMost, target: target) }
    static func atLeast(_ target: Double) -> Goal { Goal(comparison: .atLeast, target: target) }
}

/// The ratio of two timed benchmarks' medians, or nil when either did not run.
func ratio(
    item: Int, _ name: String, _ numerator: String, _ denominator: String, goal: Goal? = nil, in results: [Measurement]
) -> Figure? {
    guard let top = results.first(where: { $0.name == numerator }),
        let bottom = results.first(where: { $0.name == denominator })
    else { return nil }
    return Figure(item: item, name, top.medianSeconds / bottom.medianSeconds, "×", "\(numerator) / \(denominator)", goal: goal)
}

/// The machine a run was made on.
struct Machine: Codable {
    var cpu: String
    var cores: Int
    var memoryGiB: Double
    var kernel: String
    var sqlite: String
    var swift: String

    static func current(sqlite: String) -> Machine {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model = cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }
            .map { String($0.split(separator: ":", maxSplits: 1)[1]).trimmingCharacters(in: .whitespaces) } ?? "unknown"
        let kernel = ((try? String(contentsOfFile: "/proc/sys/kernel/osrelease", encoding: .utf8)) ?? "unknown")
            .trimmingCharacters(in: .whitespacesAndNewlines)
        return Machine(
            cpu: model, cores: ProcessInfo.processInfo.activeProcessorCount,
            memoryGiB: Double(ProcessInfo.processInfo.physicalMemory) / Double(1 << 30), kernel: kernel, sqlite: sqlite,
            swift: compilerVersion)
    }

    /// The Swift compiler this binary was built with.
    static var compilerVersion: String {
        #if compiler(>=6.4)
            return ">= 6.4"
        #elseif compiler(>=6.3.1)
            return "6.3.1"
        #elseif compiler(>=6.3)
            return "6.3"
        #elseif compiler(>=6.2)
            return "6.2"
        #else
            return "< 6.2"
        #endif
    }

    var summary: String {
        "\(cpu), \(cores) cores, \(String(format: "%.1f", memoryGiB)) GiB, Linux \(kernel), Swift \(swift), SQLite \(sqlite)"
    }
}

/// What `--json` writes: everything printed, for comparison between commits.
struct Report: Codable {
    var machine: Machine
    var date: Date
    var commandLine: [String]
    var seconds: Double
    var measurements: [Measurement]
    var figures: [Figure]
    /// Groups that did not run and why (no PostgreSQL, say).
    var skipped: [String]

    /// The results table: one line per row, grouped by item, with the goal and whether it is met.
    func table() -> String {
        var lines = [
            "item  " + "figure".padding(toLength: 58, withPad: " ", startingAt: 0) + "      value  unit        goal      met"
        ]
        for row in figures {
            let goal = row.goal.map { "\($0.comparison.rawValue) \(Figure(item: 0, "", $0.target, row.unit).formattedValue)" } ?? ""
            let met = row.goal.map { $0.met ? "yes" : "NO" } ?? ""
            lines.append(
                String(format: "%4d  ", row.item) + row.name.padding(toLength: 58, withPad: " ", startingAt: 0)
                    + row.formattedValue.leftPadded(to: 11) + "  " + row.unit.padding(toLength: 10, withPad: " ", startingAt: 0)
                    + goal.padding(toLength: 10, withPad: " ", startingAt: 0) + met)
        }
        lines += skipped.map { "      skipped: \($0)" }
        return lines.joined(separator: "\n")
    }

    /// The same table in Markdown, for Benchmarks/README.md.
    func markdown() -> String {
        var lines = ["| # | Figure | Value | Goal | Met | How |", "|---|---|---:|---|---|---|"]
        for row in figures {
            let goal = row.goal.map { "\($0.comparison.rawValue) \(Figure(item: 0, "", $0.target, row.unit).formattedValue) \(row.unit)" } ?? ""
            let met = row.goal.map { $0.met ? "yes" : "**no**" } ?? ""
            lines.append("| \(row.item) | \(row.name) | \(row.formattedValue) \(row.unit) | \(goal) | \(met) | \(row.detail) |")
        }
        lines += skipped.map { "| | skipped: \($0) | | | | |" }
        return lines.joined(separator: "\n")
    }
}

extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}

/// This process's peak resident memory so far (`VmHWM`) and current (`VmRSS`), in KiB.
struct ProcessMemory: Codable {
    var peakKiB: Int
    var residentKiB: Int

    static func current() -> ProcessMemory { read("/proc/self/status") }

    /// Another process's (a child's), in KiB.
    static func of(_ processID: Int32) -> ProcessMemory { read("/proc/\(processID)/status") }

    private static func read(_ path: String) -> ProcessMemory {
        let status = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        func field(_ name: String) -> Int {
            guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return 0 }
            return Int(line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first ?? "") ?? 0
        }
        return ProcessMemory(peakKiB: field("VmHWM"), residentKiB: field("VmRSS"))
    }
}

/// CPU seconds (user + system) a process has used, from `/proc/<pid>/stat`.
func processCPUSeconds(of processID: Int32? = nil) -> Double {
    let path = processID.map { "/proc/\($0)/stat" } ?? "/proc/self/stat"
    guard let stat = try? String(contentsOfFile: path, encoding: .utf8), let close = stat.lastIndex(of: ")") else { return 0 }
    // Fields after the command name: state is field 3, utime field 14, stime field 15.
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// Writes a line at once, also when stdout is a file or a pipe (where `print` holds it in a buffer
/// until the run ends).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
