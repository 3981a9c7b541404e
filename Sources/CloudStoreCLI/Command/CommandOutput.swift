import Foundation

/// Where a command writes: its standard output, its standard error, and what they are.
///
/// The `cloudstore` executable uses ``standard``; tests and apps that embed the commands pass the
/// ``CapturedOutput/output`` of a ``CapturedOutput`` and read what was written.
///
/// ```swift
/// let captured = CapturedOutput()
/// let status = await CloudStoreCommand.run(["schema", "validate", "Schema/Notes.json"], output: captured.output)
/// print(status, captured.standardOutput)
/// ```
public struct CommandOutput: Sendable {
    private let writeOutput: @Sendable (String) -> Void
    private let writeError: @Sendable (String) -> Void
    /// Whether standard error is a terminal: progress then updates one line in place.
    public let isTerminal: Bool
    /// The width help text is wrapped to; nil for the terminal's width (80 when it has none).
    public let columns: Int?

    /// An output writing text (already ending in a newline where it should) with two closures.
    public init(
        isTerminal: Bool = false, columns: Int? = nil,
        standardOutput: @escaping @Sendable (String) -> Void, standardError: @escaping @Sendable (String) -> Void
    ) {
        self.isTerminal = isTerminal
        self.columns = columns
        self.writeOutput = standardOutput
        self.writeError = standardError
    }

    /// The process's standard output and standard error. Text that cannot be written (the
    /// reader went away, as `cloudstore history | head` does) is dropped rather than crashing.
    public static var standard: CommandOutput {
        CommandOutput(
            isTerminal: isatty(STDERR_FILENO) == 1,
            standardOutput: { try? FileHandle.standardOutput.write(contentsOf: Data($0.utf8)) },
            standardError: { try? FileHandle.standardError.write(contentsOf: Data($0.utf8)) })
    }

    /// Writes `text` to standard output as it is.
    public func write(_ text: String) {
        writeOutput(text)
    }

    /// Writes `text` to standard error as it is.
    public func writeError(_ text: String) {
        writeError(text)
    }

    /// Writes one line to standard output.
    public func print(_ line: String) {
        writeOutput(line + "\n")
    }

    /// Writes one line to standard error.
    public func printError(_ line: String) {
        writeError(line + "\n")
    }
}
