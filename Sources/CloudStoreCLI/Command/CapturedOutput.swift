import Synchronization

/// Keeps what a command writes, for tests and for apps that run `cloudstore` commands in process.
///
/// ```swift
/// let captured = CapturedOutput()
/// let status = await CloudStoreCommand.run(["--version"], output: captured.output)
/// #expect(status == 0 && captured.standardOutput == "0.1.0\n")
/// ```
public final class CapturedOutput: Sendable {
    private struct State {
        var standardOutput = ""
        var standardError = ""
        var waiters: [(texts: [String], continuation: CheckedContinuation<Void, Never>)] = []

        func contains(any texts: [String]) -> Bool {
            Self.output(standardOutput, containsAny: texts)
        }

        static func output(_ output: String, containsAny texts: [String]) -> Bool {
            texts.contains { output.contains($0) }
        }

        /// Removes and answers the waiters one of whose texts standard output now contains.
        mutating func satisfiedWaiters() -> [CheckedContinuation<Void, Never>] {
            let output = standardOutput
            let ready = waiters.filter { Self.output(output, containsAny: $0.texts) }.map(\.continuation)
            waiters.removeAll { Self.output(output, containsAny: $0.texts) }
            return ready
        }
    }

    private let state = Mutex(State())
    private let isTerminal: Bool

    /// - Parameter isTerminal: whether commands should treat standard error as a terminal (progress
    ///   then rewrites one line with `\r`).
    public init(isTerminal: Bool = false) {
        self.isTerminal = isTerminal
    }

    /// Everything written to standard output so far.
    public var standardOutput: String { state.withLock { $0.standardOutput } }

    /// Everything written to standard error so far.
    public var standardError: String { state.withLock { $0.standardError } }

    /// The lines written to standard error so far.
    public var errorLines: [String] {
        standardError.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
    }

    /// An output that writes here; help is wrapped at 80 columns whatever the terminal.
    public var output: CommandOutput {
        CommandOutput(
            isTerminal: isTerminal, columns: 80,
            standardOutput: { [self] text in
                let ready = state.withLock { state in
                    state.standardOutput += text
                    return state.satisfiedWaiters()
                }
                for continuation in ready { continuation.resume() }
            },
            standardError: { [self] text in state.withLock { $0.standardError += text } })
    }

    /// Returns once standard output contains one of `texts` (at once if it already does), e.g.
    /// the line `cloudstore serve` prints once it listens.
    public func waitForOutput(_ texts: String...) async {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Bool in
                if state.contains(any: texts) { return true }
                state.waiters.append((texts, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }
}
