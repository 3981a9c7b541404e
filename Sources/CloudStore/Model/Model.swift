/// Declares an entity once, on its Swift type: the struct becomes a ``PersistentModel`` whose
/// ``PersistentModel/entityDescription`` is derived from its stored properties, whose key paths
/// name its properties in typed queries, and whose values the store reads and writes column by
/// column.
///
/// ```swift
/// @Model
/// struct Folder {
///     var id = UUID.timeOrdered()
///     var title = ""
///     @Relationship(deleteRule: .cascade, inverse: \Note.folder) var notes: [Note.ID] = []
/// }
///
/// @Model(indexes: [["pinned", "created"]])
/// struct Note {
///     var id = UUID.timeOrdered()
///     @Attribute(.preserveAfterDeletion) var title = ""
///     var body: String?
///     var pinned = false
///     var created: Date?
///     var folder: Folder.ID?                 // to-one relationship
///     @Transient var isSelected = false      // not stored
/// }
///
/// let schema = Schema(name: "Notes", version: 1, entities: [Folder.self, Note.self])
/// ```
///
/// Every stored property but `id` is an attribute or a relationship:
///
/// - An attribute's type is one of `String`, `Int` (and `Int64`, `Int32`, `Int16`, `Int8`,
///   `UInt8`, `UInt16`, `UInt32`), `Double`, `Float`, `Bool`, `Date`, `Data`, `UUID`, `URL`,
///   `Decimal`; an enum with such a raw value (stored by raw value); or any other `Codable` type,
///   stored as JSON. `?` makes it optional; a literal initial value (`= ""`, `= 0`, `= .medium`)
///   is its default.
/// - A to-one relationship is the related object's id, `Folder.ID?`; a to-many relationship is the
///   related objects' ids, `[Tag.ID]`.
///
/// Options: ``Attribute(_:originalName:)``, ``Relationship(deleteRule:inverse:originalName:)``,
/// ``Transient()``; for the entity, `name` (the entity's name, the type's by default),
/// `originalName` (its name in the previous schema version), `mirrored` (false keeps the entity on
/// the device), `indexes` and `uniquenessConstraints` (lists of property names, checked at compile time),
/// `duplicateKeyRule` (what sync does when two devices create the same unique key: ``DuplicateKeyRule``).
///
/// The macro reports at compile time what it can see in one declaration, with a fix-it where the
/// fix is obvious: a property type that cannot be stored, a missing `id`, an attribute of a
/// mirrored entity that is neither optional nor defaulted, a to-one relationship that is not
/// optional, an option on a computed property, an inverse that names another type. What needs the
/// other types too (a relationship without an inverse on either side, names used twice) is checked
/// with the whole schema, when a store opens or by ``Schema/validate()``, every problem at once.
@attached(
    extension, conformances: PersistentModel,
    names: named(ID), named(entityName), named(entityDescription), named(_modelProperties), named(init(_modelRow:)),
    named(_writeModel(to:)))
@attached(member, names: named(CodingKeys))
public macro Model(
    name: String? = nil, originalName: String? = nil, mirrored: Bool = true, indexes: [[String]] = [],
    uniquenessConstraints: [[String]] = [], duplicateKeyRule: DuplicateKeyRule = .merge
) = #externalMacro(module: "CloudStoreMacros", type: "ModelMacro")

/// Options of an attribute of a ``Model(name:originalName:mirrored:indexes:uniquenessConstraints:duplicateKeyRule:)`` type.
///
/// ```swift
/// @Attribute(.externalStorage) var photo: Data?
/// @Attribute(originalName: "rank") var priority = 0
/// ```
@attached(peer)
public macro Attribute(_ options: AttributeDescription.Option..., originalName: String? = nil) =
    #externalMacro(module: "CloudStoreMacros", type: "PropertyMarkerMacro")

/// Options of a relationship of a ``Model(name:originalName:mirrored:indexes:uniquenessConstraints:duplicateKeyRule:)``
/// type: what deleting the object does to the related ones, the inverse (the property of the
/// destination that points back), and the relationship's name in the previous schema version.
///
/// ```swift
/// @Relationship(deleteRule: .cascade, inverse: \Note.folder) var notes: [Note.ID] = []
/// ```
///
/// Declare the inverse on one side of each pair; the schema fills in the other side
/// (``Schema/init(name:version:entities:)-555rg``). Declaring it on
/// both sides of a pair makes each side's attribute refer to the other's, which the compiler
/// reports as a circular reference.
@attached(peer)
public macro Relationship(deleteRule: DeleteRule = .nullify, inverse: AnyKeyPath? = nil, originalName: String? = nil) =
    #externalMacro(module: "CloudStoreMacros", type: "PropertyMarkerMacro")

/// A property of a ``Model(name:originalName:mirrored:indexes:uniquenessConstraints:duplicateKeyRule:)`` type that is
/// not stored: an object read from the store has its initial value, and `Codable` leaves it out.
///
/// ```swift
/// @Transient var isSelected = false
/// ```
@attached(peer)
public macro Transient() = #externalMacro(module: "CloudStoreMacros", type: "PropertyMarkerMacro")

extension AttributeDescription {
    /// An option of ``Attribute(_:originalName:)``.
    public struct Option: Hashable, Sendable {
        let name: String

        /// The bytes of a `Data` attribute live in a file beside the store and travel as an asset
        /// (``AttributeDescription/allowsExternalStorage``).
        public static let externalStorage = Option(name: "externalStorage")
        /// History keeps the value in the tombstone of a deleted object
        /// (``AttributeDescription/preservesValueAfterDeletion``).
        public static let preserveAfterDeletion = Option(name: "preserveAfterDeletion")
        /// An index on the attribute alone.
        public static let indexed = Option(name: "indexed")
        /// A uniqueness constraint on the attribute alone (entities that are not mirrored).
        public static let unique = Option(name: "unique")
        /// The value travels end-to-end encrypted; the server keeps only ciphertext
        /// (``AttributeDescription/isEncrypted``, <doc:EndToEndEncryption>).
        public static let encrypted = Option(name: "encrypted")
    }
}
