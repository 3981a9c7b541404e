import Foundation

/// The shape of an app's data: its entities, their attributes and relationships.
///
/// A schema is a value. Build it from `@Model` types, describe it in Swift, or load it from a
/// schema file (see ``Schema/load(contentsOf:)``); all give the same thing, and ``validate()``
/// checks it against the rules a mirrored store needs.
///
/// ```swift
/// let schema = Schema(name: "Notes", version: 1, entities: [Folder.self, Note.self])
///
/// // The same entities described by hand, for code that has no model types:
/// let described = Schema(name: "Notes", version: 1, entities: [
///     EntityDescription("Folder",
///         attributes: [.init("title", .string, default: .string(""))],
///         relationships: [.toMany("notes", to: "Note", inverse: "folder", deleteRule: .cascade)]),
///     EntityDescription("Note",
///         attributes: [.init("title", .string, default: .string("")),
///                      .init("body", .string, optional: true)],
///         relationships: [.toOne("folder", to: "Folder", inverse: "notes")]),
/// ])
/// try described.validate()
/// ```
public struct Schema: Hashable, Sendable {
    /// The schema's name (`"Notes"`): the store records it, and opening a store written under
    /// another name fails.
    public var name: String
    /// Increases with every change an app ships; the store migrates when it opens with a newer one.
    public var version: Int
    /// The entities, in the order they were given.
    public var entities: [EntityDescription]

    /// A schema of entities described by hand; ``init(name:version:entities:)-555rg`` builds one
    /// from `@Model` types.
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
    /// The entity's name: its table's name in the store and its record type in the cloud.
    public var name: String
    /// The entity's attributes, in declaration order.
    public var attributes: [AttributeDescription]
    /// The entity's relationships, in declaration order.
    public var relationships: [RelationshipDescription]
    /// Indexes, each a list of attribute or to-one relationship names.
    public var indexes: [[String]]
    /// Uniqueness constraints, each a list of attribute or to-one relationship names whose
    /// values no two objects share. On a mirrored entity the server enforces them per zone, and
    /// ``duplicateKeyRule`` says what sync does when two devices create the same key offline.
    public var uniquenessConstraints: [[String]]
    /// Whether the entity is mirrored to the cloud (default true).
    public var isMirrored: Bool
    /// The entity's name in the previous schema version, when it was renamed.
    public var renamedFrom: String?
    /// What sync does with an object made here whose unique key another device's object already
    /// has on the server (default ``DuplicateKeyRule/merge``).
    public var duplicateKeyRule: DuplicateKeyRule

    /// An entity named `name`, mirrored unless `isMirrored` is false.
    public init(
        _ name: String, attributes: [AttributeDescription] = [], relationships: [RelationshipDescription] = [],
        indexes: [[String]] = [], uniquenessConstraints: [[String]] = [], isMirrored: Bool = true,
        renamedFrom: String? = nil, duplicateKeyRule: DuplicateKeyRule = .merge
    ) {
        self.name = name
        self.attributes = attributes
        self.relationships = relationships
        self.indexes = indexes
        self.uniquenessConstraints = uniquenessConstraints
        self.isMirrored = isMirrored
        self.renamedFrom = renamedFrom
        self.duplicateKeyRule = duplicateKeyRule
    }

    /// The attribute with this name, if the entity has one.
    public func attribute(named name: String) -> AttributeDescription? {
        attributes.first { $0.name == name }
    }

    /// The relationship with this name, if the entity has one.
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
    /// The attribute's name: its column in the store and its field in records.
    public var name: String
    /// The kind of value it holds.
    public var type: AttributeType
    /// Whether an object may have no value for it (null).
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
    /// Whether the value travels end-to-end encrypted: the server stores and serves only
    /// ciphertext (`ENCRYPTED_BYTES`) that the user's devices seal and open with their zone key.
    /// On the device the value is plain in the store, so queries, sorts and history work as for
    /// any attribute. SwiftData's `@Attribute(.allowsCloudEncryption)`, CloudKit's `encryptedValues`.
    /// See <doc:EndToEndEncryption>.
    public var isEncrypted: Bool

