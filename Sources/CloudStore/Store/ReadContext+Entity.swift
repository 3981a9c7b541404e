import Foundation

/// Typed reads: Swift entity values (see ``Entity``) in and out. To-many relationships the type
/// declares as `[UUID]` are filled from the store, with one query per relationship for a whole
/// fetch (not one per object).
extension ReadContext {
    /// The object with this id, or nil.
    ///
    /// ```swift
    /// let note = try context.fetch(Note.self, id: noteID)
    /// ```
    public func fetch<E: Entity>(_ type: E.Type, id: UUID) throws -> E? {
        let table = try layout.table(E.entityName)
        let fetch = EntityFetch(context: self, table: table, sql: table.selectByIDSQL, arguments: [.uuid(id)], ids: [id])
        return try fetch.entities(E.self).first
    }

    /// The objects that match `condition`, in `sortBy` order, skipping `offset`, at most `limit`.
    ///
    /// ```swift
    /// let page = try context.fetch(Note.self, where: .equals("folder", folderID),
    ///                              sortBy: [.descending("created")], limit: 50, offset: 100)
    /// ```
    public func fetch<E: Entity>(
        _ type: E.Type, where condition: Condition? = nil, sortBy: [SortKey] = [], limit: Int? = nil,
        offset: Int? = nil
    ) throws -> [E] {
        let table = try layout.table(E.entityName)
        let (sql, arguments) = try select(
            table.selectList, from: table, where: condition, sortBy: sortBy, limit: limit, offset: offset)
        return try EntityFetch(context: self, table: table, sql: sql, arguments: arguments).entities(E.self)
    }

    /// How many objects match `condition`.
    public func count<E: Entity>(_ type: E.Type, where condition: Condition? = nil) throws -> Int {
        try count(entityName: E.entityName, where: condition)
    }

    /// Whether the object with this id exists.
    public func exists<E: Entity>(_ type: E.Type, id: UUID) throws -> Bool {
        try exists(entityName: E.entityName, id: id)
    }

    /// The objects a relationship of one object leads to, in either direction.
    ///
    /// ```swift
    /// let notes = try context.related(Note.self, of: Folder.self, id: folderID, through: "notes")
    /// let folder = try context.related(Folder.self, of: Note.self, id: noteID, through: "folder").first
    /// ```
    public func related<Target: Entity, Source: Entity>(
        _ type: Target.Type, of source: Source.Type, id: UUID, through relationship: String
    ) throws -> [Target] {
        let ids = try relatedIDs(entityName: Source.entityName, id: id, relationship: relationship)
        let table = try layout.table(Source.entityName)
        let destination = table.relationship(named: relationship)!.destination
        guard destination == Target.entityName else {
            throw StoreError(
                .invalidValue,
                "\(Source.entityName).\(relationship) leads to \(destination), not to \(Target.entityName); fetch \(destination) objects instead")
        }
        var result: [Target] = []
        for chunk in ids.chunked(into: Self.chunkSize) {
            result += try fetch(Target.self, where: .in("id", Array(chunk)), sortBy: [.ascending("id")])
        }
        return result
    }

    static var chunkSize: Int { 5_000 }

    /// The members of a to-many relationship for many objects, sorted by id.
    func toManyMembers(of ids: [UUID], in table: EntityTable, through name: String) throws -> [UUID: [UUID]] {
        guard let relationship = table.relationship(named: name), relationship.column == nil else {
            throw StoreError(.unknownProperty, "\(table.name).\(name) is not a to-many relationship of \(table.name)")
        }
        let sql: (Int) throws -> String
        switch relationship.kind {
        case .oneToMany:
            let destination = try layout.table(relationship.destination)
            let inverse = relationship.inverse!.name.quotedIdentifier
            sql = { count in
                "SELECT \(inverse), \"id\" FROM \(destination.quotedName) WHERE \(inverse) IN (\(Self.placeholders(count)))"
            }
        default:
            let link = relationship.link!
            let own = link.ownColumn(entity: table.name, relationship: name)
            let other = link.otherColumn(entity: table.name, relationship: name)
            sql = { count in
                "SELECT \"\(own)\", \"\(other)\" FROM \(link.name.quotedIdentifier) WHERE \"\(own)\" IN (\(Self.placeholders(count)))"
            }
        }
        var members: [UUID: [UUID]] = [:]
        for chunk in ids.chunked(into: Self.chunkSize) {
            try db.each(try sql(chunk.count), chunk.map(AttributeValue.uuid)) { statement in
                if let owner = columnUUID(statement, 0), let member = columnUUID(statement, 1) {
                    members[owner, default: []].append(member)
                }
            }
        }
        for key in members.keys { members[key]!.sort { $0.uuidString < $1.uuidString } }
        return members
    }

    static func placeholders(_ count: Int) -> String {
        Array(repeating: "?", count: count).joined(separator: ", ")
    }
}

extension Array {
    func chunked(into size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min($0 + size, count)] }
    }
}
