import Foundation
import GRDB
import GRDBSQLite

/// What a write block (``PersistentStore/write(author:contextName:_:)-3mggj``) works with: a unit
/// of work that inserts, updates and deletes objects, reads its own changes, and commits as one
/// SQLite transaction carrying one history transaction.
///
/// ```swift
/// try store.write(author: "app", contextName: "editor") { context in
///     try context.insert(note)
///     note.title = "Renamed"
///     try context.update(note)          // records only the properties that changed
///     try context.delete(Note.self, id: oldID)
/// }
/// ```
///
/// - `insert` of an id that exists throws ``StoreError/Code/objectExists``; `update` and `delete`
///   of an id that does not exist throw ``StoreError/Code/objectNotFound``; `save` inserts or updates.
/// - `update` compares with the stored object and records only properties whose value changed;
///   an update that changes nothing records nothing, and a unit of work that changes nothing
///   records no history transaction.
/// - Delete rules apply: `cascade` deletes related objects (recursively), `nullify` (and
///   `noAction`, since the store keeps no dangling references) clears the inverse. Every cascaded
///   delete and cleared inverse is a change of the same history transaction.
/// - Setting a to-one relationship also updates the inverse: for a one-to-one, the partner's
///   column; for a many-to-one, history records an update of the to-many side on the old and new
///   destination. Changing many-to-many membership records an update on both objects.
/// - If an operation fails after it changed something, the unit of work is rolled back even if
///   the block catches the error: nothing of a failed write is left behind.
public final class WriteContext: ReadContext {
    /// Who writes (`"app"`, `"cloudstore.import"`); recorded in history.
    public let author: String?
    /// Which part of the app writes (`"editor"`); recorded in history.
    public let contextName: String?

    /// Whether the unit of work collects its changes (for history, or for a unit-of-work observer).
    let tracksChanges: Bool
    var recorder = HistoryRecorder()
    /// The first error that left the unit of work half-done.
    private(set) var failure: (any Error)?
    /// Objects being deleted, so cascades through cycles stop.
    private var deleting: Set<HistoryRecorder.Key> = []
    /// Relationship values set in this unit of work, to explain a foreign key failure at commit.
    private(set) var references: [Reference] = []
    private var insertStatements: [Int: OpaquePointer] = [:]
    /// Whether the unit of work replaced or deleted an external-storage value, so the store looks
    /// for files no row names any more once it commits.
    private(set) var releasesExternalData = false
    /// Whether the unit of work applies values a server already holds (mirroring's imports): a
    /// record the server accepted is not measured against ``StorableValues/recordBytesLimit``
    /// again (a server may allow more), while every other rule of ``StorableValues`` holds.
    var appliesServerValues = false

    struct Reference {
        var entity: String
        var relationship: String
        var id: UUID
        var destination: String
        var target: UUID
    }

    init(db: Database, layout: StoreLayout, author: String?, contextName: String?, tracksChanges: Bool) {
        self.author = author
        self.contextName = contextName
        self.tracksChanges = tracksChanges
        super.init(db: db, layout: layout)
    }

    // MARK: Snapshots (untyped)

    /// Inserts a new object. Attributes missing from the snapshot take their default (or null
    /// when optional); `toMany` sets to-many relationships.
    public func insert(_ snapshot: EntitySnapshot) throws {
        try perform {
            let table = try layout.table(snapshot.entityName)
            try insertRow(table, snapshot)
        }
    }

    /// Updates an existing object with the values the snapshot carries (keys it does not carry
    /// keep their value) and the to-many relationships in its `toMany`.
    public func update(_ snapshot: EntitySnapshot) throws {
        try perform {
            let table = try layout.table(snapshot.entityName)
            guard let old = try row(table, id: snapshot.id) else { throw notFound(table, snapshot.id, "update") }
            try updateRow(table, snapshot, old: old)
        }
    }

