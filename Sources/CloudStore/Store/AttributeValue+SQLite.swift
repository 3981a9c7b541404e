import Foundation
import GRDB
import GRDBSQLite

/// How attribute values are stored in SQLite columns.
///
/// | attribute type | column type | stored as |
/// |---|---|---|
/// | `string` | `TEXT` | the text |
/// | `int64` | `INTEGER` | the integer |
/// | `double` | `REAL` | the double |
/// | `bool` | `INTEGER` | 0 or 1 |
/// | `date` | `INTEGER` | milliseconds since 1970-01-01 UTC |
/// | `data` | `BLOB` | the bytes; with external storage, `TEXT` `"<size>:<base64 SHA-256>"` naming the file |
/// | `uuid` (and the `id` and to-one relationship columns) | `TEXT` | upper-case `8-4-4-4-12` hex |
/// | `url` | `TEXT` | the absolute string |
/// | `decimal` | `TEXT` | the exact decimal text (`"12.50"` → `12.5`) |
/// | `json` | `TEXT` | canonical JSON (sorted keys) |
extension AttributeType {
    /// The declared SQLite column type.
    var columnType: String {
        switch self {
        case .string, .uuid, .url, .decimal, .json: "TEXT"
        case .int64, .bool, .date: "INTEGER"
        case .double: "REAL"
        case .data: "BLOB"
        }
    }
}

/// SQLite's "make your own copy" destructor for bound text and blobs.
let sqliteTransient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

extension AttributeValue {
    /// The value as GRDB stores it, for statements built with GRDB arguments.
    var databaseValue: DatabaseValue {
        switch self {
        case .null: .null
        case .string(let value): value.databaseValue
        case .int64(let value): value.databaseValue
        case .double(let value): value.databaseValue
        case .bool(let value): (value ? 1 : 0 as Int64).databaseValue
        case .date(let value): value.millisecondsSince1970.databaseValue
        case .data(let value): value.databaseValue
        case .externalData(let value): value.storedText.databaseValue
        case .uuid(let value): value.storedText.databaseValue
        case .url(let value): value.absoluteString.databaseValue
        case .decimal(let value): value.storedText.databaseValue
        case .json(let value): value.databaseValue
        }
    }

    /// The text, or NULL.
    static func string(orNull text: String?) -> AttributeValue { text.map(AttributeValue.string) ?? .null }

    /// A SQL literal for the value, as a column's `DEFAULT` clause needs.
    var sqlLiteral: String {
        switch self {
        case .null: return "NULL"
        case .int64(let value): return String(value)
        case .double(let value): return value.isFinite ? "\(value)" : "NULL"
        case .bool(let value): return value ? "1" : "0"
        case .date(let value): return String(value.millisecondsSince1970)
        case .data(let value): return "X'" + value.map { String(format: "%02X", $0) }.joined() + "'"
        case .string(let text), .json(let text): return text.sqlQuoted
        case .externalData(let value): return value.storedText.sqlQuoted
        case .uuid(let value): return value.storedText.sqlQuoted
        case .url(let value): return value.absoluteString.sqlQuoted
        case .decimal(let value): return value.storedText.sqlQuoted
        }
    }

    /// Binds the value to parameter `index` (1-based) of a prepared statement.
    func bind(to statement: OpaquePointer, at index: Int32) -> Int32 {
        switch self {
        case .null: return sqlite3_bind_null(statement, index)
        case .string(let value), .json(let value): return bindText(value, to: statement, at: index)
        case .int64(let value): return sqlite3_bind_int64(statement, index, value)
        case .double(let value): return sqlite3_bind_double(statement, index, value)
        case .bool(let value): return sqlite3_bind_int64(statement, index, value ? 1 : 0)
        case .date(let value): return sqlite3_bind_int64(statement, index, value.millisecondsSince1970)
        case .data(let value):
            return value.withUnsafeBytes { bytes in
                sqlite3_bind_blob(statement, index, bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(bytes.count), sqliteTransient)
            }
        case .externalData(let value): return bindText(value.storedText, to: statement, at: index)
        case .uuid(let value): return bindUUID(value, to: statement, at: index)
        case .url(let value): return bindText(value.absoluteString, to: statement, at: index)
        case .decimal(let value): return bindText(value.storedText, to: statement, at: index)
        }
    }

