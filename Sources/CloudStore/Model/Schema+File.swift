import Foundation

/// The schema file format (<doc:SchemaFileFormat>), read leniently so that every problem in a file
/// is reported at once, and written back canonically.
///
/// ```json
/// {"name": "Notes", "version": 2,
///  "entities": [
///    {"name": "Note",
///     "attributes": [{"name": "title", "type": "string", "default": ""},
///                    {"name": "body", "type": "string", "optional": true},
///                    {"name": "priority", "type": "int64", "default": 0, "renamedFrom": "rank"}],
///     "relationships": [{"name": "folder", "destination": "Folder", "toMany": false,
///                        "inverse": "notes", "deleteRule": "nullify"}],
///     "indexes": [["priority"]]}]}
/// ```
///
/// Entity keys: `name`, `attributes`, `relationships`, `indexes`, `uniquenessConstraints`,
/// `mirrored` (default true), `renamedFrom`, `duplicateKeyRule` (`merge`, the default, or
/// `refuse`: ``DuplicateKeyRule``). Attribute keys: `name`, `type`, `optional`, `default`,
/// `renamedFrom`, `preserveAfterDeletion`, `externalStorage` (`data` only: the bytes live in a file beside
/// the store and travel as an asset). Relationship keys: `name`, `destination`, `toMany`,
/// `inverse`, `deleteRule` (`nullify` by default, `cascade`, `deny`, `noAction`), `renamedFrom`.
/// Defaults are JSON values of the attribute's type: dates as ISO 8601 strings or milliseconds since
/// 1970, data as base64, UUIDs, URLs and decimals as strings.
extension Schema {
    /// Loads a schema file and validates it, reporting every problem of both kinds at once.
    ///
    /// ```swift
    /// let schema = try Schema.load(contentsOf: URL(fileURLWithPath: "Schema/Notes.json"))
    /// ```
    public static func load(contentsOf url: URL) throws -> Schema {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw SchemaError(
                schema: url.path, problems: [SchemaProblem("cannot read the schema file: \(error.localizedDescription)")])
        }
        return try load(data, source: url.lastPathComponent)
    }

    /// Reads a schema from the bytes of a schema file and validates it.
    public static func load(_ data: Data, source: String = "schema") throws -> Schema {
        var reader = SchemaFileReader()
        let schema = reader.read(data)
        var problems = reader.problems
        if let schema {
            problems += schema.problems().filter { !reader.suppressed($0) }
        }
        guard problems.isEmpty, let schema else {
            throw SchemaError(schema: schema?.name ?? source, problems: problems)
        }
        return schema
    }

    /// The schema in the file format, laid out for review: one entity after another, one
    /// attribute or relationship per line, keys in the order the format lists them.
    ///
    /// ```swift
    /// let schema = Schema(name: "Notes", version: 2, entities: [Folder.self, Note.self, Tag.self])
    /// try schema.fileData().write(to: URL(fileURLWithPath: "Schema/Notes.json"))
    /// ```
    public func fileData() throws -> Data {
        func line(_ members: [(String, JSONValue)]) throws -> String {
            "{" + (try members.map { "\(try Self.jsonText(.string($0.0))): \(try Self.jsonText($0.1))" }.joined(separator: ", ")) + "}"
        }
        func list(_ items: [String], indent: String) -> String {
            items.isEmpty ? "[]" : "[\n" + items.map { indent + "  " + $0 }.joined(separator: ",\n") + "\n" + indent + "]"
        }
        var entityTexts: [String] = []
        for entity in entities {
            var members = ["      \"name\": \(try Self.jsonText(.string(entity.name)))"]
            if !entity.isMirrored { members.append("      \"mirrored\": false") }
            if let renamedFrom = entity.renamedFrom { members.append("      \"renamedFrom\": \(try Self.jsonText(.string(renamedFrom)))") }
            let attributes = try entity.attributes.map { try line($0.fileMembers) }
            members.append("      \"attributes\": " + list(attributes, indent: "      "))
            let relationships = try entity.relationships.map { try line($0.fileMembers) }
            members.append("      \"relationships\": " + list(relationships, indent: "      "))
            for (key, lists) in [("indexes", entity.indexes), ("uniquenessConstraints", entity.uniquenessConstraints)] where !lists.isEmpty {
                members.append("      \"\(key)\": \(try Self.jsonText(.array(lists.map { .array($0.map(JSONValue.string)) })))")
            }
            if entity.duplicateKeyRule != .merge {
                members.append("      \"duplicateKeyRule\": \(try Self.jsonText(.string(entity.duplicateKeyRule.rawValue)))")
            }
            entityTexts.append("    {\n" + members.joined(separator: ",\n") + "\n    }")
        }
        let text = """
            {
              "name": \(try Self.jsonText(.string(name))),
              "version": \(version),
              "entities": [
            \(entityTexts.joined(separator: ",\n"))
              ]
            }

            """
        return Data(text.utf8)
    }

    /// A JSON value as compact text, with a space after each comma (the file's style).
    private static func jsonText(_ value: JSONValue) throws -> String {
        switch value {
        case .array(let items): return "[" + (try items.map(jsonText)).joined(separator: ", ") + "]"
        default: return try AttributeValue.canonicalJSON(value)
        }
    }

    /// The schema as a JSON value of the file format.
    var fileValue: JSONValue {
        .object([
            "name": .string(name),
            "version": .number(Double(version)),
            "entities": .array(entities.map(\.fileValue)),
        ])
    }
}

