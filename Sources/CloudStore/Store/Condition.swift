import Foundation

/// Which objects a fetch or count selects, by property name: comparisons of attributes and to-one
/// relationships, membership in to-many relationships, combined with and/or/not.
///
/// This is the dynamic form of a query, for code that does not know the model types: the
/// `cloudstore` command, generic tools, plain `Codable` entities. An app queries its `@Model`
/// types with ``FetchDescriptor``, whose `#Predicate` the compiler checks.
///
/// ```swift
/// let recent = try store.read { context in
///     try context.fetch(Note.self,
///                       where: .equals("pinned", true) && .greaterThan("created", lastWeek),
///                       sortBy: [.descending("created")], limit: 20)
/// }
/// let inFolder = Condition.equals("folder", folderID)           // to-one, by the related id
/// let tagged = Condition.contains("tags", tagID)                 // to-many membership
/// let titled = Condition.beginsWith("title", "Meeting") || .in("priority", [1, 2])
/// ```
///
/// Property names are checked against the entity when the fetch runs: an unknown property, a
/// value of the wrong type or an operator the type does not support is a ``StoreError`` naming
/// `Entity.property`. ``isNull(_:)`` matches a missing value; `notEquals` also matches nulls.
/// `"id"` names the object's id. Strings compare by their UTF-8 bytes (case-sensitive).
public struct Condition: Hashable, Sendable {
    enum Comparison: String, Hashable, Sendable {
        case equal = "="
        case notEqual = "IS NOT"
        case less = "<"
        case lessOrEqual = "<="
        case greater = ">"
        case greaterOrEqual = ">="
    }

    indirect enum Node: Hashable, Sendable {
        case compare(String, Comparison, AttributeValue)
        case oneOf(String, [AttributeValue])
        case beginsWith(String, String)
        case contains(String, UUID)
        case and([Node])
        case or([Node])
        case not(Node)
    }

    let node: Node

    init(_ node: Node) { self.node = node }

    /// The property's value equals `value`; a nil `value` matches a missing value, as
    /// ``isNull(_:)``. A to-one relationship compares by the related object's id.
    public static func equals(_ property: String, _ value: some AttributeValueConvertible) -> Condition {
        Condition(.compare(property, .equal, value.attributeValue))
    }

    /// The property's value differs from `value`; objects without a value match too (SQL `IS NOT`).
    public static func notEquals(_ property: String, _ value: some AttributeValueConvertible) -> Condition {
        Condition(.compare(property, .notEqual, value.attributeValue))
    }

    /// The property's value is less than `value`; objects without a value never match. Not for
    /// `bool`, `data` or `json` attributes.
    public static func lessThan(_ property: String, _ value: some AttributeValueConvertible) -> Condition {
        Condition(.compare(property, .less, value.attributeValue))
    }

    /// The property's value is less than or equal to `value`; objects without a value never match.
    public static func lessThanOrEqual(_ property: String, _ value: some AttributeValueConvertible) -> Condition {
        Condition(.compare(property, .lessOrEqual, value.attributeValue))
    }

    /// The property's value is greater than `value`; objects without a value never match. Not for
    /// `bool`, `data` or `json` attributes.
    public static func greaterThan(_ property: String, _ value: some AttributeValueConvertible) -> Condition {
        Condition(.compare(property, .greater, value.attributeValue))
    }

    /// The property's value is greater than or equal to `value`; objects without a value never match.
    public static func greaterThanOrEqual(_ property: String, _ value: some AttributeValueConvertible) -> Condition {
        Condition(.compare(property, .greaterOrEqual, value.attributeValue))
    }

    /// The property has no value (an optional attribute, or a to-one relationship set to nil).
    public static func isNull(_ property: String) -> Condition {
        Condition(.compare(property, .equal, .null))
    }

    /// The property has a value.
    public static func isNotNull(_ property: String) -> Condition {
        Condition(.compare(property, .notEqual, .null))
    }

    /// The property's value is one of `values` (SQL `IN`); a nil among them matches a missing value,
    /// and an empty list matches nothing.
    public static func `in`<Value: AttributeValueConvertible>(_ property: String, _ values: [Value]) -> Condition {
        Condition(.oneOf(property, values.map(\.attributeValue)))
    }

    /// A string (or URL) property starts with `prefix` (case-sensitive; `BEGINSWITH` in Core Data).
    public static func beginsWith(_ property: String, _ prefix: String) -> Condition {
        Condition(.beginsWith(property, prefix))
    }

