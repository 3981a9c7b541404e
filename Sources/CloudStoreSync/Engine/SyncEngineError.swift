/// Why a ``SyncEngine`` could not do what was asked, for reasons of the engine rather than of one
/// request (those throw ``CloudError``).
///
/// ```swift
/// do {
///     try await engine.sendChanges()
/// } catch let error as SyncEngineError where error.code == .stopped {
///     // Credentials were rejected: ask the user to sign in, then make a new engine.
/// }
/// ```
public struct SyncEngineError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure it is; compare with the constants below.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        /// The server rejected the credentials; the engine stopped for good.
        public static let stopped = Code(name: "stopped")
        /// ``SyncEngine/cancelOperations()`` or task cancellation ended the operation.
        public static let cancelled = Code(name: "cancelled")
        /// The delegate was released; the engine has no one to hand events to.
        public static let delegateReleased = Code(name: "delegateReleased")

        /// The code's name, as in `stopped`.
        public var description: String { name }
    }

    /// What kind of failure it is.
    public let code: Code
    /// What happened and what to do about it.
    public let message: String

    /// The code and the message, as in `stopped: the sync engine stopped because …`.
    public var description: String { "\(code): \(message)" }

    static func stopped(because cause: CloudError?) -> SyncEngineError {
        SyncEngineError(
            code: .stopped,
            message: "the sync engine stopped because the server rejected its credentials"
                + (cause.map { " (\($0))" } ?? "")
                + "; sign the user in again and create a new SyncEngine with valid credentials and the saved state")
    }

    static let cancelled = SyncEngineError(
        code: .cancelled, message: "the operation was cancelled; its changes are still pending")

    static let delegateReleased = SyncEngineError(
        code: .delegateReleased,
        message: "the sync engine's delegate was released; keep a strong reference to the delegate while the engine runs")
}
