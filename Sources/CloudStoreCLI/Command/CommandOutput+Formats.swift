import Foundation

extension CommandOutput {
    /// Prints `value` as pretty JSON with sorted keys and dates to the millisecond (`--json`).
    func printJSON(_ value: some Encodable) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(CommandOutput.timestamp(date))
        }
        print(String(decoding: try encoder.encode(value), as: UTF8.self))
    }

    /// Prints each line of `table`.
    func print(_ table: TextTable) {
        for line in table.lines { print(line) }
    }

    /// A date as commands print it: UTC, to the millisecond (`2025-06-01T08:00:00.123Z`).
    static func timestamp(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }

    /// A duration in seconds with two decimals (`0.42s`).
    static func seconds(_ duration: Duration) -> String {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        return String(format: "%.2fs", seconds)
    }
}
