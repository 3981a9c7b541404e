import Foundation

/// The shape of an app's data: its entities, their attributes and relationships.
///
/// A schema is a value. Build it in Swift or load it from a schema file (see ``Schema/load(contentsOf:)``);
/// both give the same thing, and ``validate()`` checks it against the rules a mirrored store needs.
///
/// ```swift
/// let schema = Schema(name: "Notes", version: 1, entities: [
///     EntityDescription("Folder",
///         attributes: [.init("title", .string, default: .string(""))],
///         relationships: [.toMany("notes", to: "Note", inverse: "folder", deleteRule: .cascade)]),
///     EntityDescription("Note",
///         attributes: [.init("title", .string, default: .string("")),
///                      .init("body", .string, optional: true)],
///         relationships: [.toOne("folder", to: "Folder", inverse: "notes")]),
/// ])
/// try schema.validate()
/// ```
public struct Schema: Hashable, Sendable {
    public var name: String
    /// Increases with every change an app ships; the store migrates when it opens with a newer one.
    public var version: Int
    public var entities: [EntityDescription]

    public init(name: String, version: Int, entities: [EntityDescription]) {
        self.name = name
        self.version = version
        self.entities = entities
    }

    /// The entity with this name.
    public func entity(named name: String) -> EntityDescription? {
        entities.first { $0.name == name }
    }

    /// The entities that are mirrored to the cloud.
    public var mirroredEntities: [EntityDescription] { entities.filter(\.isMirrored) }
}

/// One entity of a schema: a kind of object with attributes and relationships. Every object also
/// has an implicit `id` (a UUID), which is its record name in the cloud.
public struct EntityDescription: Hashable, Sendable {
    public var name: String
    public var attributes: [AttributeDescription]
    public var relationships: [RelationshipDescription]
    /// Indexes, each a list of attribute or to-one relationship names.
    public var indexes: [[String]]
    /// Uniqueness constraints, each a list of attribute names. Not allowed on mirrored entities:
    /// two devices can create the same values offline and the cloud cannot refuse either.
    public var uniquenessConstraints: [[String]]
    /// Whether the entity is mirrored to the cloud (default true).
    public var isMirrored: Bool
    /// The entity's name in the previous schema version, when it was renamed.
    public var renamedFrom: String?

    public init(
        _ name: String, attributes: [AttributeDescription] = [], relationships: [RelationshipDescription] = [],
        indexes: [[String]] = [], uniquenessConstraints: [[String]] = [], isMirrored: Bool = true,
        renamedFrom: String? = nil
    ) {
        self.name = name
        self.attributes = attributes
        self.relationships = relationships
        self.indexes = indexes
        self.uniquenessConstraints = uniquenessConstraints
        self.isMirrored = isMirrored
        self.renamedFrom = renamedFrom
    }

    public func attribute(named name: String) -> AttributeDescription? {
        attributes.first { $0.name == name }
    }

    public func relationship(named name: String) -> RelationshipDescription? {
        relationships.first { $0.name == name }
    }

    /// The relationships stored on this entity's rows and records: to-one relationships.
    public var toOneRelationships: [RelationshipDescription] { relationships.filter { !$0.isToMany } }

    /// The attributes whose values history keeps in the tombstone of a deleted object.
    public var preservedAttributes: [AttributeDescription] { attributes.filter(\.preservesValueAfterDeletion) }
}

/// One attribute of an entity.
public struct AttributeDescription: Hashable, Sendable {
    public var name: String
    public var type: AttributeType
    public var isOptional: Bool
    /// The value of a new object that does not set it.
    public var defaultValue: AttributeValue?
    /// The attribute's name in the previous schema version, when it was renamed.
    public var renamedFrom: String?
    /// Whether history keeps the value in the tombstone when the object is deleted.
    public var preservesValueAfterDeletion: Bool
    /// For a `data` attribute: whether its bytes live in a file beside the store (named by their
    /// SHA-256) rather than in the row, and travel as an `ASSETID` asset rather than inline `BYTES`.
    /// Core Data's "Allows External Storage". Entities still read and write `Data`.
    public var allowsExternalStorage: Bool

    public init(
        _ name: String, _ type: AttributeType, optional: Bool = false, default defaultValue: AttributeValue? = nil,
        renamedFrom: String? = nil, preservesValueAfterDeletion: Bool = false, externalStorage: Bool = false
    ) {
        self.name = name
        self.type = type
        self.isOptional = optional
        self.defaultValue = defaultValue
        self.renamedFrom = renamedFrom
        self.preservesValueAfterDeletion = preservesValueAfterDeletion
        self.allowsExternalStorage = externalStorage
    }

    /// The record field type the attribute travels as: `ASSETID` for external storage, else its
    /// type's (``AttributeType/fieldType``).
    public var fieldType: FieldType { allowsExternalStorage ? .asset : type.fieldType }
}

/// One relationship of an entity. Relationships are always optional: a to-one may be nil and a
/// to-many may be empty.
public struct RelationshipDescription: Hashable, Sendable {
    public var name: String
    public var destination: String
    public var isToMany: Bool
    /// The relationship on the destination that points back. Required in a mirrored schema.
    public var inverse: String?
    public var deleteRule: DeleteRule
    /// The relationship's name in the previous schema version, when it was renamed.
    public var renamedFrom: String?

    public init(
        _ name: String, destination: String, toMany: Bool, inverse: String?, deleteRule: DeleteRule = .nullify,
        renamedFrom: String? = nil
    ) {
        self.name = name
        self.destination = destination
        self.isToMany = toMany
        self.inverse = inverse
        self.deleteRule = deleteRule
        self.renamedFrom = renamedFrom
    }

    /// A to-one relationship.
    public static func toOne(
        _ name: String, to destination: String, inverse: String?, deleteRule: DeleteRule = .nullify
    ) -> RelationshipDescription {
        RelationshipDescription(name, destination: destination, toMany: false, inverse: inverse, deleteRule: deleteRule)
    }

    /// A to-many relationship.
    public static func toMany(
        _ name: String, to destination: String, inverse: String?, deleteRule: DeleteRule = .nullify
    ) -> RelationshipDescription {
        RelationshipDescription(name, destination: destination, toMany: true, inverse: inverse, deleteRule: deleteRule)
    }
}

extension Schema {
    /// The kind of a relationship, from it and its inverse.
    public enum RelationshipKind: Hashable, Sendable {
        /// A to-one whose inverse is to-one.
        case oneToOne
        /// A to-one whose inverse is to-many (the foreign key side).
        case manyToOne
        /// A to-many whose inverse is to-one (navigated through the inverse).
        case oneToMany
        /// A to-many whose inverse is to-many: stored as links.
        case manyToMany
    }

    /// The inverse of a relationship, if the schema declares it.
    public func inverse(of relationship: RelationshipDescription) -> RelationshipDescription? {
        guard let inverse = relationship.inverse else { return nil }
        return entity(named: relationship.destination)?.relationship(named: inverse)
    }

    /// What kind a relationship is. A relationship without an inverse counts as if its inverse were
    /// to-many.
    public func kind(of relationship: RelationshipDescription) -> RelationshipKind {
        let inverseIsToMany = inverse(of: relationship)?.isToMany ?? true
        switch (relationship.isToMany, inverseIsToMany) {
        case (false, false): return .oneToOne
        case (false, true): return .manyToOne
        case (true, false): return .oneToMany
        case (true, true): return .manyToMany
        }
    }
}