    /// A to-many relationship contains the object with this id.
    public static func contains(_ relationship: String, _ id: UUID) -> Condition {
        Condition(.contains(relationship, id))
    }

    /// Every one of `conditions` holds; an empty list matches every object.
    public static func and(_ conditions: [Condition]) -> Condition { Condition(.and(conditions.map(\.node))) }
    /// At least one of `conditions` holds; an empty list matches nothing.
    public static func or(_ conditions: [Condition]) -> Condition { Condition(.or(conditions.map(\.node))) }
    /// `condition` does not hold.
    public static func not(_ condition: Condition) -> Condition { Condition(.not(condition.node)) }

    /// Both conditions hold: ``and(_:)`` of the two.
    public static func && (lhs: Condition, rhs: Condition) -> Condition { .and([lhs, rhs]) }
    /// Either condition holds: ``or(_:)`` of the two.
    public static func || (lhs: Condition, rhs: Condition) -> Condition { .or([lhs, rhs]) }
    /// The condition does not hold: ``not(_:)``.
    public static prefix func ! (condition: Condition) -> Condition { .not(condition) }
}

/// The order of fetched objects: a property name and a direction.
///
/// ```swift
/// try context.fetch(Note.self, sortBy: [.descending("pinned"), .ascending("title")])
/// ```
public struct SortKey: Hashable, Sendable {
    /// The attribute or to-one relationship to sort by (`"id"` for the object's id).
    public var property: String
    /// Whether smaller values come first; false sorts descending.
    public var ascending: Bool

    /// Sorts by `property`, ascending unless told otherwise.
    public init(_ property: String, ascending: Bool = true) {
        self.property = property
        self.ascending = ascending
    }

    /// Sorts by `property`, smallest first.
    public static func ascending(_ property: String) -> SortKey { SortKey(property, ascending: true) }
    /// Sorts by `property`, largest first.
    public static func descending(_ property: String) -> SortKey { SortKey(property, ascending: false) }
}

/// A Swift value that can stand for an attribute value in a ``Condition``.
public protocol AttributeValueConvertible: Sendable {
    /// The value as the store compares it.
    var attributeValue: AttributeValue { get }
}

extension AttributeValue: AttributeValueConvertible {
    /// The value itself.
    public var attributeValue: AttributeValue { self }
}

extension String: AttributeValueConvertible {
    /// `.string(self)`.
    public var attributeValue: AttributeValue { .string(self) }
}

extension Int: AttributeValueConvertible {
    /// `.int64`, for `int64` attributes.
    public var attributeValue: AttributeValue { .int64(Int64(self)) }
}

extension Int64: AttributeValueConvertible {
    /// `.int64(self)`.
    public var attributeValue: AttributeValue { .int64(self) }
}

extension Int32: AttributeValueConvertible {
    /// `.int64`, for `int64` attributes.
    public var attributeValue: AttributeValue { .int64(Int64(self)) }
}

extension Double: AttributeValueConvertible {
    /// `.double(self)`.
    public var attributeValue: AttributeValue { .double(self) }
}

extension Bool: AttributeValueConvertible {
    /// `.bool(self)`.
    public var attributeValue: AttributeValue { .bool(self) }
}

extension Date: AttributeValueConvertible {
    /// `.date`, rounded to the millisecond, as the store keeps dates.
    public var attributeValue: AttributeValue { .date(milliseconds: self) }
}

extension Data: AttributeValueConvertible {
    /// `.data(self)`.
    public var attributeValue: AttributeValue { .data(self) }
}

extension UUID: AttributeValueConvertible {
    /// `.uuid(self)`: an id, or a to-one relationship's related id.
    public var attributeValue: AttributeValue { .uuid(self) }
}

extension URL: AttributeValueConvertible {
    /// `.url(self)`.
    public var attributeValue: AttributeValue { .url(self) }
}

extension Decimal: AttributeValueConvertible {
    /// `.decimal(self)`.
    public var attributeValue: AttributeValue { .decimal(self) }
}

/// An optional stands for its value in a ``Condition``, and nil for a missing value.
extension Optional: AttributeValueConvertible where Wrapped: AttributeValueConvertible {
    /// The wrapped value's, or `.null` for nil.
    public var attributeValue: AttributeValue { self?.attributeValue ?? .null }
}
