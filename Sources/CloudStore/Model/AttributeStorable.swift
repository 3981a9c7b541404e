import Foundation

/// A Swift type an attribute stores directly, as one of the ``AttributeType``s: `String`, the
/// integers that fit an `Int64`, `Double`, `Float`, `Bool`, `Date`, `Data`, `UUID`, `URL` and
/// `Decimal`.
///
/// `@Model` types store these directly, an enum by its raw value when the raw value's type is one
/// of these, and any other `Codable` value as JSON. Conform a type of your own when it is one
/// value of an attribute type, as a currency amount is a `decimal`:
///
/// ```swift
/// struct Amount: AttributeStorable {
///     var value: Decimal
///     static var attributeType: AttributeType { .decimal }
///     var attributeValue: AttributeValue { .decimal(value) }
///     init?(attributeValue: AttributeValue) {
///         guard case .decimal(let value) = attributeValue else { return nil }
///         self.value = value
///     }
/// }
/// ```
public protocol AttributeStorable: AttributeValueConvertible, Codable {
    /// The attribute type values of this type are stored as.
    static var attributeType: AttributeType { get }
    /// The Swift value of a stored value; nil when the stored value does not fit (an `Int64`
    /// too large for an `Int8`, say).
    init?(attributeValue: AttributeValue)
}

extension String: AttributeStorable {
    public static var attributeType: AttributeType { .string }
    public init?(attributeValue: AttributeValue) {
        guard case .string(let value) = attributeValue else { return nil }
        self = value
    }
}

extension Bool: AttributeStorable {
    public static var attributeType: AttributeType { .bool }
    public init?(attributeValue: AttributeValue) {
        guard case .bool(let value) = attributeValue else { return nil }
        self = value
    }
}

extension Double: AttributeStorable {
    public static var attributeType: AttributeType { .double }
    public init?(attributeValue: AttributeValue) {
        guard case .double(let value) = attributeValue else { return nil }
        self = value
    }
}

extension Float: AttributeStorable {
    public static var attributeType: AttributeType { .double }
    public var attributeValue: AttributeValue { .double(Double(self)) }
    public init?(attributeValue: AttributeValue) {
        guard case .double(let value) = attributeValue else { return nil }
        self = Float(value)
    }
}

extension Date: AttributeStorable {
    public static var attributeType: AttributeType { .date }
    public init?(attributeValue: AttributeValue) {
        guard case .date(let value) = attributeValue else { return nil }
        self = value
    }
}

extension Data: AttributeStorable {
    public static var attributeType: AttributeType { .data }
    public init?(attributeValue: AttributeValue) {
        guard case .data(let value) = attributeValue else { return nil }
        self = value
    }
}

extension UUID: AttributeStorable {
    public static var attributeType: AttributeType { .uuid }
    public init?(attributeValue: AttributeValue) {
        guard case .uuid(let value) = attributeValue else { return nil }
        self = value
    }
}

extension URL: AttributeStorable {
    public static var attributeType: AttributeType { .url }
    public init?(attributeValue: AttributeValue) {
        guard case .url(let value) = attributeValue else { return nil }
        self = value
    }
}

extension Decimal: AttributeStorable {
    public static var attributeType: AttributeType { .decimal }
    public init?(attributeValue: AttributeValue) {
        guard case .decimal(let value) = attributeValue else { return nil }
        self = value
    }
}

/// The integers an `int64` attribute stores: each converts exactly, or not at all.
public protocol StoredInteger: AttributeStorable, FixedWidthInteger {}

extension StoredInteger {
    public static var attributeType: AttributeType { .int64 }
    public var attributeValue: AttributeValue { .int64(Int64(self)) }
    public init?(attributeValue: AttributeValue) {
        guard case .int64(let value) = attributeValue, let exact = Self(exactly: value) else { return nil }
        self = exact
    }
}

extension Int: StoredInteger {}
extension Int64: StoredInteger {}
extension Int32: StoredInteger {}
extension Int16: StoredInteger {}
extension Int8: StoredInteger {}
extension UInt8: StoredInteger {}
extension UInt16: StoredInteger {}
extension UInt32: StoredInteger {}

// MARK: The attribute type and default `@Model` derive from a property's Swift type

extension AttributeType {
    /// The attribute type of a property of type `T`, for the entity description `@Model` writes.
    public static func of<T: AttributeStorable>(_ type: T.Type) -> AttributeType { T.attributeType }

    /// A raw-value enum is stored as its raw value.
    public static func of<T: RawRepresentable & Codable>(_ type: T.Type) -> AttributeType
    where T.RawValue: AttributeStorable { T.RawValue.attributeType }

    /// Any other `Codable` type is stored as JSON.
    public static func of<T: Codable>(_ type: T.Type) -> AttributeType { .json }
}

extension AttributeValue {
    /// The stored form of a property's default value, for the entity description `@Model` writes.
    public static func of<T: AttributeStorable>(_ value: T) -> AttributeValue { value.attributeValue }

    public static func of<T: RawRepresentable & Codable>(_ value: T) -> AttributeValue
    where T.RawValue: AttributeStorable { value.rawValue.attributeValue }

    public static func of<T: Codable>(_ value: T) -> AttributeValue {
        (try? canonicalJSON(value)).map(AttributeValue.json) ?? .null
    }
}
