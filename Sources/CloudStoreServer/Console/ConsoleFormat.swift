import CloudStoreLogging
import CloudStoreWire
import Foundation

/// How the console writes numbers, times, values and links: in words a person reads, one way
/// everywhere. Everything it returns is plain text; the templates escape it.
enum ConsoleFormat {
    /// A count with thousands separators: `1,200`.
    static func count(_ value: Int) -> String {
        let digits = String(value.magnitude)
        var grouped = ""
        for (index, digit) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { grouped += "," }
            grouped.append(digit)
        }
        return (value < 0 ? "-" : "") + grouped
    }

    /// `1 request`, `312 requests`.
    static func count(_ value: Int, _ singular: String, _ plural: String) -> String {
        "\(count(value)) \(value == 1 ? singular : plural)"
    }

    private static var utc: Calendar {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }

    /// `2025-01-05 21:40:12 UTC`.
    static func time(_ date: Date) -> String {
        let parts = utc.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        return "\(day(parts)) \(pad(parts.hour)):\(pad(parts.minute)):\(pad(parts.second)) UTC"
    }

    /// `21:40 UTC` on the day of `now`, else `2025-01-04 21:40 UTC`.
    static func moment(_ date: Date, now: Date) -> String {
        let parts = utc.dateComponents([.year, .month, .day, .hour, .minute], from: date)
        let clock = "\(pad(parts.hour)):\(pad(parts.minute)) UTC"
        return utc.isDate(date, inSameDayAs: now) ? clock : "\(day(parts)) \(clock)"
    }

    private static func day(_ parts: DateComponents) -> String {
        "\(parts.year ?? 0)-\(pad(parts.month))-\(pad(parts.day))"
    }

    private static func pad(_ value: Int?) -> String {
        let value = value ?? 0
        return value < 10 ? "0\(value)" : "\(value)"
    }

    /// A span of time in its two largest units: `45 s`, `3 min 12 s`, `2 h 5 min`, `4 d 2 h`.
    static func span(seconds: TimeInterval) -> String {
        let total = max(0, Int(seconds))
        let (days, hours, minutes, rest) = (total / 86_400, total / 3_600 % 24, total / 60 % 60, total % 60)
        if days > 0 { return "\(days) d \(hours) h" }
        if hours > 0 { return "\(hours) h \(minutes) min" }
        if minutes > 0 { return "\(minutes) min \(rest) s" }
        return "\(rest) s"
    }

    /// A request's duration, as the logs write it.
    static func duration(_ duration: Duration) -> String { LogFormat.duration(duration) }

    /// What the server did since it started, in one sentence: `312 requests since 21:40 UTC, 4
    /// failed; 1,200 records written, 5,400 served; 2 long polls waiting; 0 storage errors; 3
    /// refused by rate limit.`
    static func activity(_ totals: ServerActivity.Totals, started: Date, now: Date) -> String {
        let failed = totals.clientErrors + totals.serverErrors
        return "\(count(totals.requests, "request", "requests")) since \(moment(started, now: now)), \(count(failed)) failed; "
            + "\(count(totals.recordsWritten, "record", "records")) written, \(count(totals.recordsServed)) served; "
            + "\(count(totals.longPollsWaiting, "long poll", "long polls")) waiting; "
            + "\(count(totals.storageErrors, "storage error", "storage errors")); "
            + "\(count(totals.throttled)) refused by rate limit."
    }

    /// Who wrote when: `2025-01-05 21:40:12 UTC by _alice on device-A`.
    static func stamp(_ stamp: Record.Stamp) -> String {
        var text = time(stamp.timestamp)
        if let user = stamp.userRecordName { text += " by \(user)" }
        if let device = stamp.deviceID { text += " on \(device)" }
        return text
    }

    /// A field's type as the schema names it: `STRING`, `INT64_LIST`; `NULL` for no value.
    static func type(of value: FieldValue) -> String {
        value.type?.rawValue ?? value.typeName ?? "NULL"
    }

    /// A field's value as text, at most `limit` characters (then an ellipsis).
    static func value(_ value: FieldValue, limit: Int = .max) -> String {
        let text = self.text(of: value)
        return text.count > limit ? String(text.prefix(limit)) + "…" : text
    }

    private static func text(of value: FieldValue) -> String {
        switch value {
        case .string(let string): string
        case .int64(let number): String(number)
        case .double(let number): String(number)
        case .timestamp(let date): time(date)
        case .bytes(let data): "\(count(data.count, "byte", "bytes")): \(data.prefix(48).base64EncodedString())"
        case .encryptedBytes(let data): "\(count(data.count, "byte", "bytes")), encrypted end to end"
        case .reference(let reference): reference.recordName + (reference.action == .none ? "" : " (\(reference.action.rawValue))")
        case .location(let location): "\(location.latitude), \(location.longitude)"
        case .asset(let asset): "asset, \(count(Int(clamping: asset.size), "byte", "bytes")), SHA-256 \(asset.fileChecksum)"
        case .unknown(_, let json): jsonText(json)
        case .list(let values): "[" + values.map(text(of:)).joined(separator: ", ") + "]"
        case .null: "null"
        }
    }

    private static func jsonText(_ json: JSONValue) -> String {
        (try? String(decoding: WireCoding.encode(json), as: UTF8.self)) ?? "(a value that cannot be shown)"
    }

    /// A console path with its query, every value percent-encoded (`+` and spaces included, as
    /// the router reads `+` as itself).
    static func link(_ path: String, _ parameters: KeyValuePairs<String, String?>) -> String {
        let query = parameters.compactMap { name, value in value.map { "\(name)=\(percentEncoded($0))" } }
        return query.isEmpty ? path : path + "?" + query.joined(separator: "&")
    }

    private static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    static func percentEncoded(_ value: String) -> String {
        value.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
    }
}
