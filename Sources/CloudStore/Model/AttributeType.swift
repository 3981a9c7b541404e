/// The type of an attribute, as a schema file names it.
///
/// | type | Swift | record field |
/// |---|---|---|
/// | `string` | `String` | `STRING` |
/// | `int64` | `Int64`, `Int`, `Int32`, `Int16`, `Int8`, `UInt32`, `UInt16`, `UInt8` | `INT64` |
/// | `double` | `Double`, `Float` | `DOUBLE` |
/// | `bool` | `Bool` | `INT64` 0/1 |
/// | `date` | `Date` (kept to the millisecond, as records carry it) | `TIMESTAMP` |
/// | `data` | `Data` | `BYTES` |
/// | `uuid` | `UUID` | `STRING` |
/// | `url` | `URL` | `STRING` |
/// | `decimal` | `Decimal` | `STRING` (exact) |
/// | `json` | any `Codable` value, stored as JSON | `STRING` |
public enum AttributeType: String, Hashable, Sendable, Codable, CaseIterable {
    /// Text, stored as SQLite `TEXT`.
    case string
    /// A 64-bit signed integer, stored as `INTEGER`.
    case int64
    /// A 64-bit floating-point number, stored as `REAL`.
    case double
    /// True or false, stored as `INTEGER` 1 or 0.
    case bool
    /// A point in time to the millisecond, stored as `INTEGER` milliseconds since 1970.
    case date
    /// Bytes, stored as a `BLOB`, or in a file beside the store with external storage.
    case data
    /// A UUID, stored as upper-case `TEXT`.
    case uuid
    /// A URL, stored as `TEXT`.
    case url
    /// An exact decimal number, stored as its text so no digit is lost.
    case decimal
    /// Any `Codable` value, stored as canonical JSON text (sorted keys).
    case json
}

/// What deleting an object does to the objects it is related to.
public enum DeleteRule: String, Hashable, Sendable, Codable, CaseIterable {
    /// The related objects stay; their inverse relationship is cleared.
    case nullify
    /// The related objects are deleted too.
    case cascade
    /// The delete fails while related objects exist. Not allowed in a mirrored schema: another
    /// device could not honour it.
    case deny
    /// Nothing is done to the related objects.
    case noAction
}
