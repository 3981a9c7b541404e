import Foundation

/// Turns conditions and sort keys into SQL for one entity table, checking every property name,
/// value type and operator against the schema.
struct QueryCompiler {
    let layout: StoreLayout
    let table: EntityTable
    private(set) var arguments: [AttributeValue] = []

    init(layout: StoreLayout, table: EntityTable) {
        self.layout = layout
        self.table = table
    }

    mutating func sql(for condition: Condition) throws -> String {
        try sql(for: condition.node)
    }

    private mutating func sql(for node: Condition.Node) throws -> String {
        switch node {
        case .compare(let property, let comparison, let value):
            let (expression, type) = try operand(property)
            if value.isNull {
                switch comparison {
                case .equal: return "\(expression) IS NULL"
                case .notEqual: return "\(expression) IS NOT NULL"
                default: throw invalid(property, "cannot be compared with null using \(comparison.rawValue); use equals or notEquals")
                }
            }
            let coerced = try coerce(value, to: type, property: property)
            if comparison != .equal && comparison != .notEqual && [.json, .data, .bool].contains(type) {
                throw invalid(property, "is a \(type.rawValue), which supports only equals, notEquals and in")
            }
            arguments.append(coerced)
            if type == .decimal && comparison != .equal && comparison != .notEqual {
                return "CAST(\(expression) AS REAL) \(comparison.rawValue) CAST(? AS REAL)"
            }
            return "\(expression) \(comparison.rawValue) ?"
        case .oneOf(let property, let values):
            let (expression, type) = try operand(property)
            guard !values.isEmpty else { return "0" }
            var placeholders: [String] = []
            var matchesNull = false
            for value in values {
                if value.isNull {
                    matchesNull = true
                    continue
                }
                arguments.append(try coerce(value, to: type, property: property))
                placeholders.append("?")
            }
            let list = placeholders.isEmpty ? "0" : "\(expression) IN (\(placeholders.joined(separator: ", ")))"
            return matchesNull ? "(\(list) OR \(expression) IS NULL)" : list
        case .beginsWith(let property, let prefix):
            let (expression, type) = try operand(property)
            guard type == .string || type == .url else {
                throw invalid(property, "is a \(type.rawValue); beginsWith works on string and url attributes")
            }
            arguments.append(.string(Self.globPrefix(prefix)))
            return "\(expression) GLOB ?"
        case .contains(let relationshipName, let id):
            guard let relationship = table.relationship(named: relationshipName), relationship.relationship.isToMany else {
                throw StoreError(
                    .unknownProperty,
                    "\(table.name).\(relationshipName) is not a to-many relationship of \(table.name); contains works on to-many relationships (compare to-one relationships with equals)")
            }
            arguments.append(.uuid(id))
            return try Self.containsSQL(relationship, in: table, layout: layout)
        case .and(let nodes):
            guard !nodes.isEmpty else { return "1" }
            return "(" + (try nodes.map { try sql(for: $0) }).joined(separator: " AND ") + ")"
        case .or(let nodes):
            guard !nodes.isEmpty else { return "0" }
            return "(" + (try nodes.map { try sql(for: $0) }).joined(separator: " OR ") + ")"
        case .not(let node):
            return "NOT (\(try sql(for: node)))"
        }
    }

    /// `ORDER BY` terms for sort keys.
    func sql(for sortKeys: [SortKey]) throws -> String {
        try sortKeys.map { key in
            let (expression, type) = try operand(key.property)
            let term = type == .decimal ? "CAST(\(expression) AS REAL)" : expression
            return "\(term) \(key.ascending ? "ASC" : "DESC")"
        }.joined(separator: ", ")
    }

    /// Whether the object relates the object whose id is `element` (`?`, or an expression)
    /// through a to-many relationship.
    static func containsSQL(
        _ relationship: RelationshipLayout, in table: EntityTable, layout: StoreLayout, element: String = "?"
    ) throws -> String {
        let members = try membersSQL(relationship, in: table, layout: layout)
        return "EXISTS (SELECT 1 \(members.from) AND \(members.id) = \(element))"
    }

    /// The members of the object's to-many relationship: `FROM … WHERE <owned by the object>`, and
    /// the column of a member's id in it.
    static func membersSQL(
        _ relationship: RelationshipLayout, in table: EntityTable, layout: StoreLayout
    ) throws -> (from: String, id: String) {
        let owner = "\(table.quotedName).\"id\""
        switch relationship.kind {
        case .oneToMany:
            let destination = try layout.table(relationship.destination)
            let inverse = relationship.inverse!.name.quotedIdentifier
            return ("FROM \(destination.quotedName) AS cloudstore_member WHERE cloudstore_member.\(inverse) = \(owner)",
                    "cloudstore_member.\"id\"")
        default:
            let link = relationship.link!
            let own = link.ownColumn(entity: table.name, relationship: relationship.name)
            let other = link.otherColumn(entity: table.name, relationship: relationship.name)
            return ("FROM \(link.name.quotedIdentifier) AS cloudstore_member WHERE cloudstore_member.\"\(own)\" = \(owner)",
                    "cloudstore_member.\"\(other)\"")
        }
    }

    private func operand(_ property: String) throws -> (String, AttributeType) {
        if property == "id" { return ("\(table.quotedName).\"id\"", .uuid) }
        if let relationship = table.relationship(named: property), relationship.column == nil {
            throw StoreError(
                .unknownProperty,
                "\(table.name).\(property) is a to-many relationship; use Condition.contains(\"\(property)\", id) to test membership")
        }
        let (index, column) = try table.column(named: property)
        return (table.qualifiedColumnNames[index], column.type)
    }

    private func coerce(_ value: AttributeValue, to type: AttributeType, property: String) throws -> AttributeValue {
        switch (value, type) {
        case (.int64(let number), .double): return .double(Double(number))
        case (.double(let number), .int64) where number.rounded() == number && abs(number) < 9.2e18:
            return .int64(Int64(number))
        case (.int64(let number), .decimal): return .decimal(Decimal(number))
        case (.string(let text), .json): return .json(text)
        default:
            guard value.type == type else {
                throw invalid(property, "is a \(type.rawValue) but the condition compares it with \(value.type?.rawValue ?? "null") \(value)")
            }
            if case .date(let date) = value { return .date(milliseconds: date) }
            return value
        }
    }

    private func invalid(_ property: String, _ message: String) -> StoreError {
        StoreError(.invalidValue, "\(table.name).\(property) \(message)")
    }

    /// A GLOB pattern matching strings that start with `prefix`.
    static func globPrefix(_ prefix: String) -> String {
        var pattern = ""
        for character in prefix {
            switch character {
            case "*", "?", "[": pattern += "[\(character)]"
            default: pattern.append(character)
            }
        }
        return pattern + "*"
    }
}