    /// Inserts the object, or updates it if its id exists.
    public func save(_ snapshot: EntitySnapshot) throws {
        try perform {
            let table = try layout.table(snapshot.entityName)
            if let old = try row(table, id: snapshot.id) {
                try updateRow(table, snapshot, old: old)
            } else {
                try insertRow(table, snapshot)
            }
        }
    }

    /// Deletes an object and applies its relationships' delete rules.
    public func delete(entityName: String, id: UUID) throws {
        try perform {
            let table = try layout.table(entityName)
            guard let row = try row(table, id: id) else { throw notFound(table, id, "delete") }
            try deleteRow(table, id: id, row: row)
        }
    }

    /// Deletes an object, nullifying its relationships instead of cascading: what an import does,
    /// because the objects a cascade removed on the deleting device arrive with deletions of their
    /// own, and an object that does not (another device moved it in meanwhile) must stay.
    func deleteNullifying(entityName: String, id: UUID) throws {
        try perform {
            let table = try layout.table(entityName)
            guard let row = try row(table, id: id) else { throw notFound(table, id, "delete") }
            try deleteRow(table, id: id, row: row, cascades: false)
        }
    }

    /// Sets the members of a to-many relationship (or the target of a to-one, with zero or one id).
    public func setRelated(entityName: String, id: UUID, relationship name: String, to ids: [UUID]) throws {
        try perform {
            let (table, relationship) = try relationship(entityName, name)
            if let column = relationship.column {
                guard ids.count <= 1 else {
                    throw StoreError(.invalidValue, "\(table.name).\(name) is a to-one relationship; give it at most one id")
                }
                try updateRow(table, EntitySnapshot(entityName: table.name, id: id, values: [table.columns[column].name: ids.first.map(AttributeValue.uuid) ?? .null]), old: nil)
            } else {
                try changeToMany(table, id: id, relationship, to: Set(ids), isNew: false)
            }
        }
    }

    /// Adds one member to a to-many relationship (a many-to-many link, or a one-to-many child).
    public func addRelated(entityName: String, id: UUID, relationship name: String, _ member: UUID) throws {
        try perform {
            let (table, relationship) = try toManyRelationship(entityName, name)
            var members = Set(try relatedIDs(of: id, in: table, through: relationship))
            guard members.insert(member).inserted else { return }
            try changeToMany(table, id: id, relationship, to: members, isNew: false)
        }
    }

    /// Removes one member from a to-many relationship; nothing happens if it is not a member.
    public func removeRelated(entityName: String, id: UUID, relationship name: String, _ member: UUID) throws {
        try perform {
            let (table, relationship) = try toManyRelationship(entityName, name)
            var members = Set(try relatedIDs(of: id, in: table, through: relationship))
            guard members.remove(member) != nil else { return }
            try changeToMany(table, id: id, relationship, to: members, isNew: false)
        }
    }

    // MARK: Unit of work

    /// Runs an operation; if it fails after changing rows, the whole unit of work will roll back.
    func perform<T>(_ operation: () throws -> T) throws -> T {
        if let failure {
            throw StoreError(
                .invalidValue,
                "this unit of work already failed and will be rolled back (\(failure)); let the error end the write block")
        }
        let before = db.totalChangesCount
        do {
            return try operation()
        } catch {
            if db.totalChangesCount != before { failure = error }
            throw error
        }
    }

    func record(insert table: EntityTable, _ id: UUID) {
        if tracksChanges { recorder.inserted(entity: table.position, id: id) }
    }

    func record(update table: EntityTable, _ id: UUID, _ properties: some Sequence<String>) {
        if tracksChanges { recorder.updated(entity: table.position, id: id, properties: properties) }
    }

    func record(delete table: EntityTable, _ id: UUID, tombstone: [String: AttributeValue]) {
        if tracksChanges { recorder.deleted(entity: table.position, id: id, tombstone: tombstone) }
    }

    // MARK: Rows