extension EntityDescription {
    var fileValue: JSONValue {
        var object: [String: JSONValue] = [
            "name": .string(name),
            "attributes": .array(attributes.map(\.fileValue)),
            "relationships": .array(relationships.map(\.fileValue)),
        ]
        if !indexes.isEmpty { object["indexes"] = .array(indexes.map { .array($0.map(JSONValue.string)) }) }
        if !uniquenessConstraints.isEmpty {
            object["uniquenessConstraints"] = .array(uniquenessConstraints.map { .array($0.map(JSONValue.string)) })
        }
        if !isMirrored { object["mirrored"] = .bool(false) }
        if let renamedFrom { object["renamedFrom"] = .string(renamedFrom) }
        if duplicateKeyRule != .merge { object["duplicateKeyRule"] = .string(duplicateKeyRule.rawValue) }
        return .object(object)
    }
}

extension AttributeDescription {
    /// The attribute's keys in the file, in the order the format lists them.
    var fileMembers: [(String, JSONValue)] {
        var members: [(String, JSONValue)] = [("name", .string(name)), ("type", .string(type.rawValue))]
        if isOptional { members.append(("optional", .bool(true))) }
        if let defaultValue { members.append(("default", defaultValue.fileValue)) }
        if let renamedFrom { members.append(("renamedFrom", .string(renamedFrom))) }
        if preservesValueAfterDeletion { members.append(("preserveAfterDeletion", .bool(true))) }
        if allowsExternalStorage { members.append(("externalStorage", .bool(true))) }
        if isEncrypted { members.append(("encrypted", .bool(true))) }
        return members
    }

    var fileValue: JSONValue {
        var object: [String: JSONValue] = ["name": .string(name), "type": .string(type.rawValue)]
        if isOptional { object["optional"] = .bool(true) }
        if let defaultValue { object["default"] = defaultValue.fileValue }
        if let renamedFrom { object["renamedFrom"] = .string(renamedFrom) }
        if preservesValueAfterDeletion { object["preserveAfterDeletion"] = .bool(true) }
        if allowsExternalStorage { object["externalStorage"] = .bool(true) }
        if isEncrypted { object["encrypted"] = .bool(true) }
        return .object(object)
    }
}

extension RelationshipDescription {
    /// The relationship's keys in the file, in the order the format lists them.
    var fileMembers: [(String, JSONValue)] {
        var members: [(String, JSONValue)] = [
            ("name", .string(name)), ("destination", .string(destination)), ("toMany", .bool(isToMany)),
        ]
        if let inverse { members.append(("inverse", .string(inverse))) }
        members.append(("deleteRule", .string(deleteRule.rawValue)))
        if let renamedFrom { members.append(("renamedFrom", .string(renamedFrom))) }
        return members
    }

    var fileValue: JSONValue {
        var object: [String: JSONValue] = [
            "name": .string(name), "destination": .string(destination), "toMany": .bool(isToMany),
            "deleteRule": .string(deleteRule.rawValue),
        ]
        if let inverse { object["inverse"] = .string(inverse) }
        if let renamedFrom { object["renamedFrom"] = .string(renamedFrom) }
        return .object(object)
    }
}

