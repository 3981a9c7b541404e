/// A command that could not do its work. The runner prints its message as one line,
/// `cloudstore: error: <message>`, and exits with status 1; the message names the file, entity or
/// record concerned and what to do.
///
/// ```swift
/// throw CommandError("no schema file at \(path): check the path")
/// ```
public struct CommandError: Error, CustomStringConvertible, Sendable {
    public var message: String

    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}