    private func insertRow(_ table: EntityTable, _ snapshot: EntitySnapshot) throws {
        let row = try table.row(from: snapshot, base: nil)
        try insertRow(table, id: snapshot.id, row: row, toMany: snapshot.toMany.map { ($0.key, $0.value) })
    }

    /// Inserts an object's row (every column, external-storage bytes not yet in files) and sets
    /// the to-many relationships in `toMany`.
    func insertRow(_ table: EntityTable, id: UUID, row: [AttributeValue], toMany: [(String, [UUID])]) throws {
        let row = try table.externalizing(row, base: nil, id: id, files: layout.externalData)
        try table.checkStorable(row, columns: row.indices, id: id, checksRecordSize: !appliesServerValues)
        if table.hasOneToOne { try releaseOneToOne(table, id: id, row: row, old: nil) }

        let statement = try insertStatement(table)
        var code = bindUUID(id, to: statement, at: 1)
        for (index, value) in row.enumerated() where code == SQLITE_OK {
            code = value.bind(to: statement, at: Int32(index + 2))
        }
        if code == SQLITE_OK { code = sqlite3_step(statement) }
        if code != SQLITE_DONE {
            let failure = db.error(code, sql: table.insertSQL)
            sqlite3_reset(statement)
            if failure.extendedResultCode == .SQLITE_CONSTRAINT_PRIMARYKEY {
                throw StoreError(
                    .objectExists,
                    "\(table.name) \(id.uuidString) already exists; use update or save to change it, or give the new object a new id")
            }
            throw failure
        }
        sqlite3_reset(statement)
        record(insert: table, id)
        for position in table.toOneRelationships {
            let column = table.relationships[position].column!
            if case .uuid = row[column] {
                try toOneChanged(table, id: id, table.relationships[position], old: .null, new: row[column])
            }
        }
        for (name, ids) in toMany {
            let (_, relationship) = try toManyRelationship(table.name, name)
            try changeToMany(table, id: id, relationship, to: Set(ids), isNew: true)
        }
    }

    private func insertStatement(_ table: EntityTable) throws -> OpaquePointer {
        if let statement = insertStatements[table.position] { return statement }
        let statement = try db.prepared(table.insertSQL)
        insertStatements[table.position] = statement
        return statement
    }

    /// Updates a row with the snapshot's values; `old` is the stored row when already read.
    private func updateRow(_ table: EntityTable, _ snapshot: EntitySnapshot, old stored: [AttributeValue]?) throws {
        let id = snapshot.id
        guard let old = try stored ?? row(table, id: id) else { throw notFound(table, id, "update") }
        let new = try table.row(from: snapshot, base: old)
        try updateRow(table, id: id, row: new, old: old, toMany: snapshot.toMany.map { ($0.key, $0.value) })
    }

    /// Updates an object's stored row `old` to `row` (external-storage bytes not yet in files),
    /// recording the columns that changed, and sets the to-many relationships in `toMany`.
    func updateRow(
        _ table: EntityTable, id: UUID, row: [AttributeValue], old: [AttributeValue], toMany: [(String, [UUID])]
    ) throws {
        let new = try table.externalizing(row, base: old, id: id, files: layout.externalData)
        let changed = new.indices.filter { new[$0] != old[$0] }
        if !releasesExternalData {
            releasesExternalData = table.externalColumns.contains { changed.contains($0) && old[$0] != .null }
        }
        if !changed.isEmpty {
            try table.checkStorable(new, columns: changed, id: id, checksRecordSize: !appliesServerValues)
            try releaseOneToOne(table, id: id, row: new, old: old)
            let assignments = changed.map { "\(table.columnNames[$0].quotedIdentifier) = ?" }.joined(separator: ", ")
            try db.run(
                "UPDATE \(table.quotedName) SET \(assignments) WHERE \"id\" = ?", changed.map { new[$0] } + [.uuid(id)])
            record(update: table, id, changed.map { table.columnNames[$0] })
            for position in table.toOneRelationships {
                let column = table.relationships[position].column!
                guard changed.contains(column) else { continue }
                try toOneChanged(table, id: id, table.relationships[position], old: old[column], new: new[column])
            }
        }
        for (name, ids) in toMany {
            let (_, relationship) = try toManyRelationship(table.name, name)
            try changeToMany(table, id: id, relationship, to: Set(ids), isNew: false)
        }
    }

