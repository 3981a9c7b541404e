import Foundation
import Synchronization

/// Shows how far long work has come: items done, the total when known, and the rate.
///
/// On a terminal it rewrites one line in place (`\r`), at most ten times a second; otherwise
/// (a log file, a pipe, CI) it prints a plain line at most every `interval`, and one at the end.
/// It writes to standard error, so standard output stays the command's result.
///
/// ```swift
/// let progress = ProgressReporter("importing", total: records.count, output: context.output)
/// for batch in batches {
///     try save(batch)
///     progress.advance(by: batch.count)
/// }
/// progress.finish()      // importing: 5000/5000 (100%) in 2.1s, 2381/s
/// ```
public final class ProgressReporter: Sendable {
    private struct State {
        var completed = 0
        /// When a line was last written, as time since the start.
        var lastWrite: Duration?
        var finished = false
    }

    private let label: String
    private let total: Int?
    private let output: CommandOutput
    private let interval: Duration
    private let elapsed: @Sendable () -> Duration
    private let state = Mutex(State())

    /// - Parameters:
    ///   - label: what is being done, e.g. `migrating`.
    ///   - total: how many items there are, when known.
    ///   - output: where to write; its ``CommandOutput/isTerminal`` chooses the style.
    ///   - interval: the least time between two plain lines.
    ///   - clock: the clock rates and intervals are measured with.
    public init(
        _ label: String, total: Int?, output: CommandOutput, interval: Duration = .seconds(2),
        clock: any Clock<Duration> = ContinuousClock()
    ) {
        self.label = label
        self.total = total
        self.output = output
        self.interval = interval
        self.elapsed = Self.stopwatch(clock)
    }

    private static func stopwatch<C: Clock<Duration>>(_ clock: C) -> @Sendable () -> Duration {
        let start = clock.now
        return { start.duration(to: clock.now) }
    }

    /// Records that `count` more items are done.
    public func advance(by count: Int = 1) {
        update { $0 += count }
    }

    /// Records that `completed` items are done in all.
    public func update(completed: Int) {
        update { $0 = completed }
    }

    /// Writes the final line (on a terminal, ends the line being rewritten). Later calls do nothing.
    public func finish() {
        let now = elapsed()
        let text = state.withLock { state -> String? in
            guard !state.finished else { return nil }
            state.finished = true
            let line = Self.line(label: label, completed: state.completed, total: total, elapsed: now, final: true)
            return output.isTerminal ? "\r\(line)\u{1B}[K\n" : "\(line)\n"
        }
        text.map(output.writeError)
    }

    private func update(_ change: (inout Int) -> Void) {
        let now = elapsed()
        let text = state.withLock { state -> String? in
            guard !state.finished else { return nil }
            change(&state.completed)
            let wait = output.isTerminal ? .milliseconds(100) : interval
            if let last = state.lastWrite, now - last < wait { return nil }
            if state.lastWrite == nil, !output.isTerminal, now < interval { return nil }
            state.lastWrite = now
            let line = Self.line(label: label, completed: state.completed, total: total, elapsed: now, final: false)
            return output.isTerminal ? "\r\(line)\u{1B}[K" : "\(line)\n"
        }
        text.map(output.writeError)
    }

    /// `migrating: 120/500 (24%), 350/s`; the final line also says how long it took.
    static func line(label: String, completed: Int, total: Int?, elapsed: Duration, final: Bool) -> String {
        var line = "\(label): \(completed)"
        if let total {
            line += "/\(total)"
            if total > 0 { line += " (\(completed * 100 / total)%)" }
        }
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        if final { line += " in \(String(format: "%.1f", seconds))s" }
        if seconds > 0 {
            let rate = Double(completed) / seconds
            line += ", " + (rate >= 100 ? "\(Int(rate.rounded()))" : String(format: "%.1f", rate)) + "/s"
        }
        return line
    }
}
