import Foundation

/// How Swift values map to attribute values and back: one table used by the entity encoder, the
/// decoder and the type check, so the three always agree.
enum AttributeConversion {
    /// The attribute value of a Swift value for an attribute of `type`; nil when the Swift type does
    /// not fit the attribute type (the caller reports it, naming the property).
    static func attributeValue(_ value: Any, as type: AttributeType) -> AttributeValue? {
        switch type {
        case .string: return (value as? String).map(AttributeValue.string)
        case .int64: return integer(value).map(AttributeValue.int64)
        case .double:
            if let double = value as? Double { return .double(double) }
            if let float = value as? Float { return .double(Double(float)) }
            return nil
        case .bool: return (value as? Bool).map(AttributeValue.bool)
        case .date: return (value as? Date).map { .date(milliseconds: $0) }
        case .data: return (value as? Data).map(AttributeValue.data)
        case .uuid: return (value as? UUID).map(AttributeValue.uuid)
        case .url: return (value as? URL).map(AttributeValue.url)
        case .decimal: return (value as? Decimal).map(AttributeValue.decimal)
        case .json:
            guard let encodable = value as? any Encodable else { return nil }
            return (try? AttributeValue.canonicalJSON(encodable)).map(AttributeValue.json)
        }
    }

    private static func integer(_ value: Any) -> Int64? {
        switch value {
        case let value as Int64: value
        case let value as Int: Int64(value)
        case let value as Int32: Int64(value)
        case let value as Int16: Int64(value)
        case let value as Int8: Int64(value)
        case let value as UInt8: Int64(value)
        case let value as UInt16: Int64(value)
        case let value as UInt32: Int64(value)
        case let value as UInt64: Int64(exactly: value)
        case let value as UInt: Int64(exactly: value)
        default: nil
        }
    }

    /// Whether a Swift type stores values of an attribute type directly (without going through
    /// `Codable`, as raw-value enums do).
    static func isDirect(_ swiftType: Any.Type, for type: AttributeType) -> Bool {
        switch type {
        case .string: swiftType == String.self
        case .int64:
            [Int64.self, Int.self, Int32.self, Int16.self, Int8.self, UInt8.self, UInt16.self, UInt32.self,
             UInt64.self, UInt.self].contains { $0 == swiftType }
        case .double: swiftType == Double.self || swiftType == Float.self
        case .bool: swiftType == Bool.self
        case .date: swiftType == Date.self
        case .data: swiftType == Data.self
        case .uuid: swiftType == UUID.self
        case .url: swiftType == URL.self
        case .decimal: swiftType == Decimal.self
        case .json: true
        }
    }

    /// A Swift value of `swiftType` read from an attribute value; nil when the stored value does not
    /// fit the Swift type (an integer too large for `Int8`, say).
    static func swiftValue<T: Decodable>(_ value: AttributeValue, as swiftType: T.Type) throws -> T? {
        switch value {
        case .string(let string): if let result = string as? T { return result }
        case .int64(let integer): if let result = exactInteger(integer, as: swiftType) { return result }
        case .double(let double):
            if swiftType == Double.self { return double as? T }
            if swiftType == Float.self { return Float(double) as? T }
        case .bool(let bool): if let result = bool as? T { return result }
        case .date(let date): if let result = date as? T { return result }
        case .data(let data): if let result = data as? T { return result }
        case .externalData(let external):
            // Reads of entities load the file's bytes first (ReadContext); a snapshot's reference
            // reaching here means the bytes were not loaded.
            throw StoreError(
                .invalidValue,
                "the value is \(external) and its bytes were not loaded; read the object through the store, or use PersistentStore.externalDataURL(for:)")
        case .uuid(let uuid): if let result = uuid as? T { return result }
        case .url(let url): if let result = url as? T { return result }
        case .decimal(let decimal): if let result = decimal as? T { return result }
        case .json(let text): return try JSONDecoder().decode(T.self, from: Data(text.utf8))
        case .null: return nil
        }
        // A value of a type that stores attribute values directly did not fit above.
        if AttributeType.allCases.contains(where: { $0 != .json && isDirect(swiftType, for: $0) }) { return nil }
        // A type that wraps one value, such as an enum with a raw value.
        return try T(from: SingleAttributeDecoder(value: value))
    }

    private static func exactInteger<T>(_ value: Int64, as type: T.Type) -> T? {
        switch type {
        case is Int64.Type: value as? T
        case is Int.Type: Int(exactly: value) as? T
        case is Int32.Type: Int32(exactly: value) as? T
        case is Int16.Type: Int16(exactly: value) as? T
        case is Int8.Type: Int8(exactly: value) as? T
        case is UInt8.Type: UInt8(exactly: value) as? T
        case is UInt16.Type: UInt16(exactly: value) as? T
        case is UInt32.Type: UInt32(exactly: value) as? T
        case is UInt64.Type: UInt64(exactly: value) as? T
        case is UInt.Type: UInt(exactly: value) as? T
        default: nil
        }
    }

