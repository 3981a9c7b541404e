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

/// A `String` is stored as a `string` attribute.
extension String: AttributeStorable {
    /// `string`.
    public static var attributeType: AttributeType { .string }
    /// The value a `.string` attribute value holds; nil for any other kind of value.
    public init?(attributeValue: AttributeValue) {
        guard case .string(let value) = attributeValue else { return nil }
        self = value
    }
}

/// A `Bool` is stored as a `bool` attribute.
extension Bool: AttributeStorable {
    /// `bool`.
    public static var attributeType: AttributeType { .bool }
    /// The value a `.bool` attribute value holds; nil for any other kind of value.
    public init?(attributeValue: AttributeValue) {
        guard case .bool(let value) = attributeValue else { return nil }
        self = value
    }
}

/// A `Double` is stored as a `double` attribute.
extension Double: AttributeStorable {
    /// `double`.
    public static var attributeType: AttributeType { .double }
    /// The value a `.double` attribute value holds; nil for any other kind of value.
    public init?(attributeValue: AttributeValue) {
        guard case .double(let value) = attributeValue else { return nil }
        self = value
    }
}

/// A `Float` is stored as a `double` attribute, widened to a `Double`.
extension Float: AttributeStorable {
    /// `double`: a `Float` is stored as a `Double`.
    public static var attributeType: AttributeType { .double }
    /// `.double`, widened exactly.
    public var attributeValue: AttributeValue { .double(Double(self)) }
    /// The value a `.double` attribute value holds, rounded to the nearest `Float`; nil for any
    /// other kind of value.
    public init?(attributeValue: AttributeValue) {
        guard case .double(let value) = attributeValue else { return nil }
        self = Float(value)
    }
}

/// A `Date` is stored as a `date` attribute, to the millisecond.
extension Date: AttributeStorable {
    /// `date`.
    public static var attributeType: AttributeType { .date }
    /// The value a `.date` attribute value holds; nil for any other kind of value.
    public init?(attributeValue: AttributeValue) {
        guard case .date(let value) = attributeValue else { return nil }
        self = value
    }
}

/// A `Data` value is stored as a `data` attribute.
extension Data: AttributeStorable {
    /// `data`.
    public static var attributeType: AttributeType { .data }
    /// The value a `.data` attribute value holds; nil for any other kind of value.
    public init?(attributeValue: AttributeValue) {
        guard case .data(let value) = attributeValue else { return nil }
        self = value
    }
}

/// A `UUID` is stored as a `uuid` attribute.
extension UUID: AttributeStorable {
    /// `uuid`.
    public static var attributeType: AttributeType { .uuid }
    /// The value a `.uuid` attribute value holds; nil for any other kind of value.
    public init?(attributeValue: AttributeValue) {
        guard case .uuid(let value) = attributeValue else { return nil }
        self = value
    }
}

/// A `URL` is stored as a `url` attribute.
extension URL: AttributeStorable {
    /// `url`.
    public static var attributeType: AttributeType { .url }
    /// The value a `.url` attribute value holds; nil for any other kind of value.
    public init?(attributeValue: AttributeValue) {
        guard case .url(let value) = attributeValue else { return nil }
        self = value
    }
}

/// A `Decimal` is stored as a `decimal` attribute, exactly.
extension Decimal: AttributeStorable {
    /// `decimal`.
    public static var attributeType: AttributeType { .decimal }
    /// The value a `.decimal` attribute value holds; nil for any other kind of value.
    public init?(attributeValue: AttributeValue) {
        guard case .decimal(let value) = attributeValue else { return nil }
        self = value
    }
}

/// The integers an `int64` attribute stores: each converts exactly, or not at all.
public protocol StoredInteger: AttributeStorable, FixedWidthInteger {}

extension StoredInteger {
    /// `int64`.
    public static var attributeType: AttributeType { .int64 }
    /// `.int64`, converted exactly.
    public var attributeValue: AttributeValue { .int64(Int64(self)) }
    /// The value an `.int64` attribute value holds, when this type holds it exactly; nil for one
    /// out of range, or for any other kind of value.
    public init?(attributeValue: AttributeValue) {
        guard case .int64(let value) = attributeValue, let exact = Self(exactly: value) else { return nil }
        self = exact
    }
}

/// An `Int` is stored as an `int64` attribute.
extension Int: StoredInteger {}
/// An `Int64` is stored as an `int64` attribute.
extension Int64: StoredInteger {}
/// An `Int32` is stored as an `int64` attribute.
extension Int32: StoredInteger {}
/// An `Int16` is stored as an `int64` attribute.
extension Int16: StoredInteger {}
/// An `Int8` is stored as an `int64` attribute.
extension Int8: StoredInteger {}
/// A `UInt8` is stored as an `int64` attribute.
extension UInt8: StoredInteger {}
/// A `UInt16` is stored as an `int64` attribute.
extension UInt16: StoredInteger {}
/// A `UInt32` is stored as an `int64` attribute.
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

    /// A raw-value enum's default is stored as its raw value.
    public static func of<T: RawRepresentable & Codable>(_ value: T) -> AttributeValue
    where T.RawValue: AttributeStorable { value.rawValue.attributeValue }

    /// Any other `Codable` default is stored as canonical JSON; `.null` if it cannot be encoded.
    public static func of<T: Codable>(_ value: T) -> AttributeValue {
        (try? canonicalJSON(value)).map(AttributeValue.json) ?? .null
    }
}