    /// Reads column `index` (0-based) of the current row as a value of `type`; nil when the stored
    /// value cannot be one (a row written by something else than the store).
    static func read(_ statement: OpaquePointer, column index: Int32, as type: AttributeType) -> AttributeValue? {
        let storage = sqlite3_column_type(statement, index)
        if storage == SQLITE_NULL { return .null }
        switch type {
        case .string: return .string(columnText(statement, index))
        case .json: return .json(columnText(statement, index))
        case .int64:
            switch storage {
            case SQLITE_INTEGER: return .int64(sqlite3_column_int64(statement, index))
            case SQLITE_FLOAT:
                let value = sqlite3_column_double(statement, index)
                return value.rounded() == value && abs(value) < 9.2e18 ? .int64(Int64(value)) : nil
            default: return nil
            }
        case .double:
            guard storage == SQLITE_FLOAT || storage == SQLITE_INTEGER else { return nil }
            return .double(sqlite3_column_double(statement, index))
        case .bool:
            guard storage == SQLITE_INTEGER else { return nil }
            return .bool(sqlite3_column_int64(statement, index) != 0)
        case .date:
            switch storage {
            case SQLITE_INTEGER: return .date(Date(millisecondsSince1970: sqlite3_column_int64(statement, index)))
            case SQLITE_FLOAT: return .date(Date(millisecondsSince1970: Int64(sqlite3_column_double(statement, index))))
            default: return nil
            }
        case .data:
            if storage == SQLITE_TEXT, let external = ExternalData(storedText: columnText(statement, index)) {
                return .externalData(external)
            }
            return .data(columnData(statement, index))
        case .uuid: return columnUUID(statement, index).map(AttributeValue.uuid)
        case .url: return URL(string: columnText(statement, index)).map(AttributeValue.url)
        case .decimal:
            return Decimal(string: columnText(statement, index), locale: Locale(identifier: "en_US_POSIX"))
                .map(AttributeValue.decimal)
        }
    }
}

/// Binds a Swift string as UTF-8 text.
func bindText(_ text: String, to statement: OpaquePointer, at index: Int32) -> Int32 {
    var text = text
    return text.withUTF8 { bytes in
        sqlite3_bind_text(
            statement, index, UnsafeRawPointer(bytes.baseAddress ?? UnsafePointer(bitPattern: 1)!)
                .assumingMemoryBound(to: CChar.self),
            Int32(bytes.count), sqliteTransient)
    }
}

/// Binds a UUID as its stored text without building a String.
func bindUUID(_ uuid: UUID, to statement: OpaquePointer, at index: Int32) -> Int32 {
    withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 36) { buffer in
        uuid.writeText(into: buffer)
        return sqlite3_bind_text(
            statement, index, UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self), 36,
            sqliteTransient)
    }
}

/// The text of column `index` of the current row.
func columnText(_ statement: OpaquePointer, _ index: Int32) -> String {
    guard let text = sqlite3_column_text(statement, index) else { return "" }
    let count = Int(sqlite3_column_bytes(statement, index))
    return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
}

/// The text of column `index` of the current row; nil when it is NULL.
func columnTextOrNil(_ statement: OpaquePointer, _ index: Int32) -> String? {
    sqlite3_column_type(statement, index) == SQLITE_NULL ? nil : columnText(statement, index)
}

/// The bytes of column `index` of the current row (a blob, or a text's UTF-8); empty when NULL.
func columnData(_ statement: OpaquePointer, _ index: Int32) -> Data {
    guard let bytes = sqlite3_column_blob(statement, index) else { return Data() }
    return Data(bytes: bytes, count: Int(sqlite3_column_bytes(statement, index)))
}

