import Foundation

/// The value of one record field, in every type the wire protocol lists (<doc:WireProtocol> §2).
///
/// On the wire a field is `{"value": V, "type": T}`: timestamps are integer milliseconds since
/// 1970, bytes are base64, booleans travel as `INT64` 0/1, lists are `X_LIST` (an empty one is
/// `UNKNOWN_LIST`), and `{"value": null}` in an update clears the field.
///
/// ```swift
/// var fields: [String: FieldValue] = [
///     "title": "Groceries",                  // .string
///     "pinned": .bool(true),                 // .int64(1)
///     "created": .timestamp(Date()),
///     "tags": .list([.string("home"), .string("food")]),
/// ]
/// ```
public enum FieldValue: Hashable, Sendable {
    case string(String)
    case int64(Int64)
    case double(Double)
    case timestamp(Date)
    case bytes(Data)
    case reference(Reference)
    case location(Location)
    /// Large binary data kept out of line (<doc:WireProtocol> §7).
    case asset(Asset)
    /// A list of values of one scalar type.
    case list([FieldValue])
    /// No value: in an update, clears the field.
    case null
    /// A value of a type this version does not know, kept verbatim so it survives a round trip.
    case unknown(type: String, value: JSONValue)
    /// Ciphertext of an end-to-end encrypted field (`ENCRYPTED_BYTES`, base64 on the wire): the
    /// server stores and serves it as opaque bytes (<doc:WireProtocol> §9, ``FieldEncryption``).
    case encryptedBytes(Data)

    /// A boolean, which travels as `INT64` 0 or 1.
    public static func bool(_ value: Bool) -> FieldValue { .int64(value ? 1 : 0) }

    /// The value's wire type; nil for `null`.
    public var type: FieldType? {
        switch self {
        case .string: .string
        case .int64: .int64
        case .double: .double
        case .timestamp: .timestamp
        case .bytes: .bytes
        case .encryptedBytes: .encryptedBytes
        case .reference: .reference
        case .location: .location
        case .asset: .asset
        case .list(let elements): elements.first?.type.map { .list($0) } ?? .unknownList
        case .null, .unknown: nil
        }
    }

    /// The wire name of the value's type, including types this version does not know.
    public var typeName: String? {
        if case .unknown(let type, _) = self { return type }
        return type?.rawValue
    }

    public var isNull: Bool { self == .null }
}

extension FieldValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int64(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
}

// MARK: - Milliseconds

extension Date {
    /// The milliseconds since 1970 a `TIMESTAMP` may carry: ±100,000,000 days, the range of
    /// ECMAScript dates. Within it a timestamp survives the trip through `Date` exactly; a value
    /// outside it does not decode.
    public static let timestampRange: ClosedRange<Int64> = -8_640_000_000_000_000...8_640_000_000_000_000

    /// Milliseconds since 1970-01-01 UTC, rounded, as `TIMESTAMP` values travel; a date beyond what
    /// 64 bits hold gives `Int64.min` or `Int64.max` rather than trapping.
    public var millisecondsSince1970: Int64 {
        let milliseconds = (timeIntervalSince1970 * 1000).rounded()
        return Int64(exactly: milliseconds) ?? (milliseconds > 0 ? .max : .min)
    }

    /// The date of a `TIMESTAMP` value.
    public init(millisecondsSince1970 milliseconds: Int64) {
        self.init(timeIntervalSince1970: Double(milliseconds) / 1000)
    }
}

// MARK: - Coding

extension CodingUserInfoKey {
    /// Set to `true` in an encoder's `userInfo` to write `INT64` values as strings, as a request's
    /// `numbersAsStrings: true` asks.
    public static let numbersAsStrings = CodingUserInfoKey(rawValue: "cloudstore.numbersAsStrings")!
}

