import CloudStoreWire
import Foundation

/// Which values an object may be saved with: the store keeps every value exactly, or refuses it
/// when the object is written, never changes it silently and never leaves it for the server to
/// refuse. One rule for every way an object is written (`@Model` types, `Entity` structs,
/// snapshots); each problem is a sentence that names the value and what to save instead.
///
/// | value | kept or refused |
/// |---|---|
/// | `Double.nan` (`Float.nan`) | refused: SQLite keeps a null in its place |
/// | `±infinity` | kept in an entity declared `mirrored: false`; refused in a mirrored one (JSON, and so a record, cannot carry it) |
/// | `-0.0` | kept as `0.0` (equal to it; SQLite does not keep the sign of a zero) |
/// | a `Date` | kept to the millisecond; refused outside ``Foundation/Date/timestampRange`` (±8.64e15 ms, years −271,821 to 275,760) or when not finite |
/// | `Decimal.nan` | refused: it has no text that reads back |
/// | strings (any character, `"\0"` too), bytes, URLs, UUIDs, integers, JSON | kept |
/// | a mirrored object's inline values (strings, bytes, URLs, JSON) | refused when together they take more than a record carries (``recordBytesLimit``), bytes and encrypted values counted in base64; external-storage bytes travel as assets and do not count |
enum StorableValues {
    /// What a record's fields may hold in all: CloudKit's 1 MiB, the server's default.
    static let recordBytesLimit = 1 << 20

    /// Why `value` cannot be saved in an attribute of a mirrored entity or of one kept on this
    /// device; nil when it can.
    static func problem(with value: AttributeValue, mirrored: Bool) -> String? {
        switch value {
        case .double(let number) where number.isNaN:
            return "is NaN, which the store cannot hold (SQLite keeps a null in its place): save a number, or nil in an optional attribute"
        case .double(let number) where !number.isFinite && mirrored:
            return
                "is \(number), which cannot travel to the server (a record's JSON has no infinity): save a finite number (such as Double.greatestFiniteMagnitude) or nil, or declare the entity mirrored: false to keep it on this device"
        case .date(let date):
            let milliseconds = (date.timeIntervalSince1970 * 1000).rounded()
            guard milliseconds.isFinite, let whole = Int64(exactly: milliseconds), Date.timestampRange.contains(whole) else {
                return
                    "is the date \(date.timeIntervalSince1970) seconds after 1970, outside what the store keeps (milliseconds since 1970 within ±8.64e15, the years −271,821 to 275,760): save a date within them"
            }
            return nil
        case .decimal(let decimal) where decimal.isNaN:
            return "is Decimal.nan, which the store cannot hold (its text does not read back): save a number, or nil in an optional attribute"
        default:
            return nil
        }
    }

    /// About how many bytes a value takes in a record's fields: its text, or its bytes in base64
    /// (an encrypted value travels as sealed bytes, so in base64 too); nil for values too small to
    /// matter and for bytes kept in a file (they travel as assets).
    static func recordBytes(of value: AttributeValue, encrypted: Bool = false) -> Int? {
        let (count, isBytes): (Int, Bool)
        switch value {
        case .string(let text), .json(let text): (count, isBytes) = (text.utf8.count, false)
        case .data(let bytes): (count, isBytes) = (bytes.count, true)
        case .url(let url): (count, isBytes) = (url.absoluteString.utf8.count, false)
        default: return nil
        }
        return isBytes || encrypted ? Base64Bytes.encodedCount(count) : count
    }

    /// Why a mirrored object's `row` (values in the order of `names`; `encrypted` says which
    /// columns are sealed) would not fit in a record; nil when it fits.
    static func recordSizeProblem(_ row: [AttributeValue], names: [String], encrypted: [Bool]) -> String? {
        var total = 0
        var largest: (name: String, bytes: Int)?
        for (index, value) in row.enumerated() {
            guard let bytes = recordBytes(of: value, encrypted: encrypted[index]) else { continue }
            total += bytes
            if bytes > largest?.bytes ?? -1 { largest = (names[index], bytes) }
        }
        guard total > recordBytesLimit, let largest else { return nil }
        return
            "its values take about \(total) bytes in a record, more than the \(recordBytesLimit) a record carries: give the largest attribute (\(largest.name), about \(largest.bytes) bytes) external storage, so its bytes travel as an asset, or save less"
    }
}

extension EntityTable {
    /// Checks the values of `columns` of the row about to be written for object `id`, and for a
    /// mirrored entity the size of the whole row when `checksRecordSize`.
    ///
    /// - Throws: ``StoreError/Code/invalidValue`` naming `Entity.attribute`, the object and what to
    ///   save instead; nothing is written.
    func checkStorable(
        _ row: [AttributeValue], columns indices: some Sequence<Int>, id: UUID, checksRecordSize: Bool
    ) throws {
        let mirrored = entity.isMirrored
        var sizeable = false
        for index in indices {
            let value = row[index]
            if let problem = StorableValues.problem(with: value, mirrored: mirrored) {
                throw StoreError(.invalidValue, "\(name).\(columnNames[index]) of \(id.uuidString) \(problem)")
            }
            if !sizeable, StorableValues.recordBytes(of: value) != nil { sizeable = true }
        }
        if mirrored && checksRecordSize && sizeable,
            let problem = StorableValues.recordSizeProblem(row, names: columnNames, encrypted: encryptedColumns)
        {
            throw StoreError(.invalidValue, "\(name) \(id.uuidString) cannot be saved: \(problem)")
        }
    }
}