/// The bytes of column `index` of the current row; nil when it is NULL.
func columnDataOrNil(_ statement: OpaquePointer, _ index: Int32) -> Data? {
    sqlite3_column_type(statement, index) == SQLITE_NULL ? nil : columnData(statement, index)
}

/// The integer of column `index` of the current row; nil when it is NULL.
func columnInt64OrNil(_ statement: OpaquePointer, _ index: Int32) -> Int64? {
    sqlite3_column_type(statement, index) == SQLITE_NULL ? nil : sqlite3_column_int64(statement, index)
}

/// The UUID stored as text in column `index` of the current row; nil if it is not one.
func columnUUID(_ statement: OpaquePointer, _ index: Int32) -> UUID? {
    guard let text = sqlite3_column_text(statement, index) else { return nil }
    let count = Int(sqlite3_column_bytes(statement, index))
    return UUID(storedText: UnsafeBufferPointer(start: text, count: count))
}

extension String {
    /// The string as a SQL string literal.
    var sqlQuoted: String { "'" + replacingOccurrences(of: "'", with: "''") + "'" }
    /// The string as a quoted SQL identifier.
    var quotedIdentifier: String { "\"" + replacingOccurrences(of: "\"", with: "\"\"") + "\"" }
}

extension Decimal {
    /// The exact text a decimal is stored as.
    var storedText: String { description }
}

extension UUID {
    /// The stored text: upper-case hex in the 8-4-4-4-12 form, as `uuidString` writes it.
    var storedText: String {
        String(unsafeUninitializedCapacity: 36) { buffer in
            writeText(into: buffer)
            return 36
        }
    }

    /// Writes the 36 bytes of the stored text.
    func writeText(into buffer: UnsafeMutableBufferPointer<UInt8>) {
        let hex: StaticString = "0123456789ABCDEF"
        hex.withUTF8Buffer { digits in
            withUnsafeBytes(of: uuid) { bytes in
                var out = 0
                for (position, byte) in bytes.enumerated() {
                    if position == 4 || position == 6 || position == 8 || position == 10 {
                        buffer[out] = 0x2D
                        out += 1
                    }
                    buffer[out] = digits[Int(byte >> 4)]
                    buffer[out + 1] = digits[Int(byte & 0x0F)]
                    out += 2
                }
            }
        }
    }

    /// Reads a UUID's text in the 8-4-4-4-12 form (either case), exactly; nil if it is not one.
    /// Not Foundation's `UUID(uuidString:)`: on Linux it parses with `sscanf` (about 1% of a
    /// device's CPU in a bulk sync) and accepts a sign, `0x` or a space inside a group
    /// (`"+621E1F8-…"` reads as `0621E1F8-…`), so a record whose name only looks like an object's
    /// id would become an object under another name.
    init?(text: String) {
        var text = text
        guard let uuid = text.withUTF8({ UUID(storedText: $0) }) else { return nil }
        self = uuid
    }

    /// Reads the stored text (either case); nil if it is not a UUID.
    init?(storedText text: UnsafeBufferPointer<UInt8>) {
        guard text.count == 36 else { return nil }
        var bytes: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        let valid = withUnsafeMutableBytes(of: &bytes) { out -> Bool in
            var position = 0
            var index = 0
            while index < 36 {
                if index == 8 || index == 13 || index == 18 || index == 23 {
                    guard text[index] == 0x2D else { return false }
                    index += 1
                    continue
                }
                guard let high = Self.hexValue(text[index]), let low = Self.hexValue(text[index + 1]) else { return false }
                out[position] = high << 4 | low
                position += 1
                index += 2
            }
            return true
        }
        guard valid else { return nil }
        self.init(uuid: bytes)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: byte - 0x30
        case 0x41...0x46: byte - 0x41 + 10
        case 0x61...0x66: byte - 0x61 + 10
        default: nil
        }
    }
}
