import Foundation
import Logging

/// `CLOUDSTORE_DEBUG=N` / `--debug N` (DESIGN.md §7) as a swift-log level: 0 warnings and errors,
/// 1 lifecycle, 2 each request, 3 each record, 4 everything.
enum DebugLevel {
    static func logLevel(_ level: Int?) -> Logger.Level {
        let level = level ?? ProcessInfo.processInfo.environment["CLOUDSTORE_DEBUG"].flatMap(Int.init) ?? 0
        switch level {
        case ...0: return .warning
        case 1: return .notice
        case 2: return .info
        case 3: return .debug
        default: return .trace
        }
    }

    /// A logger writing to standard error at the level, without bootstrapping the logging system.
    static func logger(label: String, level: Int?) -> Logger {
        var logger = Logger(label: label) { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = logLevel(level)
        return logger
    }
}
