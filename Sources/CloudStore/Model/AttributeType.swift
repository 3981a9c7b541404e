/// The type of an attribute, as a schema file names it.
///
/// | type | Swift | record field |
/// |---|---|---|
/// | `string` | `String` | `STRING` |
/// | `int64` | `Int64`, `Int`, `Int32`, `Int16`, `Int8` | `INT64` |
/// | `double` | `Double`, `Float` | `DOUBLE` |
/// | `bool` | `Bool` | `INT64` 0/1 |
/// | `date` | `Date` (kept to the millisecond, as records carry it) | `TIMESTAMP` |
/// | `data` | `Data` | `BYTES` |
/// | `uuid` | `UUID` | `STRING` |
/// | `url` | `URL` | `STRING` |
/// | `decimal` | `Decimal` | `STRING` (exact) |
/// | `json` | any `Codable` value, stored as JSON | `STRING` |
public enum AttributeType: String, Hashable, Sendable, Codable, CaseIterable {
    case string, int64, double, bool, date, data, uuid, url, decimal, json
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
