import SwiftSyntax
import SwiftSyntaxBuilder

/// The code `@Model` adds to a valid declaration: the conformance to `PersistentModel` with the
/// entity description, the typed table of properties, and the row reader and writer.
struct ModelCode {
    let model: ModelDeclaration

    private var access: String { model.access.map { "\($0) " } ?? "" }

    /// `extension Note: CloudStore.PersistentModel { … }`.
    func conformance(of type: some TypeSyntaxProtocol, addingConformance: Bool) throws -> ExtensionDeclSyntax {
        let inheritance = addingConformance ? ": CloudStore.PersistentModel" : ""
        // The id's type, at the model's access level (inferred, it would be internal).
        var members: [String] = ["\(access)typealias ID = Foundation.UUID"]
        if let name = model.entityName {
            members.append("\(access)static var entityName: String { \(literal(name)) }")
        }
        members.append(entityDescription)
        members.append(propertyTable)
        members.append(rowReader)
        members.append(rowWriter)
        return try ExtensionDeclSyntax(
            SyntaxNodeString(stringLiteral: "extension \(type.trimmedDescription)\(inheritance) {\n\(members.joined(separator: "\n\n"))\n}"))
    }

    /// `CodingKeys` without the transient properties, so `Codable` leaves them out too.
    var codingKeys: DeclSyntax {
        "enum CodingKeys: String, CodingKey {\n    case \(raw: model.codableNames.map(identifier).joined(separator: ", "))\n}"
    }

    private var entityDescription: String {
        var attributes: [String] = []
        var relationships: [String] = []
        var indexes = model.indexes
        var unique = model.uniquenessConstraints
        for property in model.properties {
            switch property.kind {
            case .attribute(let type, let isOptional):
                let defaultValue = property.defaultLiteral.map { "CloudStore.AttributeValue.of(\($0) as \(type))" } ?? "nil"
                attributes.append(
                    """
                    CloudStore.AttributeDescription(\(literal(property.name)), CloudStore.AttributeType.of(\(type).self), \
                    optional: \(isOptional), default: \(defaultValue), renamedFrom: \(optionalLiteral(property.originalName)), \
                    preservesValueAfterDeletion: \(property.options.contains("preserveAfterDeletion")), \
                    externalStorage: \(property.options.contains("externalStorage")), \
                    encrypted: \(property.options.contains("encrypted")))
                    """)
            case .toOne(let destination), .toMany(let destination):
                let isToMany = property.kind == .toMany(destination: destination)
                relationships.append(
                    """
                    CloudStore.RelationshipDescription(\(literal(property.name)), destination: \(destination).entityName, \
                    toMany: \(isToMany), inverse: \(optionalLiteral(property.inverse)), \
                    deleteRule: \(property.deleteRule ?? ".nullify"), renamedFrom: \(optionalLiteral(property.originalName)))
                    """)
            }
            if property.options.contains("indexed") && !indexes.contains([property.name]) { indexes.append([property.name]) }
            if property.options.contains("unique") && !unique.contains([property.name]) { unique.append([property.name]) }
        }
        return """
            /// The entity `@Model` derives from this type's stored properties.
            \(access)static var entityDescription: CloudStore.EntityDescription {
                CloudStore.EntityDescription(
                    Self.entityName,
                    attributes: \(list(attributes, indent: 8)),
                    relationships: \(list(relationships, indent: 8)),
                    indexes: \(nameLists(indexes)),
                    uniquenessConstraints: \(nameLists(unique)),
                    isMirrored: \(model.isMirrored),
                    renamedFrom: \(optionalLiteral(model.originalName))\(duplicateKeyRuleArgument))
            }
            """
    }

    /// `, duplicateKeyRule: .refuse` when `@Model` names a rule; nothing for the default.
    private var duplicateKeyRuleArgument: String {
        model.duplicateKeyRule.map { ",\n        duplicateKeyRule: \($0)" } ?? ""
    }

    private var propertyTable: String {
        let entries = (["id"] + model.properties.map(\.name)).map {
            "CloudStore.ModelProperty(\(literal($0)), \\\(model.typeName).\(identifier($0)))"
        }
        return """
            \(access)static var _modelProperties: [CloudStore.ModelProperty<\(model.typeName)>] {
                \(list(entries, indent: 4))
            }
            """
    }

    private var rowReader: String {
        var lines = ["self.id = row.id"]
        for (offset, property) in model.properties.enumerated() {
            let index = offset + 1  // 0 is the id
            let name = identifier(property.name)
            switch property.kind {
            case .attribute(let type, let isOptional):
                lines.append("self.\(name) = try row.read(\(type)\(isOptional ? "?" : "").self, at: \(index))")
            case .toOne(let destination):
                lines.append("self.\(name) = try row.read(\(destination).ID?.self, at: \(index))")
            case .toMany:
                lines.append("self.\(name) = try row.readToMany(at: \(index))")
            }
        }
        return """
            \(access)init(_modelRow row: CloudStore.ModelRowReader) throws {
                \(lines.joined(separator: "\n    "))
            }
            """
    }

    private var rowWriter: String {
        let lines = model.properties.enumerated().map { offset, property in
            let index = offset + 1  // 0 is the id
            if case .toMany = property.kind {
                return "row.writeToMany(self.\(identifier(property.name)), at: \(index))"
            }
            return "try row.write(self.\(identifier(property.name)), at: \(index))"
        }
        return """
            \(access)func _writeModel(to row: inout CloudStore.ModelRowWriter) throws {
                \(lines.isEmpty ? "" : lines.joined(separator: "\n    "))
            }
            """
    }

    // MARK: Literals

    private func literal(_ text: String) -> String {
        StringLiteralExprSyntax(content: text).description
    }

    private func optionalLiteral(_ text: String?) -> String {
        text.map(literal) ?? "nil"
    }

    /// An array literal, one item per line, in code indented by `indent` spaces.
    private func list(_ items: [String], indent: Int) -> String {
        let inner = String(repeating: " ", count: indent + 4)
        let outer = String(repeating: " ", count: indent)
        return items.isEmpty ? "[]" : "[\n" + items.map { "\(inner)\($0)," }.joined(separator: "\n") + "\n\(outer)]"
    }

    private func nameLists(_ lists: [[String]]) -> String {
        "[" + lists.map { "[" + $0.map(literal).joined(separator: ", ") + "]" }.joined(separator: ", ") + "]"
    }

    /// A property name usable in code (backquoted when it is a keyword).
    private func identifier(_ name: String) -> String {
        let keywords: Set<String> = [
            "default", "class", "struct", "enum", "protocol", "func", "var", "let", "if", "else", "for", "in", "while",
            "return", "switch", "case", "import", "static", "self", "Self", "true", "false", "nil", "init", "deinit",
            "extension", "operator", "repeat", "break", "continue", "do", "catch", "throw", "throws", "try", "where",
            "as", "is", "super", "subscript", "typealias", "associatedtype", "inout", "internal", "private", "public",
            "fileprivate", "open", "guard", "defer", "fallthrough",
        ]
        return keywords.contains(name) ? "`\(name)`" : name
    }
}
