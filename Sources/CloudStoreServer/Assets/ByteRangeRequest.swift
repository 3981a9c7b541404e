import Foundation

/// What a download serves for a `Range` header (RFC 9110 §14.2), for an asset of a size: one range
/// of `bytes=a-b`, `bytes=a-` or `bytes=-n`. A header in another form (another unit, several
/// ranges, not a range at all) is ignored, as the RFC allows: the whole asset is served.
enum ByteRangeRequest: Hashable, Sendable {
    /// 200 with every byte.
    case whole
    /// 206 with these bytes.
    case part(Range<Int64>)
    /// 416: the range starts past the end (or asks for the last 0 bytes).
    case unsatisfiable

    init(header: String?, size: Int64) {
        guard let header, header.hasPrefix("bytes="), !header.contains(",") else {
            self = .whole
            return
        }
        let spec = header.dropFirst("bytes=".count).trimmingCharacters(in: .whitespaces)
        guard let dash = spec.firstIndex(of: "-") else {
            self = .whole
            return
        }
        let first = spec[..<dash]
        let last = spec[spec.index(after: dash)...]
        if first.isEmpty {
            guard let suffix = Int64(last), suffix >= 0 else {
                self = .whole
                return
            }
            self = suffix == 0 || size == 0 ? .unsatisfiable : .part(max(0, size - suffix)..<size)
            return
        }
        guard let start = Int64(first), start >= 0 else {
            self = .whole
            return
        }
        var end = size - 1
        if !last.isEmpty {
            guard let given = Int64(last), given >= start else {
                self = .whole
                return
            }
            end = min(given, size - 1)
        }
        self = start >= size ? .unsatisfiable : .part(start..<(end + 1))
    }
}
