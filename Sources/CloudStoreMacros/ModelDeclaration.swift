import SwiftDiagnostics
import SwiftSyntax

/// What a `@Model` struct declares, read from its syntax: the one input of the generated code and
/// of every compile-time diagnostic. Reading never stops at the first problem; each problem is a
/// diagnostic at the declaration it is about, with a fix-it where the fix is obvious.
struct ModelDeclaration {
    /// The Swift type's name.
    var typeName: String
    /// `public`, `package` or nil: the access the generated members need to witness the protocol.
    var access: String?
    /// The entity's name when `@Model(name:)` gives one.
    var entityName: String?
    var originalName: String?
    var isMirrored = true
    var indexes: [[String]] = []
    var uniquenessConstraints: [[String]] = []
    /// `@Model(duplicateKeyRule:)` as written (`.refuse`), when given.
    var duplicateKeyRule: String?
    /// The stored properties, in declaration order, without `id` and transient ones.
    var properties: [StoredProperty] = []
    /// The names of every stored property `Codable` sees (id, stored and not transient).
    var codableNames: [String] = []
    var hasTransientProperties = false
    var declaresCodingKeys = false
    /// The names in `indexes` and `uniquenessConstraints` with their nodes, to point at an unknown one.
    var indexNameNodes: [(String, Syntax)] = []
    var diagnostics: [Diagnostic] = []

    var isValid: Bool { !diagnostics.contains { $0.diagMessage.severity == .error } }
}

/// One stored property of a model.
struct StoredProperty {
    enum Kind: Equatable {
        /// An attribute of the Swift type `type` (without the optional).
        case attribute(type: String, isOptional: Bool)
        /// A to-one relationship, declared `Destination.ID?`.
        case toOne(destination: String)
        /// A to-many relationship, declared `[Destination.ID]`.
        case toMany(destination: String)
    }

    var name: String
    var kind: Kind
    /// The initial value, when it is a literal the schema can keep as the attribute's default.
    var defaultLiteral: String?
    /// `@Attribute` options by name (`externalStorage`, `preserveAfterDeletion`, `indexed`, `unique`, `encrypted`).
    var options: Set<String> = []
    var originalName: String?
    /// `@Relationship(deleteRule:)` as written (`.cascade`), when given.
    var deleteRule: String?
    /// `@Relationship(inverse:)`: the inverse property's name.
    var inverse: String?
}

/// The attribute types @Model knows by name, with the attribute type each is stored as.
enum KnownType {
    static let attributeTypes: [String: String] = [
        "String": "string", "Int": "int64", "Int64": "int64", "Int32": "int64", "Int16": "int64", "Int8": "int64",
        "UInt8": "int64", "UInt16": "int64", "UInt32": "int64", "Double": "double", "Float": "double",
        "Bool": "bool", "Date": "date", "Data": "data", "UUID": "uuid", "URL": "url", "Decimal": "decimal",
    ]

    /// Types that cannot be stored, with what to declare instead.
    static let unsupported: [String: String] = [
        "UInt": "an int64 attribute cannot hold every UInt; declare it as Int or Int64",
        "UInt64": "an int64 attribute cannot hold every UInt64; declare it as Int64",
        "Float80": "declare it as Double",
        "Float16": "declare it as Double or Float",
        "Character": "declare it as String",
        "Substring": "declare it as String",
        "Any": "a stored property has one concrete type; use a Codable type (stored as JSON) or mark it @Transient",
        "AnyObject": "a stored property has one concrete type; mark it @Transient",
        "AnyHashable": "a stored property has one concrete type; mark it @Transient",
        "NSObject": "classes are not stored; mark it @Transient",
    ]

    /// A literal the schema can keep as the default of a property of this known type.
    static func literalFits(_ literal: ExprSyntax, _ type: String) -> Bool {
        switch attributeTypes[type] {
        case "string": return literal.is(StringLiteralExprSyntax.self)
        case "int64": return isInteger(literal)
        case "double": return isInteger(literal) || isFloat(literal)
        case "bool": return literal.is(BooleanLiteralExprSyntax.self)
        case "decimal": return isInteger(literal) || isFloat(literal)
        default: return false
        }
    }

    static func isInteger(_ expression: ExprSyntax) -> Bool {
        if expression.is(IntegerLiteralExprSyntax.self) { return true }
        if let prefix = expression.as(PrefixOperatorExprSyntax.self), prefix.operator.text == "-" {
            return prefix.expression.is(IntegerLiteralExprSyntax.self)
        }
        return false
    }

    static func isFloat(_ expression: ExprSyntax) -> Bool {
        if expression.is(FloatLiteralExprSyntax.self) { return true }
        if let prefix = expression.as(PrefixOperatorExprSyntax.self), prefix.operator.text == "-" {
            return prefix.expression.is(FloatLiteralExprSyntax.self)
        }
        return false
    }
}
