import CloudStoreWire
import Foundation

/// The value of one attribute (or to-one relationship) of an object, independent of Swift types,
/// SQLite columns and record fields. The store, history, conflict log and record mapping all speak it.
public enum AttributeValue: Hashable, Sendable {
    /// No value: an optional attribute left empty, or a to-one relationship to nothing.
    case null
    /// A `string` attribute's text.
    case string(String)
    /// An `int64` attribute's integer, whatever integer type the Swift property has.
    case int64(Int64)
    /// A `double` attribute's number.
    case double(Double)
    /// A `bool` attribute's value.
    case bool(Bool)
    /// A date, kept to the millisecond (as records carry it).
    case date(Date)
    /// A `data` attribute's bytes, kept in its row.
    case data(Data)
    /// Bytes of an attribute with external storage, kept in a file beside the store.
    case externalData(ExternalData)
    /// A `uuid` attribute's value, or the related object's id for a to-one relationship.
    case uuid(UUID)
    /// A `url` attribute's value.
    case url(URL)
    /// A `decimal` attribute's exact value.
    case decimal(Decimal)
    /// A JSON document, as canonical text (sorted keys), so equal values compare equal.
    case json(String)

    /// Whether this is ``null``.
    public var isNull: Bool { self == .null }

    /// The attribute type this value belongs to; nil for `null`.
    public var type: AttributeType? {
        switch self {
        case .null: nil
        case .string: .string
        case .int64: .int64
        case .double: .double
        case .bool: .bool
        case .date: .date
        case .data, .externalData: .data
        case .uuid: .uuid
        case .url: .url
        case .decimal: .decimal
        case .json: .json
        }
    }

    /// A date rounded to the millisecond, as every date attribute is stored.
    public static func date(milliseconds date: Date) -> AttributeValue {
        .date(Date(millisecondsSince1970: date.millisecondsSince1970))
    }
}

extension AttributeValue: CustomStringConvertible {
    /// The value as logs and messages show it: strings quoted, dates in ISO 8601 with
    /// milliseconds, bytes as a count.
    public var description: String {
        switch self {
        case .null: "null"
        case .string(let value): String(reflecting: value)
        case .int64(let value): String(value)
        case .double(let value): String(value)
        case .bool(let value): String(value)
        case .date(let value): value.formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true))
        case .data(let value): "<\(value.count) bytes>"
        case .externalData(let value): value.description
        case .uuid(let value): value.uuidString
        case .url(let value): value.absoluteString
        case .decimal(let value): value.description
        case .json(let value): value
        }
    }
}

/// A tagged JSON form, `{"string": "Hi"}`, `{"date": 1763700000000}` (milliseconds), `{"data":
/// "<base64>"}`, `null`, used where values are stored as JSON (history tombstones, the conflict log).
extension AttributeValue: Codable {
    private enum CodingKeys: String, CodingKey {
        case string, int64, double, bool, date, data, externalData, uuid, url, decimal, json
    }

    /// Decodes the tagged form; `null` decodes as ``null``.
    public init(from decoder: any Decoder) throws {
        if let single = try? decoder.singleValueContainer(), single.decodeNil() {
            self = .null
            return
        }
        let container = try decoder.container(keyedBy: CodingKeys.self)
        guard let key = container.allKeys.first, container.allKeys.count == 1 else {
            throw DecodingError.dataCorrupted(
                DecodingError.Context(
                    codingPath: decoder.codingPath,
                    debugDescription: "an attribute value is an object with exactly one type key"))
        }
        switch key {
        case .string: self = .string(try container.decode(String.self, forKey: key))
        case .int64: self = .int64(try container.decode(Int64.self, forKey: key))
        case .double: self = .double(try container.decode(Double.self, forKey: key))
        case .bool: self = .bool(try container.decode(Bool.self, forKey: key))
        case .date: self = .date(Date(millisecondsSince1970: try container.decode(Int64.self, forKey: key)))
        case .data:
            let text = try container.decode(String.self, forKey: key)
            guard let data = Data(base64Encoded: text) else {
                throw DecodingError.dataCorruptedError(forKey: key, in: container, debugDescription: "not base64")
            }
            self = .data(data)
        case .externalData:
            let text = try container.decode(String.self, forKey: key)
            guard let external = ExternalData(storedText: text) else {
                throw DecodingError.dataCorruptedError(
                    forKey: key, in: container, debugDescription: "not \"<size>:<base64 SHA-256>\"")
            }
            self = .externalData(external)
        case .uuid: self = .uuid(try container.decode(UUID.self, forKey: key))
        case .url: self = .url(try container.decode(URL.self, forKey: key))
        case .decimal:
            let text = try container.decode(String.self, forKey: key)
            guard let decimal = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")) else {
                throw DecodingError.dataCorruptedError(forKey: key, in: container, debugDescription: "not a decimal")
            }
            self = .decimal(decimal)
        case .json: self = .json(try container.decode(String.self, forKey: key))
        }
    }

    /// Encodes the tagged form: one key naming the type, dates in milliseconds, bytes in base64.
    public func encode(to encoder: any Encoder) throws {
        if case .null = self {
            var single = encoder.singleValueContainer()
            try single.encodeNil()
            return
        }
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .null: break
        case .string(let value): try container.encode(value, forKey: .string)
        case .int64(let value): try container.encode(value, forKey: .int64)
        case .double(let value): try container.encode(value, forKey: .double)
        case .bool(let value): try container.encode(value, forKey: .bool)
        case .date(let value): try container.encode(value.millisecondsSince1970, forKey: .date)
        case .data(let value): try container.encode(value.base64EncodedString(), forKey: .data)
        case .externalData(let value): try container.encode(value.storedText, forKey: .externalData)
        case .uuid(let value): try container.encode(value, forKey: .uuid)
        case .url(let value): try container.encode(value, forKey: .url)
        case .decimal(let value): try container.encode(value.description, forKey: .decimal)
        case .json(let value): try container.encode(value, forKey: .json)
        }
    }
}

extension AttributeValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByNilLiteral
{
    /// A string literal as ``string(_:)``.
    public init(stringLiteral value: String) { self = .string(value) }
    /// An integer literal as ``int64(_:)``.
    public init(integerLiteral value: Int64) { self = .int64(value) }
    /// A floating-point literal as ``double(_:)``.
    public init(floatLiteral value: Double) { self = .double(value) }
    /// `true` or `false` as ``bool(_:)``.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// `nil` as ``null``.
    public init(nilLiteral: ()) { self = .null }
}

extension AttributeValue: JSONBytesWritable {
    /// The JSON of the Codable conformance (`{"string":"…"}`, `null`, …), written straight to
    /// bytes: record metadata keeps attribute values this way.
    public func write(to json: inout JSONBytes) throws {
        guard self != .null else {
            json.null()
            return
        }
        try json.object { json in
            switch self {
            case .null: break
            case .string(let value): json.member("string", string: value)
            case .int64(let value): json.member("int64", int: value)
            case .double(let value): try json.member("double", double: value)
            case .bool(let value): json.member("bool", bool: value)
            case .date(let value): json.member("date", int: value.millisecondsSince1970)
            case .data(let value): json.member("data", string: value.base64EncodedString())
            case .externalData(let value): json.member("externalData", string: value.storedText)
            case .uuid(let value): json.member("uuid", string: value.uuidString)
            case .url(let value): json.member("url", string: value.absoluteString)
            case .decimal(let value): json.member("decimal", string: value.description)
            case .json(let value): json.member("json", string: value)
            }
        }
    }
}