extension FieldValue: Codable {
    enum CodingKeys: String, CodingKey {
        case value, type
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let typeName = try container.decodeIfPresent(String.self, forKey: .type)
        let isNull = try !container.contains(.value) || container.decodeNil(forKey: .value)
        if isNull {
            self = .null
            return
        }
        guard let typeName else {
            self = try Self.inferred(from: container.superDecoder(forKey: .value))
            return
        }
        guard let type = FieldType(rawValue: typeName) else {
            self = .unknown(type: typeName, value: try container.decode(JSONValue.self, forKey: .value))
            return
        }
        self = try Self.decode(type, from: container.superDecoder(forKey: .value))
    }

    /// Decodes a value of a known type.
    static func decode(_ type: FieldType, from decoder: any Decoder) throws -> FieldValue {
        switch type {
        case .string:
            return .string(try decoder.singleValueContainer().decode(String.self))
        case .int64:
            return .int64(try decodeInt64(from: decoder))
        case .double:
            let container = try decoder.singleValueContainer()
            if let string = try? container.decode(String.self) {
                guard let value = Double(string), value.isFinite else {
                    throw DecodingError.dataCorruptedError(
                        in: container, debugDescription: "DOUBLE value \"\(string.prefix(64))\" is not a finite number")
                }
                return .double(value)
            }
            return .double(try finite(container.decode(Double.self), in: decoder))
        case .timestamp:
            return .timestamp(try decodeTimestamp(from: decoder))
        case .bytes:
            let container = try decoder.singleValueContainer()
            let string = try container.decode(String.self)
            guard let data = Data(base64Encoded: string) else {
                throw DecodingError.dataCorruptedError(
                    in: container, debugDescription: "BYTES value is not valid base64")
            }
            return .bytes(data)
        case .encryptedBytes:
            let container = try decoder.singleValueContainer()
            guard let data = Data(base64Encoded: try container.decode(String.self)) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "ENCRYPTED_BYTES value is not valid base64")
            }
            return .encryptedBytes(data)
        case .reference:
            return .reference(try Reference(from: decoder))
        case .location:
            return .location(try Location(from: decoder))
        case .asset:
            return .asset(try Asset(from: decoder))
        case .list(let element):
            var container = try decoder.unkeyedContainer()
            var values: [FieldValue] = []
            while !container.isAtEnd {
                values.append(try decode(element, from: container.superDecoder()))
            }
            return .list(values)
        case .unknownList:
            var container = try decoder.unkeyedContainer()
            var values: [FieldValue] = []
            while !container.isAtEnd {
                values.append(try inferred(from: container.superDecoder()))
            }
            return try homogeneousList(values, in: decoder)
        }
    }

    /// A `DOUBLE` that JSON can carry back: not infinite, not NaN (a literal like `1e400` reads as infinity).
    private static func finite(_ value: Double, in decoder: any Decoder) throws -> Double {
        guard value.isFinite else {
            throw DecodingError.dataCorrupted(
                DecodingError.Context(codingPath: decoder.codingPath, debugDescription: "DOUBLE value \(value) is not a finite number"))
        }
        return value
    }

    /// A `TIMESTAMP`: milliseconds within ``Foundation/Date/timestampRange``.
    static func decodeTimestamp(from decoder: any Decoder) throws -> Date {
        let milliseconds = try decodeInt64(from: decoder, roundingFractions: true)
        guard Date.timestampRange.contains(milliseconds) else {
            throw DecodingError.dataCorrupted(
                DecodingError.Context(
                    codingPath: decoder.codingPath,
                    debugDescription: "TIMESTAMP \(milliseconds) is out of range: use milliseconds since 1970 within ±8.64e15"))
        }
        return Date(millisecondsSince1970: milliseconds)
    }

    private static func decodeInt64(from decoder: any Decoder, roundingFractions: Bool = false) throws -> Int64 {
        let container = try decoder.singleValueContainer()
        if let value = try? container.decode(Int64.self) { return value }
        if let string = try? container.decode(String.self) {
            guard let value = Int64(string) else {
                throw DecodingError.dataCorruptedError(
                    in: container, debugDescription: "integer value \"\(string)\" is not an integer")
            }
            return value
        }
        if roundingFractions, let double = try? container.decode(Double.self), double.isFinite,
            abs(double) < 9.2e18
        {
            return Int64(double.rounded())
        }
        throw DecodingError.dataCorruptedError(
            in: container, debugDescription: "expected an integer that fits in 64 bits")
    }

    /// Infers the type of a value sent without `type`, as CloudKit allows on save.
    static func inferred(from decoder: any Decoder) throws -> FieldValue {
        let json = try JSONValue(from: decoder)
        switch json {
        case .null:
            return .null
        case .bool(let value):
            return .bool(value)
        case .number(let value):
            // Read again as an integer: the tree holds a Double, which rounds above 2^53.
            if value.rounded() == value, let integer = try? decoder.singleValueContainer().decode(Int64.self) {
                return .int64(integer)
            }
            return .double(try finite(value, in: decoder))
        case .string(let value):
            return .string(value)
        case .object(let object):
            if object["recordName"] != nil { return .reference(try Reference(from: decoder)) }
            if object["latitude"] != nil, object["longitude"] != nil { return .location(try Location(from: decoder)) }
            if object["fileChecksum"] != nil || object["downloadURL"] != nil || object["receipt"] != nil {
                return .asset(try Asset(from: decoder))
            }
            throw DecodingError.dataCorrupted(
                DecodingError.Context(
                    codingPath: decoder.codingPath,
                    debugDescription: "cannot infer the type of this object value; send \"type\" with it"))
        case .array:
            var container = try decoder.unkeyedContainer()
            var values: [FieldValue] = []
            while !container.isAtEnd {
                values.append(try inferred(from: container.superDecoder()))
            }
            return try homogeneousList(values, in: decoder)
        }
    }

    private static func homogeneousList(_ values: [FieldValue], in decoder: any Decoder) throws -> FieldValue {
        guard let first = values.first?.type else { return .list(values) }
        if first.isList || values.contains(where: { $0.type != first }) {
            throw DecodingError.dataCorrupted(
                DecodingError.Context(
                    codingPath: decoder.codingPath,
                    debugDescription: "a list must hold values of one scalar type"))
        }
        return .list(values)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        if case .null = self {
            try container.encodeNil(forKey: .value)
            return
        }
        try encodeValue(to: container.superEncoder(forKey: .value))
        try container.encodeIfPresent(typeName, forKey: .type)
    }

    private func encodeValue(to encoder: any Encoder) throws {
        switch self {
        case .string(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .int64(let value):
            var container = encoder.singleValueContainer()
            if encoder.userInfo[.numbersAsStrings] as? Bool == true {
                try container.encode(String(value))
            } else {
                try container.encode(value)
            }
        case .double(let value):
            guard value.isFinite else {
                throw EncodingError.invalidValue(
                    value,
                    EncodingError.Context(
                        codingPath: encoder.codingPath, debugDescription: "JSON cannot carry \(value)"))
            }
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .timestamp(let date):
            var container = encoder.singleValueContainer()
            try container.encode(date.millisecondsSince1970)
        case .bytes(let data), .encryptedBytes(let data):
            var container = encoder.singleValueContainer()
            try container.encode(data.base64EncodedString())
        case .reference(let reference):
            try reference.encode(to: encoder)
        case .location(let location):
            try location.encode(to: encoder)
        case .asset(let asset):
            try asset.encode(to: encoder)
        case .unknown(_, let json):
            try json.encode(to: encoder)
        case .list(let values):
            var container = encoder.unkeyedContainer()
            for value in values {
                try value.encodeValue(to: container.superEncoder())
            }
        case .null:
            var container = encoder.singleValueContainer()
            try container.encodeNil()
        }
    }
}
