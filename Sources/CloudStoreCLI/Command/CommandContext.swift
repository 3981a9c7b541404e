import CloudStoreLogging
import Foundation
import Logging

/// What a running command works with: where it writes, the environment it reads, and how much
/// it logs.
///
/// Commands receive it in ``CloudStoreSubcommand/run(in:)``. It is also bound to the running task,
/// so every logger created while the command runs, by the command or by the libraries it calls,
/// writes to this context's standard error at its level.
public struct CommandContext: Sendable {
    public var output: CommandOutput
    public var environment: [String: String]
    /// `--debug N` when given, else `CLOUDSTORE_DEBUG`, else 0.
    public var debugLevel: DebugLevel
    /// Whether SIGTERM and SIGINT stop a long-running command gracefully (the executable), rather
    /// than only cancelling its task (commands run inside a test or an app).
    public var handlesSignals: Bool

    public init(
        output: CommandOutput, environment: [String: String], debugLevel: DebugLevel, handlesSignals: Bool = false
    ) {
        self.output = output
        self.environment = environment
        self.debugLevel = debugLevel
        self.handlesSignals = handlesSignals
    }

    /// A context whose level is `--debug` when given, else the environment's `CLOUDSTORE_DEBUG`.
    /// An invalid `CLOUDSTORE_DEBUG` is reported once per process on `output`'s standard error and
    /// counts as 0.
    public init(output: CommandOutput, environment: [String: String], debug: DebugLevel?, handlesSignals: Bool = false) {
        let level =
            debug
            ?? DebugLevel.level(fromEnvironment: environment) { notice in output.printError(notice) }
        self.init(output: output, environment: environment, debugLevel: level, handlesSignals: handlesSignals)
    }

    /// The context of the command running in this task, if any.
    @TaskLocal static var current: CommandContext?

    /// A logger for a CloudStore subsystem (`server`, `store`, `history`, `mirroring`, `sync`,
    /// `http`) at this context's level, writing to this context's standard error.
    ///
    /// ```swift
    /// let logger = context.logger("store")   // label "cloudstore.store"
    /// ```
    public func logger(_ subsystem: String) -> Logger {
        var logger = Logger(label: "cloudstore.\(subsystem)", factory: logHandler)
        logger.logLevel = debugLevel.logLevel
        return logger
    }

    /// A handler writing `CloudStoreLogHandler` lines to this context's standard error at its level.
    func logHandler(label: String) -> any LogHandler {
        let output = output
        return CloudStoreLogHandler(label: label, level: debugLevel) { line in output.printError(line) }
    }
}