    private func deleteRow(_ table: EntityTable, id: UUID, row: [AttributeValue], cascades: Bool = true) throws {
        let key = HistoryRecorder.Key(entity: table.position, id: id)
        guard deleting.insert(key).inserted else { return }
        defer { deleting.remove(key) }
        if !releasesExternalData {
            releasesExternalData = table.externalColumns.contains { row[$0] != .null }
        }
        for relationship in table.relationships where relationship.relationship.deleteRule == .deny {
            let related = try relatedIDs(of: id, in: table, through: relationship, row: row)
            if !related.isEmpty {
                throw StoreError(
                    .deleteDenied,
                    "\(table.name) \(id.uuidString) cannot be deleted: its \(relationship.name) relationship has the deny rule and still holds \(related.count) object(s); delete or unlink them first")
            }
        }
        for relationship in table.relationships {
            let related = try relatedIDs(of: id, in: table, through: relationship, row: row)
            if related.isEmpty { continue }
            let destination = try layout.table(relationship.destination)
            if relationship.relationship.deleteRule == .cascade && cascades {
                for other in related where !deleting.contains(HistoryRecorder.Key(entity: destination.position, id: other)) {
                    if let otherRow = try self.row(destination, id: other) {
                        try deleteRow(destination, id: other, row: otherRow)
                    }
                }
            } else {
                try detach(id, from: related, in: table, through: relationship, destination: destination)
            }
        }
        try detachIncomingWithoutInverse(id, of: table)
        try db.run("DELETE FROM \(table.quotedName) WHERE \"id\" = ?", [.uuid(id)])
        var tombstone: [String: AttributeValue] = [:]
        for attribute in table.entity.preservedAttributes {
            if let column = table.columnIndex(of: attribute.name) { tombstone[attribute.name] = row[column] }
        }
        record(delete: table, id, tombstone: tombstone)
    }

    /// Clears the inverse of a relationship on the objects a deleted object was related to.
    private func detach(
        _ id: UUID, from related: [UUID], in table: EntityTable, through relationship: RelationshipLayout,
        destination: EntityTable
    ) throws {
        let inverse = relationship.inverse?.name
        switch relationship.kind {
        case .manyToOne:
            break
        case .oneToOne:
            let column = inverse!.quotedIdentifier
            try db.run(
                "UPDATE \(destination.quotedName) SET \(column) = NULL WHERE \"id\" = ? AND \(column) = ?",
                [.uuid(related[0]), .uuid(id)])
        case .oneToMany:
            let column = inverse!.quotedIdentifier
            try db.run("UPDATE \(destination.quotedName) SET \(column) = NULL WHERE \(column) = ?", [.uuid(id)])
        case .manyToMany:
            let link = relationship.link!
            let own = link.ownColumn(entity: table.name, relationship: relationship.name)
            let other = link.otherColumn(entity: table.name, relationship: relationship.name)
            try db.run("DELETE FROM \(link.name.quotedIdentifier) WHERE \"\(own)\" = ?", [.uuid(id)])
            if link.isSymmetric {
                try db.run("DELETE FROM \(link.name.quotedIdentifier) WHERE \"\(other)\" = ?", [.uuid(id)])
            }
        }
        if let inverse {
            for other in related { record(update: destination, other, CollectionOfOne(inverse)) }
        }
    }

