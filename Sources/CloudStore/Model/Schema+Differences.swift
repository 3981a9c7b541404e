extension Schema {
    /// How this schema differs from another, by entity and property: empty when they declare the
    /// same entities, attributes, relationships, indexes and options.
    ///
    /// Keeps a schema file honest against the Swift types it is written from:
    ///
    /// ```swift
    /// let file = try Schema.load(contentsOf: URL(fileURLWithPath: "Schema/Notes.json"))
    /// let fromTypes = Schema(name: "Notes", version: 2, entities: [Folder.self, Note.self, Tag.self])
    /// #expect(fromTypes.differences(from: file).isEmpty)   // else: "Note.title: preserveAfterDeletion true, the other false"
    /// ```
    public func differences(from other: Schema) -> [SchemaProblem] {
        var problems: [SchemaProblem] = []
        if name != other.name { problems.append(SchemaProblem("name \"\(name)\", the other \"\(other.name)\"")) }
        if version != other.version { problems.append(SchemaProblem("version \(version), the other \(other.version)")) }
        for entity in entities where other.entity(named: entity.name) == nil {
            problems.append(SchemaProblem(entity: entity.name, "not in the other schema"))
        }
        for entity in other.entities where self.entity(named: entity.name) == nil {
            problems.append(SchemaProblem(entity: entity.name, "only in the other schema"))
        }
        for entity in entities {
            guard let theirs = other.entity(named: entity.name) else { continue }
            problems += Self.differences(entity, theirs)
        }
        return problems
    }

    private static func differences(_ ours: EntityDescription, _ theirs: EntityDescription) -> [SchemaProblem] {
        var problems: [SchemaProblem] = []
        func compare<Value: Equatable>(_ property: String?, _ what: String, _ mine: Value, _ other: Value) {
            if mine != other {
                problems.append(SchemaProblem(entity: ours.name, property: property, "\(what) \(mine), the other \(other)"))
            }
        }
        compare(nil, "attributes", ours.attributes.map(\.name), theirs.attributes.map(\.name))
        compare(nil, "relationships", ours.relationships.map(\.name), theirs.relationships.map(\.name))
        compare(nil, "indexes", ours.indexes, theirs.indexes)
        compare(nil, "uniquenessConstraints", ours.uniquenessConstraints, theirs.uniquenessConstraints)
        compare(nil, "mirrored", ours.isMirrored, theirs.isMirrored)
        compare(nil, "renamedFrom", ours.renamedFrom.debugDescription, theirs.renamedFrom.debugDescription)
        for attribute in ours.attributes {
            guard let other = theirs.attribute(named: attribute.name) else { continue }
            let name = attribute.name
            compare(name, "type", attribute.type.rawValue, other.type.rawValue)
            compare(name, "optional", attribute.isOptional, other.isOptional)
            compare(name, "default", attribute.defaultValue?.description ?? "none", other.defaultValue?.description ?? "none")
            compare(name, "renamedFrom", attribute.renamedFrom.debugDescription, other.renamedFrom.debugDescription)
            compare(name, "preserveAfterDeletion", attribute.preservesValueAfterDeletion, other.preservesValueAfterDeletion)
            compare(name, "externalStorage", attribute.allowsExternalStorage, other.allowsExternalStorage)
            compare(name, "encrypted", attribute.isEncrypted, other.isEncrypted)
        }
        for relationship in ours.relationships {
            guard let other = theirs.relationship(named: relationship.name) else { continue }
            let name = relationship.name
            compare(name, "destination", relationship.destination, other.destination)
            compare(name, "toMany", relationship.isToMany, other.isToMany)
            compare(name, "inverse", relationship.inverse.debugDescription, other.inverse.debugDescription)
            compare(name, "deleteRule", relationship.deleteRule.rawValue, other.deleteRule.rawValue)
            compare(name, "renamedFrom", relationship.renamedFrom.debugDescription, other.renamedFrom.debugDescription)
        }
        return problems
    }
}
