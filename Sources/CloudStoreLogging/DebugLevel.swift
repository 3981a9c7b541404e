import Foundation
import Logging
import Synchronization

/// How much CloudStore logs, from 0 (errors and warnings) to 4 (everything), as
/// `-com.apple.CoreData.CloudKitDebug N` does for Core Data + CloudKit.
///
/// Set it with the environment variable `CLOUDSTORE_DEBUG=N` or the CLI's `--debug N`.
///
/// | level | what appears | swift-log level |
/// |---|---|---|
/// | 0 (default) | errors and warnings | `.warning` |
/// | 1 | lifecycle: setup, each import/export start and end with counts and duration, account changes | `.notice` |
/// | 2 | each request and batch: zone IDs, record counts, sync tokens, retries and back-offs | `.info` |
/// | 3 | each record: record IDs, change types, changed keys, conflicts and their resolution | `.debug` |
/// | 4 | everything: request and response bodies, SQL, scheduler decisions | `.trace` |
public struct DebugLevel: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    public let rawValue: Int

    /// A level from 0 to 4; nil outside that range.
    public init?(rawValue: Int) {
        guard (0...4).contains(rawValue) else { return nil }
        self.rawValue = rawValue
    }

    public static let errors = DebugLevel(rawValue: 0)!
    public static let lifecycle = DebugLevel(rawValue: 1)!
    public static let requests = DebugLevel(rawValue: 2)!
    public static let records = DebugLevel(rawValue: 3)!
    public static let everything = DebugLevel(rawValue: 4)!

    /// The environment variable that sets the level.
    public static let environmentVariable = "CLOUDSTORE_DEBUG"

    /// Reads a level as `CLOUDSTORE_DEBUG` or `--debug` write it: "0" to "4".
    public init?(parsing text: String) {
        guard let number = Int(text.trimmingCharacters(in: .whitespaces)) else { return nil }
        self.init(rawValue: number)
    }

    /// The swift-log level that shows this level's messages and those of the levels below it.
    public var logLevel: Logger.Level {
        switch rawValue {
        case 0: .warning
        case 1: .notice
        case 2: .info
        case 3: .debug
        default: .trace
        }
    }

    public static func < (lhs: DebugLevel, rhs: DebugLevel) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String { String(rawValue) }

    /// The level `CLOUDSTORE_DEBUG` sets, 0 when it is unset. An invalid value (`loud`, `7`) is
    /// reported once on standard error and treated as 0.
    public static var fromEnvironment: DebugLevel {
        level(fromEnvironment: ProcessInfo.processInfo.environment) { message in
            FileHandle.standardError.write(Data((message + "\n").utf8))
        }
    }

    /// The level an environment sets; `report` is called once per process for an invalid value.
    public static func level(
        fromEnvironment environment: [String: String], report: (String) -> Void
    ) -> DebugLevel {
        guard let text = environment[environmentVariable], !text.isEmpty else { return .errors }
        if let level = DebugLevel(parsing: text) { return level }
        let first = invalidValuesReported.withLock { $0.insert(text).inserted }
        if first {
            report("cloudstore: \(environmentVariable)=\(text) is not a level from 0 to 4; using 0 (errors and warnings)")
        }
        return .errors
    }

    private static let invalidValuesReported = Mutex<Set<String>>([])
}

extension Logger {
    /// A logger for a CloudStore subsystem (`cloudstore.store`, `cloudstore.mirroring`,
    /// `cloudstore.sync`, `cloudstore.http`, `cloudstore.server`, …) whose level follows
    /// `CLOUDSTORE_DEBUG`. It goes to whatever log handler the app bootstrapped.
    ///
    /// ```swift
    /// let logger = Logger.cloudStore("mirroring")
    /// logger.notice("export finished", metadata: ["count": "12"])
    /// ```
    public static func cloudStore(_ subsystem: String, level: DebugLevel? = nil) -> Logger {
        var logger = Logger(label: "cloudstore.\(subsystem)")
        logger.logLevel = (level ?? .fromEnvironment).logLevel
        return logger
    }
}