    /// Clears the relationships without an inverse (in non-mirrored entities) that point to a
    /// deleted object, recording an update of each object that pointed to it.
    private func detachIncomingWithoutInverse(_ id: UUID, of table: EntityTable) throws {
        for (source, relationship) in layout.incomingWithoutInverse(to: table.name) {
            let name = relationship.name
            let changed: [UUID]
            if relationship.column != nil {
                changed = try db.uuids(
                    "UPDATE \(source.quotedName) SET \(name.quotedIdentifier) = NULL WHERE \(name.quotedIdentifier) = ? RETURNING \"id\"",
                    [.uuid(id)])
            } else {
                let link = relationship.link!
                let own = link.ownColumn(entity: source.name, relationship: name)
                let other = link.otherColumn(entity: source.name, relationship: name)
                changed = try db.uuids(
                    "DELETE FROM \(link.name.quotedIdentifier) WHERE \"\(other)\" = ? RETURNING \"\(own)\"", [.uuid(id)])
            }
            for object in changed { record(update: source, object, CollectionOfOne(name)) }
        }
    }

    /// The related ids, reading to-one relationships from an already loaded row.
    private func relatedIDs(
        of id: UUID, in table: EntityTable, through relationship: RelationshipLayout, row: [AttributeValue]
    ) throws -> [UUID] {
        if let column = relationship.column {
            if case .uuid(let related) = row[column] { return [related] }
            return []
        }
        return try relatedIDs(of: id, in: table, through: relationship)
    }

    // MARK: Relationships

    /// Before a row takes new one-to-one targets: takes each target away from any other object
    /// that points to it (the partial unique index allows one).
    private func releaseOneToOne(_ table: EntityTable, id: UUID, row: [AttributeValue], old: [AttributeValue]?) throws {
        for relationship in table.relationships where relationship.kind == .oneToOne {
            let column = relationship.column!
            guard case .uuid(let target) = row[column], old?[column] != row[column] else { continue }
            let name = relationship.name.quotedIdentifier
            let released = try db.uuids(
                "UPDATE \(table.quotedName) SET \(name) = NULL WHERE \(name) = ? AND \"id\" <> ? RETURNING \"id\"",
                [.uuid(target), .uuid(id)])
            for other in released { record(update: table, other, CollectionOfOne(relationship.name)) }
        }
    }

    /// After a to-one relationship changed from `old` to `new`: keeps the inverse consistent and
    /// records the change on the objects whose inverse changed.
    private func toOneChanged(
        _ table: EntityTable, id: UUID, _ relationship: RelationshipLayout, old: AttributeValue, new: AttributeValue
    ) throws {
        if case .uuid(let target) = new {
            references.append(
                Reference(entity: table.name, relationship: relationship.name, id: id,
                          destination: relationship.destination, target: target))
        }
        guard let inverse = relationship.inverse else { return }
        let destination = try layout.table(relationship.destination)
        if relationship.kind == .oneToOne {
            let column = inverse.name.quotedIdentifier
            if case .uuid(let previous) = old {
                try db.run(
                    "UPDATE \(destination.quotedName) SET \(column) = NULL WHERE \"id\" = ? AND \(column) = ?",
                    [.uuid(previous), .uuid(id)])
                if db.changesCount > 0 { record(update: destination, previous, CollectionOfOne(inverse.name)) }
            }
            if case .uuid(let target) = new {
                try db.run(
                    "UPDATE \(destination.quotedName) SET \(column) = ? WHERE \"id\" = ? AND \(column) IS NOT ?",
                    [.uuid(id), .uuid(target), .uuid(id)])
                if db.changesCount > 0 { record(update: destination, target, CollectionOfOne(inverse.name)) }
            }
        } else {
            if case .uuid(let previous) = old { record(update: destination, previous, CollectionOfOne(inverse.name)) }
            if case .uuid(let target) = new { record(update: destination, target, CollectionOfOne(inverse.name)) }
        }
    }

