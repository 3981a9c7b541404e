extension Schema {
    /// CloudKit's system field names, which an attribute or relationship cannot use.
    static let systemFieldNames: Set<String> = [
        "recordname", "recordtype", "recordid", "recordchangetag", "creationdate", "modificationdate",
        "creatoruserrecordid", "lastmodifieduserrecordid", "parent", "share", "zoneid",
    ]

    /// Checks the schema and throws a ``SchemaError`` listing every problem, not only the first.
    ///
    /// The rules are those a mirrored store needs, as Core Data + CloudKit has them: names are
    /// identifiers that are not reserved and not declared twice (ignoring case, as SQLite does);
    /// mirrored attributes are optional or have a default; relationships have a known destination and
    /// an inverse that points back; no `deny` delete rule; no attribute with external storage in a
    /// uniqueness constraint of a mirrored entity (the server compares values, not assets); indexes
    /// and constraints name existing attributes or to-one relationships.
    public func validate() throws {
        let problems = problems()
        if !problems.isEmpty { throw SchemaError(schema: name, problems: problems) }
    }

    /// Every problem of the schema; empty when it is valid.
    public func problems() -> [SchemaProblem] {
        var problems: [SchemaProblem] = []
        if !Self.isIdentifier(name) {
            problems.append(SchemaProblem("schema name \"\(name)\" is not a valid identifier (\(Self.identifierRule))"))
        }
        if version < 1 { problems.append(SchemaProblem("version \(version) must be 1 or more")) }
        if entities.isEmpty { problems.append(SchemaProblem("the schema has no entities")) }

        var seenEntities: [String: String] = [:]
        for entity in entities {
            if let previous = seenEntities[entity.name.lowercased()] {
                problems.append(
                    SchemaProblem(
                        entity: entity.name,
                        previous == entity.name
                            ? "the entity is declared twice"
                            : "differs from entity \(previous) only in case (SQLite table names ignore case)"))
            } else {
                seenEntities[entity.name.lowercased()] = entity.name
            }
            problems += entityProblems(entity)
        }
        return problems
    }

    static let identifierRule = "letters, digits and _, not starting with a digit, at most 255 characters"

    /// Whether a name is an identifier: ASCII letters, digits and `_`, not starting with a digit.
    static func isIdentifier(_ name: String) -> Bool {
        guard let first = name.utf8.first, name.utf8.count <= 255, !(0x30...0x39).contains(first) else { return false }
        return name.utf8.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || byte == 0x5F
        }
    }

    /// Why a name is reserved, or nil if it is not.
    static func reservation(of name: String) -> String? {
        let lowered = name.lowercased()
        if lowered.hasPrefix("cloudstore") { return "names starting with \"cloudstore\" belong to CloudStore's own tables" }
        if lowered.hasPrefix("sqlite_") { return "names starting with \"sqlite_\" belong to SQLite" }
        if name.hasPrefix("_") { return "names starting with \"_\" belong to CloudKit" }
        return nil
    }

    private func entityProblems(_ entity: EntityDescription) -> [SchemaProblem] {
        var problems: [SchemaProblem] = []
        func problem(_ property: String?, _ message: String) {
            problems.append(SchemaProblem(entity: entity.name, property: property, message))
        }

        if !Self.isIdentifier(entity.name) {
            problem(nil, "\"\(entity.name)\" is not a valid entity name (\(Self.identifierRule))")
        } else if let reason = Self.reservation(of: entity.name) {
            problem(nil, "the entity name is reserved: \(reason)")
        } else if entity.name == "Users" {
            problem(nil, "the entity name is reserved: \"Users\" is CloudKit's record type for user records")
        }
        if let renamedFrom = entity.renamedFrom {
            if renamedFrom == entity.name {
                problem(nil, "renamedFrom must name the previous name, not the current one")
            } else if self.entity(named: renamedFrom) != nil {
                problem(nil, "renamedFrom \"\(renamedFrom)\" is still the name of another entity")
            }
        }

        var seenProperties: [String: String] = [:]
        let propertyNames = entity.attributes.map(\.name) + entity.relationships.map(\.name)
        for name in propertyNames {
            if let previous = seenProperties[name.lowercased()] {
                problem(
                    name,
                    previous == name
                        ? "declared twice"
                        : "differs from \(previous) only in case (SQLite column names ignore case)")
            } else {
                seenProperties[name.lowercased()] = name
            }
            if !Self.isIdentifier(name) {
                problem(name, "\"\(name)\" is not a valid property name (\(Self.identifierRule))")
            } else if name.lowercased() == "id" {
                problem(name, "\"id\" is reserved: every object has an implicit UUID id, its record name")
            } else if Self.systemFieldNames.contains(name.lowercased()) {
                problem(name, "\"\(name)\" is reserved: CloudKit uses it for a system field")
            } else if let reason = Self.reservation(of: name) {
                problem(name, "the name is reserved: \(reason)")
            }
        }

        for attribute in entity.attributes {
            problems += attributeProblems(attribute, in: entity)
        }
        for relationship in entity.relationships {
            problems += relationshipProblems(relationship, in: entity)
        }

        let indexable = Set(entity.attributes.map(\.name) + entity.toOneRelationships.map(\.name))
        for (kind, lists) in [("index", entity.indexes), ("uniqueness constraint", entity.uniquenessConstraints)] {
            for list in lists {
                if list.isEmpty {
                    problem(nil, "an \(kind) must name at least one property")
                }
                for name in list where !indexable.contains(name) {
                    problem(
                        nil,
                        "\(kind) [\(list.joined(separator: ", "))] names \"\(name)\", which is not an attribute or to-one relationship")
                }
            }
        }
        if entity.duplicateKeyRule != .merge && entity.uniquenessConstraints.isEmpty {
            problem(
                nil,
                "duplicateKeyRule \"\(entity.duplicateKeyRule.rawValue)\" needs a uniqueness constraint to apply to; declare one or remove the rule")
        }
        if entity.isMirrored {
            // The server compares a constraint's values as record fields: an asset's are a file's.
            for name in Set(entity.uniquenessConstraints.joined()).sorted() {
                if let attribute = entity.attribute(named: name), attribute.allowsExternalStorage {
                    problem(
                        name,
                        "an attribute with external storage cannot be in a uniqueness constraint of a mirrored entity (the server stores its bytes as an asset, not a value it compares); remove it from the constraint or store it inline")
                }
                if let attribute = entity.attribute(named: name), attribute.isEncrypted {
                    problem(
                        name,
                        "an encrypted attribute cannot be in a uniqueness constraint of a mirrored entity (the server sees only ciphertext, which differs for equal values); remove it from the constraint or remove \"encrypted\"")
                }
            }
        }
        return problems
    }

    private func attributeProblems(_ attribute: AttributeDescription, in entity: EntityDescription) -> [SchemaProblem] {
        var problems: [SchemaProblem] = []
        func problem(_ message: String) {
            problems.append(SchemaProblem(entity: entity.name, property: attribute.name, message))
        }
        if let value = attribute.defaultValue {
            if value.isNull && !attribute.isOptional {
                problem("the default is null but the attribute is not optional")
            } else if let type = value.type, type != attribute.type {
                problem("the default is \(article(type.rawValue)) \(type.rawValue) but the attribute is \(article(attribute.type.rawValue)) \(attribute.type.rawValue)")
            }
        }
        let hasDefault = attribute.defaultValue.map { !$0.isNull } ?? false
        if entity.isMirrored && !attribute.isOptional && !hasDefault {
            problem("a mirrored attribute must be optional or have a default (a record from another device may not carry it)")
        }
        if attribute.renamedFrom == attribute.name {
            problem("renamedFrom must name the previous name, not the current one")
        }
        if attribute.allowsExternalStorage && attribute.type != .data {
            problem(
                "externalStorage applies to data attributes only, and this one is \(article(attribute.type.rawValue)) \(attribute.type.rawValue); remove \"externalStorage\" or make the attribute data")
        }
        if attribute.allowsExternalStorage, let value = attribute.defaultValue, !value.isNull {
            problem("an attribute with externalStorage cannot have a default other than null; make it optional instead")
        }
        if attribute.isEncrypted && !entity.isMirrored {
            problem("\"encrypted\" protects a value on the server, and this entity is not mirrored; remove \"encrypted\" (the device's own file is not encrypted)")
        }
        return problems
    }

    private func relationshipProblems(
        _ relationship: RelationshipDescription, in entity: EntityDescription
    ) -> [SchemaProblem] {
        var problems: [SchemaProblem] = []
        func problem(_ message: String) {
            problems.append(SchemaProblem(entity: entity.name, property: relationship.name, message))
        }
        if relationship.renamedFrom == relationship.name {
            problem("renamedFrom must name the previous name, not the current one")
        }
        if entity.isMirrored && relationship.deleteRule == .deny {
            problem(
                "the deny delete rule is not allowed in a mirrored schema (another device could not honour it); use nullify or cascade")
        }
        guard let destination = self.entity(named: relationship.destination) else {
            problem("destination \"\(relationship.destination)\" is not an entity of the schema")
            return problems
        }
        if entity.isMirrored && !destination.isMirrored {
            problem("a mirrored entity cannot relate to \(destination.name), which is not mirrored")
        }
        guard let inverseName = relationship.inverse else {
            if entity.isMirrored { problem("a mirrored relationship needs an inverse") }
            return problems
        }
        guard let inverse = destination.relationship(named: inverseName) else {
            problem("inverse \"\(inverseName)\" is not a relationship of \(destination.name)")
            return problems
        }
        // When the inverse's own inverse is missing or names nothing here, the problem is reported on
        // the inverse's side; repeating it here would only add noise.
        let reportedThere =
            inverse.inverse.map { entity.relationship(named: $0) == nil } ?? destination.isMirrored
        if !reportedThere && (inverse.destination != entity.name || inverse.inverse != relationship.name) {
            let pointsTo = "\(inverse.destination).\(inverse.inverse ?? "(no inverse)")"
            problem("inverse \(destination.name).\(inverse.name) points back to \(pointsTo), not to \(entity.name).\(relationship.name)")
        }
        return problems
    }
}
