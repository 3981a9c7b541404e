import Foundation

/// A Swift type whose values are objects of one entity of a schema.
///
/// Declare entities with `@Model` (``Model(name:originalName:mirrored:indexes:uniquenessConstraints:duplicateKeyRule:)``),
/// which makes a struct an entity and derives its schema, typed queries and row code from it
/// (``PersistentModel``). A plain `Codable` struct conforming to `Entity` works too, against an
/// entity declared in a schema of its own, and is read and written through `Codable`.
///
/// Such a struct has a `UUID` `id` and one stored property per attribute; to-one relationships
/// are `UUID?` properties holding the related object's id; a to-many relationship may be declared
/// as `[UUID]` (the store fills it when reading and applies it when saving) or left out. Give new
/// objects time-ordered ids (`UUID.timeOrdered()`): any UUID works, and time-ordered ones keep
/// every index keyed by id in the order objects were made.
///
/// ```swift
/// struct Note: Entity {
///     var id = UUID.timeOrdered()
///     var title = ""
///     var body: String?
///     var pinned = false
///     var created: Date?
///     var priority: Int64 = 0
///     var folder: UUID?        // to-one relationship
///     var tags: [UUID] = []    // many-to-many relationship (optional to declare)
/// }
/// ```
///
/// The entity's name defaults to the type's name; override ``entityName`` when they differ.
/// Property types are checked against the schema when a store opens (see ``Schema/check(_:)-aq32``):
/// a property whose type or optionality does not match its attribute is an error that names it.
public protocol Entity: Codable, Sendable, Identifiable where ID == UUID {
    /// The name of the schema entity this type stores.
    static var entityName: String { get }
}

extension Entity {
    /// The type's name: `Note` stores objects of the entity `Note`.
    public static var entityName: String { String(describing: Self.self) }
}

/// The values of one object, independent of its Swift type: what the store saves and reads, what
/// history and conflicts talk about, and what records are made from.
///
/// ```swift
/// let snapshot = EntitySnapshot(entityName: "Note", id: UUID.timeOrdered(), values: ["title": "Groceries"])
/// try store.write { context in try context.insert(snapshot) }
/// let title = try store.read { try $0.fetchSnapshot(entityName: "Note", id: snapshot.id)?["title"] }
/// ```
public struct EntitySnapshot: Hashable, Sendable {
    /// The entity the object belongs to.
    public var entityName: String
    /// The object's id.
    public var id: UUID
    /// Attributes and to-one relationships (as `.uuid` or `.null`), by name.
    public var values: [String: AttributeValue]
    /// To-many relationships the Swift type declared, as the related objects' ids.
    public var toMany: [String: [UUID]]

    /// The object `id` of `entityName` with these values; an insert fills the attributes left out
    /// with their defaults.
    public init(
        entityName: String, id: UUID, values: [String: AttributeValue] = [:], toMany: [String: [UUID]] = [:]
    ) {
        self.entityName = entityName
        self.id = id
        self.values = values
        self.toMany = toMany
    }

    /// The value of the attribute or to-one relationship `name`; nil when the snapshot does not
    /// carry it (an update then leaves it as it is).
    public subscript(name: String) -> AttributeValue? {
        get { values[name] }
        set { values[name] = newValue }
    }
}

/// A Swift type, a snapshot or a record that does not fit its entity, naming the property and what
/// to change.
///
/// ```
/// Note.priority: the Swift property is a String but the attribute is an int64; declare it as Int64
/// ```
public struct EntityError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The entity (or Swift type) concerned.
    public var entity: String
    /// The property concerned, when the error is about one.
    public var property: String?
    /// What does not fit, and what to change.
    public var message: String

    /// An error about `entity`, and `property` when given.
    public init(entity: String, property: String? = nil, _ message: String) {
        self.entity = entity
        self.property = property
        self.message = message
    }

    /// `Entity.property: message`, or `Entity: message`.
    public var description: String {
        property.map { "\(entity).\($0): \(message)" } ?? "\(entity): \(message)"
    }
}

extension EntityError {
    /// How a required attribute comes to hold a null.
    static let nullCause = "a NaN saved before CloudStore refused it leaves a null"

    /// A fetch found a null in attribute `property` of object `id`, whose Swift property is not optional.
    static func storedNull(entity: String, property: String, id: UUID) -> EntityError {
        EntityError(
            entity: entity, property: property,
            "the stored value is null but the Swift property is not optional (object \(id.uuidString); \(nullCause)): \(ReadContext.repair(entity, property, id)); cloudstore check --store PATH lists every such value")
    }
}