extension AttributeValue {
    /// The value as a schema file's `default` writes it.
    var fileValue: JSONValue {
        switch self {
        case .null: .null
        case .string(let value): .string(value)
        case .int64(let value): .number(Double(value))
        case .double(let value): .number(value)
        case .bool(let value): .bool(value)
        case .date(let value): .string(value.formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true)))
        case .data(let value): .string(value.base64EncodedString())
        case .externalData(let value): .string(value.storedText)
        case .uuid(let value): .string(value.uuidString)
        case .url(let value): .string(value.absoluteString)
        case .decimal(let value): .string(value.description)
        case .json(let text): (try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))) ?? .string(text)
        }
    }

    /// Reads a schema file's `default` for an attribute of `type`; nil when it does not fit.
    static func fromFile(_ json: JSONValue, as type: AttributeType) -> AttributeValue? {
        switch (type, json) {
        case (_, .null): return .null
        case (.string, .string(let value)): return .string(value)
        case (.int64, .number(let value)):
            guard value.rounded() == value, abs(value) <= 9_007_199_254_740_992 else { return nil }
            return .int64(Int64(value))
        case (.double, .number(let value)): return .double(value)
        case (.bool, .bool(let value)): return .bool(value)
        case (.date, .number(let value)):
            // Milliseconds since 1970 within ±100,000,000 days, the range of ECMAScript dates.
            guard value.rounded() == value, abs(value) <= 8.64e15 else { return nil }
            return .date(Date(millisecondsSince1970: Int64(value)))
        case (.date, .string(let value)):
            let formats: [Date.ISO8601FormatStyle] = [
                .iso8601, .iso8601.year().month().day().time(includingFractionalSeconds: true),
                .iso8601.year().month().day(),
            ]
            for format in formats {
                if let date = try? format.parse(value) { return .date(milliseconds: date) }
            }
            return nil
        case (.data, .string(let value)): return Data(base64Encoded: value).map(AttributeValue.data)
        case (.uuid, .string(let value)): return UUID(text: value).map(AttributeValue.uuid)
        case (.url, .string(let value)): return URL(string: value).map(AttributeValue.url)
        case (.decimal, .string(let value)):
            return Decimal(string: value, locale: Locale(identifier: "en_US_POSIX")).map(AttributeValue.decimal)
        case (.decimal, .number(let value)): return .decimal(Decimal(value))
        case (.json, let value): return (try? AttributeValue.canonicalJSON(value)).map(AttributeValue.json)
        default: return nil
        }
    }

    /// The canonical text of a JSON value: sorted keys, no insignificant whitespace.
    static func canonicalJSON<T: Encodable>(_ value: T) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }
}

/// Reads the file format from JSON, collecting problems instead of stopping at the first.
struct SchemaFileReader {
    private(set) var problems: [SchemaProblem] = []
    /// Properties whose declaration had a problem: later checks about them would only repeat it.
    private var brokenProperties: Set<String> = []

    mutating func read(_ data: Data) -> Schema? {
        let json: JSONValue
        do {
            json = try JSONDecoder().decode(JSONValue.self, from: data)
        } catch {
            let detail = (error as? DecodingError).map(WireCoding.describe) ?? "\(error)"
            problems.append(SchemaProblem("the file is not valid JSON: \(detail)"))
            return nil
        }
        guard case .object(let root) = json else {
            problems.append(SchemaProblem("the file must be a JSON object with \"name\", \"version\" and \"entities\""))
            return nil
        }
        checkKeys(root, allowed: ["name", "version", "entities"], entity: nil, property: nil, what: "schema")
        let name = string(root["name"], key: "name", entity: nil, property: nil) ?? "schema"
        var version = 1
        switch root["version"] {
        case .number(let value) where value.rounded() == value && value >= 1 && value < 1e9: version = Int(value)
        case nil: problems.append(SchemaProblem("\"version\" is missing (an integer, 1 or more)"))
        default: problems.append(SchemaProblem("\"version\" must be an integer, 1 or more"))
        }
        var entities: [EntityDescription] = []
        switch root["entities"] {
        case .array(let items):
            for (index, item) in items.enumerated() {
                if let entity = readEntity(item, index: index) { entities.append(entity) }
            }
        case nil: problems.append(SchemaProblem("\"entities\" is missing (an array of entities)"))
        default: problems.append(SchemaProblem("\"entities\" must be an array of entities"))
        }
        return Schema(name: name, version: version, entities: entities)
    }