    /// An attribute named `name` of type `type`: required unless `optional`, with no default unless
    /// one is given.
    public init(
        _ name: String, _ type: AttributeType, optional: Bool = false, default defaultValue: AttributeValue? = nil,
        renamedFrom: String? = nil, preservesValueAfterDeletion: Bool = false, externalStorage: Bool = false,
        encrypted: Bool = false
    ) {
        self.name = name
        self.type = type
        self.isOptional = optional
        self.defaultValue = defaultValue
        self.renamedFrom = renamedFrom
        self.preservesValueAfterDeletion = preservesValueAfterDeletion
        self.allowsExternalStorage = externalStorage
        self.isEncrypted = encrypted
    }

    /// The record field type the attribute travels as: `ASSETID` for external storage (its bytes
    /// sealed when encrypted), `ENCRYPTED_BYTES` for another encrypted attribute, else its type's
    /// (``AttributeType/fieldType``).
    public var fieldType: FieldType { allowsExternalStorage ? .asset : isEncrypted ? .encryptedBytes : type.fieldType }
}

/// One relationship of an entity. Relationships are always optional: a to-one may be nil and a
/// to-many may be empty.
public struct RelationshipDescription: Hashable, Sendable {
    /// The relationship's name.
    public var name: String
    /// The name of the entity it relates to.
    public var destination: String
    /// Whether it relates many objects (true) or at most one (false).
    public var isToMany: Bool
    /// The relationship on the destination that points back. Required in a mirrored schema.
    public var inverse: String?
    /// What deleting an object does to the objects this relationship relates (`nullify` by default).
    public var deleteRule: DeleteRule
    /// The relationship's name in the previous schema version, when it was renamed.
    public var renamedFrom: String?

    /// A relationship named `name` to `destination`; ``toOne(_:to:inverse:deleteRule:)`` and
    /// ``toMany(_:to:inverse:deleteRule:)`` read better.
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

/// What sync does when two devices made objects with the same unique key (a
/// ``EntityDescription/uniquenessConstraints`` entry) and one reaches the server first: the
/// server holds one record per key and zone, and refuses the second (`UNIQUE_FIELD_ERROR`, naming
/// the record that has the key). The rule decides for the device whose object came second.
///
/// ```swift
/// @Model(uniquenessConstraints: [["name"]])                              // merge
/// struct Tag { var id = UUID.timeOrdered(); var name = "" }
///
/// @Model(uniquenessConstraints: [["handle"]], duplicateKeyRule: .refuse) // refuse
/// struct Account { var id = UUID.timeOrdered(); var handle = "" }
/// ```
public enum DuplicateKeyRule: String, Hashable, Sendable, CaseIterable {
    /// The object made here is merged into the one the server has: that object keeps its
    /// identity and takes this one's values where the conflict policy says, whatever referred to
    /// this one refers to it, this one is deleted, and the merge is in the conflict log. Right when
    /// the key names the object ("Groceries" is one list, wherever it was created).
    case merge
    /// The object made here is refused: it stays on this device, is not uploaded, and is listed by
    /// ``PersistentCloudContainer/refusedUploads()`` with the server's `UNIQUE_FIELD_ERROR`, which
    /// names the record that has the key. The other device's object waits aside, not applied
    /// here, until the app gives this one another key (it then uploads, and the other arrives) or
    /// deletes it. Right when two objects with one key are a mistake only a person can settle (two
    /// accounts claiming one handle).
    case refuse

    /// The rule a schema file names, `"merge"` or `"refuse"`; nil for any other text.
    public init?(rawValue: String) {
        switch rawValue {
        case "merge": self = .merge
        case "refuse": self = .refuse
        default: return nil
        }
    }
}
