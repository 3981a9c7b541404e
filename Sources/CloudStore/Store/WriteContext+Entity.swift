import Foundation

/// Typed writes: Swift entity values (see ``Entity``). Values of `@Model` types
/// (``PersistentModel``) are written column by column; other entities go through `Codable`.
///
/// A value carries every property its type declares, so `update` writes all of them: a declared
/// to-many property (`tags: [UUID]`) replaces the relationship's members. To change one
/// relationship without rewriting the others, use ``WriteContext/addRelated(entityName:id:relationship:_:)``
/// and ``WriteContext/removeRelated(entityName:id:relationship:_:)``.
extension WriteContext {
    /// Inserts a new object; its id must not exist yet.
    ///
    /// ```swift
    /// try context.insert(Note(title: "Groceries", folder: folder.id))
    /// ```
    public func insert<E: Entity>(_ value: E) throws {
        if let model = E.self as? any PersistentModel.Type { return try insertModel(cast(value, to: model)) }
        try insert(try schema.snapshot(of: value))
    }

    /// Updates an existing object, recording only the properties whose value changed.
    public func update<E: Entity>(_ value: E) throws {
        if let model = E.self as? any PersistentModel.Type { return try updateModel(cast(value, to: model)) }
        try update(try schema.snapshot(of: value))
    }

    /// Inserts the object, or updates it if its id exists.
    public func save<E: Entity>(_ value: E) throws {
        if let model = E.self as? any PersistentModel.Type { return try saveModel(cast(value, to: model)) }
        try save(try schema.snapshot(of: value))
    }

    /// A value of an entity type that is a model type, as that model type (the same type: a
    /// model's values are written column by column, not through `Codable`).
    private func cast<E: Entity, Model: PersistentModel>(_ value: E, to model: Model.Type) -> Model {
        precondition(E.self == Model.self)
        return unsafeBitCast(value, to: Model.self)
    }

    /// Deletes the object with this id, applying delete rules.
    public func delete<E: Entity>(_ type: E.Type, id: UUID) throws {
        try delete(entityName: E.entityName, id: id)
    }

    /// Deletes an object, applying delete rules.
    public func delete<E: Entity>(_ value: E) throws {
        try delete(entityName: E.entityName, id: value.id)
    }
}