    /// Makes a to-many relationship of one object hold exactly `wanted`.
    private func changeToMany(
        _ table: EntityTable, id: UUID, _ relationship: RelationshipLayout, to wanted: Set<UUID>, isNew: Bool
    ) throws {
        let current = isNew ? [] : Set(try relatedIDs(of: id, in: table, through: relationship))
        let removed = current.subtracting(wanted)
        let added = wanted.subtracting(current)
        guard !removed.isEmpty || !added.isEmpty else { return }
        let destination = try layout.table(relationship.destination)
        let inverse = relationship.inverse?.name
        switch relationship.kind {
        case .oneToMany:
            let column = inverse!.quotedIdentifier
            for other in removed.sorted(by: { $0.uuidString < $1.uuidString }) {
                try db.run("UPDATE \(destination.quotedName) SET \(column) = NULL WHERE \"id\" = ?", [.uuid(other)])
            }
            for other in added.sorted(by: { $0.uuidString < $1.uuidString }) {
                guard let otherRow = try row(destination, id: other) else {
                    throw StoreError(
                        .objectNotFound,
                        "\(table.name).\(relationship.name) of \(id.uuidString) cannot include \(destination.name) \(other.uuidString), which does not exist; insert it first")
                }
                if case .uuid(let owner) = otherRow[destination.columnIndex(of: inverse!)!], owner != id {
                    record(update: table, owner, CollectionOfOne(relationship.name))
                }
                try db.run("UPDATE \(destination.quotedName) SET \(column) = ? WHERE \"id\" = ?", [.uuid(id), .uuid(other)])
            }
        case .manyToMany:
            let link = relationship.link!
            let own = link.ownColumn(entity: table.name, relationship: relationship.name)
            let other = link.otherColumn(entity: table.name, relationship: relationship.name)
            let linkName = link.name.quotedIdentifier
            for member in removed {
                try db.run("DELETE FROM \(linkName) WHERE \"\(own)\" = ? AND \"\(other)\" = ?", [.uuid(id), .uuid(member)])
                if link.isSymmetric {
                    try db.run("DELETE FROM \(linkName) WHERE \"\(own)\" = ? AND \"\(other)\" = ?", [.uuid(member), .uuid(id)])
                }
            }
            for member in added {
                try db.run("INSERT OR IGNORE INTO \(linkName) (\"\(own)\", \"\(other)\") VALUES (?, ?)", [.uuid(id), .uuid(member)])
                if link.isSymmetric {
                    try db.run("INSERT OR IGNORE INTO \(linkName) (\"\(own)\", \"\(other)\") VALUES (?, ?)", [.uuid(member), .uuid(id)])
                }
                references.append(
                    Reference(entity: table.name, relationship: relationship.name, id: id,
                              destination: destination.name, target: member))
            }
        case .oneToOne, .manyToOne:
            preconditionFailure("changeToMany is only called for to-many relationships")
        }
        record(update: table, id, CollectionOfOne(relationship.name))
        if let inverse {
            for other in removed.union(added) { record(update: destination, other, CollectionOfOne(inverse)) }
        }
    }

    private func relationship(_ entityName: String, _ name: String) throws -> (EntityTable, RelationshipLayout) {
        let table = try layout.table(entityName)
        guard let relationship = table.relationship(named: name) else {
            let known = table.relationships.map(\.name).joined(separator: ", ")
            throw StoreError(.unknownProperty, "\(table.name).\(name) is not a relationship of \(table.name) (relationships: \(known))")
        }
        return (table, relationship)
    }

    private func toManyRelationship(_ entityName: String, _ name: String) throws -> (EntityTable, RelationshipLayout) {
        let (table, relationship) = try relationship(entityName, name)
        guard relationship.relationship.isToMany else {
            throw StoreError(
                .invalidValue,
                "\(table.name).\(name) is a to-one relationship; set it as a value (the related object's id), not as a list")
        }
        return (table, relationship)
    }

    func notFound(_ table: EntityTable, _ id: UUID, _ operation: String) -> StoreError {
        StoreError(
            .objectNotFound,
            "cannot \(operation) \(table.name) \(id.uuidString): no such object; insert it first (or use save, which inserts or updates)")
    }
}
