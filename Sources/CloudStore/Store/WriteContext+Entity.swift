import Foundation

/// Typed writes: Swift entity values (see ``Entity``).
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
        try insert(try schema.snapshot(of: value))
    }

    /// Updates an existing object, recording only the properties whose value changed.
    public func update<E: Entity>(_ value: E) throws {
        try update(try schema.snapshot(of: value))
    }

    /// Inserts the object, or updates it if its id exists.
    public func save<E: Entity>(_ value: E) throws {
        try save(try schema.snapshot(of: value))
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
