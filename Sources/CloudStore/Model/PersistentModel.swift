import Foundation
import Synchronization

/// An ``Entity`` declared by its Swift type: what `@Model` makes a struct (see
/// ``Model(name:originalName:mirrored:indexes:uniquenessConstraints:duplicateKeyRule:)``).
///
/// A model knows its entity description, so a ``Schema`` is built from the types
/// (``Schema/init(name:version:entities:)-555rg``), and the key paths of its stored
/// properties name them in typed queries (``FetchDescriptor``). The store reads and writes its
/// values column by column, without `Codable`. Do not conform to it by hand: `@Model` writes the
/// requirements whose names start with an underscore.
public protocol PersistentModel: Entity {
    /// The entity the type's stored properties declare.
    static var entityDescription: EntityDescription { get }

    /// The stored properties, `id` first, in the order the row reader and writer number them.
    static var _modelProperties: [ModelProperty<Self>] { get }

    /// Reads an object from the current row of a fetch.
    init(_modelRow row: ModelRowReader) throws

    /// Writes the object's stored properties.
    func _writeModel(to row: inout ModelRowWriter) throws
}

/// One stored property of a ``PersistentModel``: its name in the entity and its key path.
public struct ModelProperty<Model>: @unchecked Sendable {
    // Unchecked: a key path literal without captures, immutable, is safe to share (what
    // `KeyPath & Sendable` says where the compiler can check it).
    /// The property's name, which is its attribute's or relationship's name in the entity.
    public let name: String
    /// The key path to the stored property.
    public let keyPath: PartialKeyPath<Model>

    /// The property `name` at `keyPath`; `@Model` lists one per stored property.
    public init(_ name: String, _ keyPath: PartialKeyPath<Model>) {
        self.name = name
        self.keyPath = keyPath
    }
}

extension PersistentModel {
    /// The name of the stored property a key path leads to, or nil when it leads elsewhere (a
    /// computed or transient property, or a property of a property).
    ///
    /// ```swift
    /// Note.propertyName(for: \Note.title)  // "title"
    /// ```
    public static func propertyName(for keyPath: PartialKeyPath<Self>) -> String? {
        ModelTable.of(Self.self).name(of: keyPath)
    }
}

/// What the store and typed queries need of a model type, worked out once per type: the
/// properties' names and kinds, and its key paths by property. A class: it is shared by every
/// layout and query of the type, and read on every fetch.
final class ModelTable: @unchecked Sendable {
    // Unchecked: immutable, and its key paths are literals without captures.
    let entity: EntityDescription
    let names: [String]
    /// Per property: whether its Swift type is stored by raw value (an enum), worked out once.
    let isEnum: [Bool]
    private let indexByKeyPath: [AnyKeyPath: Int]

    private init<Model: PersistentModel>(_ type: Model.Type) {
        let entity = Model.entityDescription
        self.entity = entity
        let properties = Model._modelProperties
        names = properties.map(\.name)
        isEnum = properties.map { PredicateCompiler.isEnum(Swift.type(of: $0.keyPath).valueType) }
        var index: [AnyKeyPath: Int] = [:]
        for (position, property) in properties.enumerated() { index[property.keyPath] = position }
        indexByKeyPath = index
    }

    /// The property a key path leads to (0 for `\.id`).
    func index(of keyPath: AnyKeyPath) -> Int? { indexByKeyPath[keyPath] }

    func name(of keyPath: AnyKeyPath) -> String? { index(of: keyPath).map { names[$0] } }

    static func of<Model: PersistentModel>(_ type: Model.Type) -> ModelTable {
        let key = ObjectIdentifier(type)
        if let table = cache.withLock({ $0[key] }) { return table }
        let table = ModelTable(type)
        cache.withLock { $0[key] = table }
        return table
    }

    private static let cache = Mutex<[ObjectIdentifier: ModelTable]>([:])
}

extension Schema {
    /// A schema built from model types, each declared with `@Model`.
    ///
    /// ```swift
    /// let schema = Schema(name: "Notes", version: 1, entities: [Folder.self, Note.self, Tag.self])
    /// try schema.validate()   // every problem at once; opening a store validates too
    /// ```
    ///
    /// An inverse declared on one side of a relationship is filled in on the other. Write the
    /// schema as a file with ``fileData()``, for review, the CLI and other languages.
    public init(name: String, version: Int, entities types: [any PersistentModel.Type]) {
        var entities = types.map { $0.entityDescription }
        for (position, entity) in entities.enumerated() {
            for (index, relationship) in entity.relationships.enumerated() where relationship.inverse == nil {
                let pointingBack = entities.filter { $0.name == relationship.destination }.flatMap { destination in
                    destination.relationships.filter { $0.destination == entity.name && $0.inverse == relationship.name }
                }
                if pointingBack.count == 1 { entities[position].relationships[index].inverse = pointingBack[0].name }
            }
        }
        self.init(name: name, version: version, entities: entities)
    }
}
