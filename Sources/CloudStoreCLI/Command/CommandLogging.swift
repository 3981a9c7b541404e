import CloudStoreLogging
import Logging

/// The `cloudstore` commands' logging system: bootstrapped once per process, so that loggers
/// the libraries create themselves (`Logger(label:)`) print `CloudStoreLogHandler` lines too.
///
/// The handler of a logger made while a command runs writes to that command's standard error at
/// its level (the task's ``CommandContext/current``), so commands run in parallel in one process
/// (as tests do) each get their own lines. A logger made outside any command writes to the
/// process's standard error at the level of `CLOUDSTORE_DEBUG`.
enum CommandLogging {
    /// Bootstraps swift-log on first use; later calls do nothing.
    static func bootstrap() {
        _ = bootstrapped
    }

    private static let bootstrapped: Void = LoggingSystem.bootstrap { label in
        CommandContext.current?.logHandler(label: label)
            ?? CloudStoreLogHandler(label: label, level: .fromEnvironment)
    }
}