    /// Whether a validation problem only repeats a problem the reader already reported.
    func suppressed(_ problem: SchemaProblem) -> Bool {
        guard let entity = problem.entity, let property = problem.property else { return false }
        return brokenProperties.contains("\(entity).\(property)")
    }

    private mutating func readEntity(_ json: JSONValue, index: Int) -> EntityDescription? {
        guard case .object(let object) = json else {
            problems.append(SchemaProblem("entities[\(index)] must be an object"))
            return nil
        }
        guard let name = string(object["name"], key: "name", entity: "entities[\(index)]", property: nil) else {
            return nil
        }
        checkKeys(
            object,
            allowed: [
                "name", "attributes", "relationships", "indexes", "uniquenessConstraints", "mirrored", "renamedFrom",
                "duplicateKeyRule",
            ],
            entity: name, property: nil, what: "entity")
        var entity = EntityDescription(name)
        for (index, item) in array(object["attributes"], key: "attributes", entity: name).enumerated() {
            if let attribute = readAttribute(item, entity: name, index: index) { entity.attributes.append(attribute) }
        }
        for (index, item) in array(object["relationships"], key: "relationships", entity: name).enumerated() {
            if let relationship = readRelationship(item, entity: name, index: index) {
                entity.relationships.append(relationship)
            }
        }
        entity.indexes = nameLists(object["indexes"], key: "indexes", entity: name)
        entity.uniquenessConstraints = nameLists(object["uniquenessConstraints"], key: "uniquenessConstraints", entity: name)
        entity.isMirrored = bool(object["mirrored"], key: "mirrored", entity: name, property: nil) ?? true
        entity.renamedFrom = optionalString(object["renamedFrom"], key: "renamedFrom", entity: name, property: nil)
        if let rule = optionalString(object["duplicateKeyRule"], key: "duplicateKeyRule", entity: name, property: nil) {
            if let known = DuplicateKeyRule(rawValue: rule) {
                entity.duplicateKeyRule = known
            } else {
                let rules = DuplicateKeyRule.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: " or ")
                problems.append(SchemaProblem(entity: name, "unknown duplicateKeyRule \"\(rule)\" (use \(rules))"))
            }
        }
        return entity
    }

    private mutating func readAttribute(_ json: JSONValue, entity: String, index: Int) -> AttributeDescription? {
        guard case .object(let object) = json else {
            problems.append(SchemaProblem(entity: entity, "attributes[\(index)] must be an object"))
            return nil
        }
        guard let name = string(object["name"], key: "name", entity: entity, property: "attributes[\(index)]") else {
            return nil
        }
        checkKeys(
            object, allowed: ["name", "type", "optional", "default", "renamedFrom", "preserveAfterDeletion", "externalStorage", "encrypted"],
            entity: entity, property: name, what: "attribute")
        let typeName = string(object["type"], key: "type", entity: entity, property: name)
        let type = typeName.flatMap(AttributeType.init(rawValue:))
        if let typeName, type == nil {
            let known = AttributeType.allCases.map(\.rawValue).joined(separator: ", ")
            problems.append(
                SchemaProblem(entity: entity, property: name, "unknown attribute type \"\(typeName)\" (use one of \(known))"))
        }
        if type == nil { brokenProperties.insert("\(entity).\(name)") }
        var attribute = AttributeDescription(name, type ?? .string)
        attribute.isOptional = bool(object["optional"], key: "optional", entity: entity, property: name) ?? false
        attribute.renamedFrom = optionalString(object["renamedFrom"], key: "renamedFrom", entity: entity, property: name)
        attribute.preservesValueAfterDeletion =
            bool(object["preserveAfterDeletion"], key: "preserveAfterDeletion", entity: entity, property: name) ?? false
        attribute.allowsExternalStorage =
            bool(object["externalStorage"], key: "externalStorage", entity: entity, property: name) ?? false
        attribute.isEncrypted = bool(object["encrypted"], key: "encrypted", entity: entity, property: name) ?? false
        if let type, let json = object["default"] {
            if let value = AttributeValue.fromFile(json, as: type) {
                attribute.defaultValue = value
            } else {
                problems.append(
                    SchemaProblem(entity: entity, property: name, "default \(json.compactText) is not a valid \(type.rawValue)"))
            }
        }
        return attribute
    }

    private mutating func readRelationship(_ json: JSONValue, entity: String, index: Int) -> RelationshipDescription? {
        guard case .object(let object) = json else {
            problems.append(SchemaProblem(entity: entity, "relationships[\(index)] must be an object"))
            return nil
        }
        guard let name = string(object["name"], key: "name", entity: entity, property: "relationships[\(index)]") else {
            return nil
        }
        checkKeys(
            object, allowed: ["name", "destination", "toMany", "inverse", "deleteRule", "renamedFrom"],
            entity: entity, property: name, what: "relationship")
        let destination = string(object["destination"], key: "destination", entity: entity, property: name)
        let toMany = bool(object["toMany"], key: "toMany", entity: entity, property: name) ?? false
        let inverse = optionalString(object["inverse"], key: "inverse", entity: entity, property: name)
        var deleteRule = DeleteRule.nullify
        if let ruleName = optionalString(object["deleteRule"], key: "deleteRule", entity: entity, property: name) {
            if let rule = DeleteRule(rawValue: ruleName) {
                deleteRule = rule
            } else {
                let known = DeleteRule.allCases.map(\.rawValue).joined(separator: ", ")
                problems.append(
                    SchemaProblem(entity: entity, property: name, "unknown delete rule \"\(ruleName)\" (use one of \(known))"))
            }
        }
        if destination == nil { brokenProperties.insert("\(entity).\(name)") }
        var relationship = RelationshipDescription(
            name, destination: destination ?? entity, toMany: toMany, inverse: inverse, deleteRule: deleteRule)
        relationship.renamedFrom = optionalString(object["renamedFrom"], key: "renamedFrom", entity: entity, property: name)
        return relationship
    }

    // MARK: Typed reads that record a problem when the JSON does not fit

    private mutating func checkKeys(
        _ object: [String: JSONValue], allowed: Set<String>, entity: String?, property: String?, what: String
    ) {
        for key in object.keys.sorted() where !allowed.contains(key) {
            let list = allowed.sorted().map { "\"\($0)\"" }.joined(separator: ", ")
            problems.append(SchemaProblem(entity: entity, property: property, "unknown \(what) key \"\(key)\" (known: \(list))"))
        }
    }

    private mutating func string(_ json: JSONValue?, key: String, entity: String?, property: String?) -> String? {
        switch json {
        case .string(let value): return value
        case nil: problems.append(SchemaProblem(entity: entity, property: property, "\"\(key)\" is missing"))
        default: problems.append(SchemaProblem(entity: entity, property: property, "\"\(key)\" must be a string"))
        }
        return nil
    }

    private mutating func optionalString(_ json: JSONValue?, key: String, entity: String?, property: String?) -> String? {
        switch json {
        case nil, .null: return nil
        case .string(let value): return value
        default:
            problems.append(SchemaProblem(entity: entity, property: property, "\"\(key)\" must be a string"))
            return nil
        }
    }

    private mutating func bool(_ json: JSONValue?, key: String, entity: String?, property: String?) -> Bool? {
        switch json {
        case nil, .null: return nil
        case .bool(let value): return value
        default:
            problems.append(SchemaProblem(entity: entity, property: property, "\"\(key)\" must be true or false"))
            return nil
        }
    }

    private mutating func array(_ json: JSONValue?, key: String, entity: String) -> [JSONValue] {
        switch json {
        case nil, .null: return []
        case .array(let items): return items
        default:
            problems.append(SchemaProblem(entity: entity, "\"\(key)\" must be an array"))
            return []
        }
    }

    private mutating func nameLists(_ json: JSONValue?, key: String, entity: String) -> [[String]] {
        array(json, key: key, entity: entity).compactMap { item in
            guard case .array(let names) = item else {
                problems.append(SchemaProblem(entity: entity, "each of \"\(key)\" must be an array of property names"))
                return nil
            }
            var list: [String] = []
            for name in names {
                guard case .string(let value) = name else {
                    problems.append(SchemaProblem(entity: entity, "each of \"\(key)\" must be an array of property names"))
                    return nil
                }
                list.append(value)
            }
            return list
        }
    }
}

extension JSONValue {
    /// The value as compact JSON text, for messages.
    var compactText: String {
        (try? AttributeValue.canonicalJSON(self)) ?? "\(self)"
    }
}