    /// A readable name for a Swift type in messages: `String`, `Optional<Int>`, `Mood`.
    static func name(_ type: Any.Type) -> String {
        String(describing: type)
    }

    /// The Swift type to declare for an attribute type, for messages.
    static func suggestedSwiftType(for type: AttributeType) -> String {
        switch type {
        case .string: "String"
        case .int64: "Int64 (or Int)"
        case .double: "Double"
        case .bool: "Bool"
        case .date: "Date"
        case .data: "Data"
        case .uuid: "UUID"
        case .url: "URL"
        case .decimal: "Decimal"
        case .json: "any Codable type"
        }
    }
}

/// Captures the single primitive a wrapper type (an enum with a raw value, say) encodes.
final class SingleValueCapture: Encoder, SingleValueEncodingContainer {
    var codingPath: [any CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] = [:]
    private(set) var value: Any?

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(UnsupportedKeyedEncoding<Key>())
    }
    func unkeyedContainer() -> any UnkeyedEncodingContainer { UnsupportedUnkeyedEncoding() }
    func singleValueContainer() -> any SingleValueEncodingContainer { self }

    func encodeNil() throws { value = nil }
    func encode(_ value: Bool) throws { self.value = value }
    func encode(_ value: String) throws { self.value = value }
    func encode(_ value: Double) throws { self.value = value }
    func encode(_ value: Float) throws { self.value = value }
    func encode(_ value: Int) throws { self.value = value }
    func encode(_ value: Int8) throws { self.value = value }
    func encode(_ value: Int16) throws { self.value = value }
    func encode(_ value: Int32) throws { self.value = value }
    func encode(_ value: Int64) throws { self.value = value }
    func encode(_ value: UInt) throws { self.value = value }
    func encode(_ value: UInt8) throws { self.value = value }
    func encode(_ value: UInt16) throws { self.value = value }
    func encode(_ value: UInt32) throws { self.value = value }
    func encode(_ value: UInt64) throws { self.value = value }
    func encode<T: Encodable>(_ value: T) throws {
        switch value {
        case is Date, is Data, is UUID, is URL, is Decimal: self.value = value
        default: try value.encode(to: self)
        }
    }

    /// The one primitive `value` encodes, or nil when it encodes something else.
    static func capture(_ value: any Encodable) -> Any? {
        let capture = SingleValueCapture()
        guard (try? value.encode(to: capture)) != nil else { return nil }
        return capture.value
    }
}

/// Feeds one attribute value to a wrapper type's `init(from:)`.
struct SingleAttributeDecoder: Decoder, SingleValueDecodingContainer {
    var value: AttributeValue
    var codingPath: [any CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] = [:]

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        throw mismatch(type)
    }
    func unkeyedContainer() throws -> any UnkeyedDecodingContainer { throw mismatch([Any].self) }
    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    func decodeNil() -> Bool { value.isNull }
    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        guard let result = try AttributeConversion.swiftValue(value, as: type) else { throw mismatch(type) }
        return result
    }

    private func mismatch(_ type: Any.Type) -> DecodingError {
        DecodingError.typeMismatch(type, DecodingError.Context(codingPath: codingPath, debugDescription: "stored value is \(value)"))
    }
}

struct UnsupportedKeyedEncoding<Key: CodingKey>: KeyedEncodingContainerProtocol {
    var codingPath: [any CodingKey] = []
    mutating func encodeNil(forKey key: Key) throws { throw unsupported }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { throw unsupported }
    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(UnsupportedKeyedEncoding<NestedKey>())
    }
    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer { UnsupportedUnkeyedEncoding() }
    mutating func superEncoder() -> any Encoder { SingleValueCapture() }
    mutating func superEncoder(forKey key: Key) -> any Encoder { SingleValueCapture() }
}

struct UnsupportedUnkeyedEncoding: UnkeyedEncodingContainer {
    var codingPath: [any CodingKey] = []
    var count = 0
    mutating func encodeNil() throws { throw unsupported }
    mutating func encode<T: Encodable>(_ value: T) throws { throw unsupported }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(UnsupportedKeyedEncoding<NestedKey>())
    }
    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { self }
    mutating func superEncoder() -> any Encoder { SingleValueCapture() }
}

private let unsupported = EncodingError.invalidValue(
    0, EncodingError.Context(codingPath: [], debugDescription: "only single values can be captured"))
