import Foundation
import Logging

/// A log handler that writes one line per message with a millisecond UTC timestamp, the level, the
/// subsystem and the metadata sorted by key:
///
/// ```
/// 2026-11-21T05:40:01.123Z notice cloudstore.mirroring: export finished count=12 duration=0.031s
/// ```
///
/// Executables bootstrap it (`cloudstore` does); libraries never do.
///
/// ```swift
/// LoggingSystem.bootstrap { label in CloudStoreLogHandler(label: label, level: .fromEnvironment) }
/// ```
public struct CloudStoreLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level
    private let label: String
    private let write: @Sendable (String) -> Void

    /// A handler writing to standard error.
    public init(label: String, level: DebugLevel) {
        self.init(label: label, level: level) { line in
            FileHandle.standardError.write(Data((line + "\n").utf8))
        }
    }

    /// A handler writing each line with `write`.
    public init(label: String, level: DebugLevel, write: @escaping @Sendable (String) -> Void) {
        self.label = label
        self.logLevel = level.logLevel
        self.write = write
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { _, new in new }
        write(Self.format(date: Date(), level: event.level, label: label, message: "\(event.message)", metadata: merged))
    }

    /// One log line.
    public static func format(
        date: Date, level: Logger.Level, label: String, message: String, metadata: Logger.Metadata
    ) -> String {
        var line = "\(timestamp(date)) \(level) \(label): \(message)"
        for key in metadata.keys.sorted() {
            line += " \(key)=\(metadata[key]!)"
        }
        return line
    }

    /// `2026-11-21T05:40:01.123Z`.
    public static func timestamp(_ date: Date) -> String {
        let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded())
        let seconds = Date(timeIntervalSince1970: Double(milliseconds.quotientAndRemainder(dividingBy: 1000).quotient))
        var text = seconds.formatted(Date.ISO8601FormatStyle(timeZone: TimeZone(identifier: "UTC")!))
        let fraction = (milliseconds % 1000 + 1000) % 1000
        text.insert(contentsOf: "." + String(String(fraction + 1000).dropFirst()), at: text.index(before: text.endIndex))
        return text
    }
}
