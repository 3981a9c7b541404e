import Foundation
import GRDB
import GRDBSQLite

/// What a read block (``PersistentStore/read(_:)-40xed``, ``QueryGeneration/read(_:)-2hv4g``)
/// works with: fetch objects by id or by condition, count them, and follow relationships both ways.
/// A ``WriteContext`` is a read context too, which sees the unit of work's own changes.
///
/// A context is valid only inside its block; all its reads see one consistent state of the store.
///
/// ```swift
/// let (pinned, total) = try store.read { context in
///     (try context.fetch(Note.self, where: .equals("pinned", true), sortBy: [.ascending("title")]),
///      try context.count(Note.self))
/// }
/// ```
public class ReadContext {
    /// The connection, inside the block's transaction. Mirroring uses it to read and write its own
    /// `cloudstore_` tables in the same transaction as the rows.
    let db: Database
    let layout: StoreLayout

    init(db: Database, layout: StoreLayout) {
        self.db = db
        self.layout = layout
    }

    /// The bytes of an external-storage value in `column` of a row, for an entity.
    func externalBytes(_ value: ExternalData, of table: EntityTable, column: Int, id: UUID) throws -> Data {
        guard let files = layout.externalData else {
            throw StoreError(.externalData, "\(table.name).\(table.columnNames[column]) of \(id.uuidString) is \(value), and this store has no external data directory")
        }
        do {
            return try files.data(for: value)
        } catch let error as StoreError {
            throw StoreError(error.code, "\(table.name).\(table.columnNames[column]) of \(id.uuidString): \(error.message)")
        }
    }

    /// The schema the store was opened with.
    public var schema: Schema { layout.schema }

    // MARK: Snapshots (untyped)

    /// The object of `entityName` with this id, or nil.
    public func fetchSnapshot(entityName: String, id: UUID) throws -> EntitySnapshot? {
        let table = try layout.table(entityName)
        return try row(table, id: id).map { table.snapshot(id: id, row: $0) }
    }

    /// The objects of `entityName` that match `condition`, in `sortBy` order, skipping `offset`
    /// and returning at most `limit`.
    public func fetchSnapshots(
        entityName: String, where condition: Condition? = nil, sortBy: [SortKey] = [], limit: Int? = nil,
        offset: Int? = nil
    ) throws -> [EntitySnapshot] {
        let table = try layout.table(entityName)
        let (sql, arguments) = try select(
            table.selectList, from: table, where: condition, sortBy: sortBy, limit: limit, offset: offset)
        var snapshots: [EntitySnapshot] = []
        try db.each(sql, arguments) { statement in
            guard let id = columnUUID(statement, 0) else { throw table.damagedID(statement) }
            snapshots.append(table.snapshot(id: id, row: try table.readRow(statement, id: id)))
        }
        return snapshots
    }

    /// The ids of the objects of `entityName` that match `condition`.
    public func fetchIDs(
        entityName: String, where condition: Condition? = nil, sortBy: [SortKey] = [], limit: Int? = nil,
        offset: Int? = nil
    ) throws -> [UUID] {
        let table = try layout.table(entityName)
        let (sql, arguments) = try select(
            "\(table.quotedName).\"id\"", from: table, where: condition, sortBy: sortBy, limit: limit, offset: offset)
        return try db.uuids(sql, arguments)
    }

    /// How many objects of `entityName` match `condition`.
    public func count(entityName: String, where condition: Condition? = nil) throws -> Int {
        let table = try layout.table(entityName)
        let (sql, arguments) = try select("count(*)", from: table, where: condition, sortBy: [], limit: nil, offset: nil)
        return Int(try db.integer(sql, arguments) ?? 0)
    }

    /// Whether an object of `entityName` with this id exists.
    public func exists(entityName: String, id: UUID) throws -> Bool {
        try db.integer(layout.table(entityName).existsSQL, [.uuid(id)]) != nil
    }

    /// The ids of the objects that `relationship` of the object `entityName`/`id` points to: one
    /// or none for a to-one relationship, any number for a to-many one. Works in both directions
    /// of every relationship (a to-many is read from its inverse's column or from the link table).
    public func relatedIDs(entityName: String, id: UUID, relationship name: String) throws -> [UUID] {
        let table = try layout.table(entityName)
        guard let relationship = table.relationship(named: name) else {
            let known = table.relationships.map(\.name).joined(separator: ", ")
            throw StoreError(.unknownProperty, "\(table.name).\(name) is not a relationship of \(table.name) (relationships: \(known))")
        }
        return try relatedIDs(of: id, in: table, through: relationship)
    }

    // MARK: Internals shared with writes

    /// The stored row of an object (values in column order), or nil.
    func row(_ table: EntityTable, id: UUID) throws -> [AttributeValue]? {
        var result: [AttributeValue]?
        try db.each(table.selectByIDSQL, [.uuid(id)]) { statement in
            result = try table.readRow(statement, id: id)
        }
        return result
    }

    func relatedIDs(of id: UUID, in table: EntityTable, through relationship: RelationshipLayout) throws -> [UUID] {
        switch relationship.kind {
        case .oneToOne, .manyToOne:
            guard let row = try row(table, id: id) else { return [] }
            if case .uuid(let related) = row[relationship.column!] { return [related] }
            return []
        case .oneToMany:
            let destination = try layout.table(relationship.destination)
            let inverse = relationship.inverse!.name.quotedIdentifier
            return try db.uuids(
                "SELECT \"id\" FROM \(destination.quotedName) WHERE \(inverse) = ? ORDER BY \"id\"", [.uuid(id)])
        case .manyToMany:
            let link = relationship.link!
            let own = link.ownColumn(entity: table.name, relationship: relationship.name)
            let other = link.otherColumn(entity: table.name, relationship: relationship.name)
            return try db.uuids(
                "SELECT \"\(other)\" FROM \(link.name.quotedIdentifier) WHERE \"\(own)\" = ? ORDER BY \"\(other)\"",
                [.uuid(id)])
        }
    }

    /// A SELECT of `columns` from a table with an optional condition, order, limit and offset.
    func select(
        _ columns: String, from table: EntityTable, where condition: Condition?, sortBy: [SortKey], limit: Int?,
        offset: Int?
    ) throws -> (String, [AttributeValue]) {
        var compiler = QueryCompiler(layout: layout, table: table)
        var sql = "SELECT \(columns) FROM \(table.quotedName)"
        if let condition { sql += " WHERE " + (try compiler.sql(for: condition)) }
        if !sortBy.isEmpty { sql += " ORDER BY " + (try compiler.sql(for: sortBy)) }
        if let limit {
            precondition(limit >= 0, "a fetch limit cannot be negative")
            sql += " LIMIT \(limit)"
        }
        if let offset {
            precondition(offset >= 0, "a fetch offset cannot be negative")
            sql += (limit == nil ? " LIMIT -1" : "") + " OFFSET \(offset)"
        }
        return (sql, compiler.arguments)
    }
}

extension EntityTable {
    /// Reads the columns after `id` of the current row.
    func readRow(_ statement: OpaquePointer, id: UUID) throws -> [AttributeValue] {
        var values: [AttributeValue] = []
        values.reserveCapacity(columnTypes.count)
        for (index, type) in columnTypes.enumerated() {
            guard let value = AttributeValue.read(statement, column: Int32(index + 1), as: type) else {
                throw damagedValue(statement, column: index, id: id)
            }
            values.append(value)
        }
        return values
    }

    /// The error for a column of the current row that does not hold a value of its type.
    func damagedValue(_ statement: OpaquePointer, column index: Int, id: UUID) -> StoreError {
        let type = columnTypes[index]
        return StoreError(
            .invalidValue,
            "\(name).\(columnNames[index]) of \(id.uuidString) holds \(columnText(statement, Int32(index + 1)).debugDescription), which is not \(article(type.rawValue)) \(type.rawValue) (a row written outside the store?); fix the row with SQL")
    }

    func damagedID(_ statement: OpaquePointer) -> StoreError {
        StoreError(
            .invalidValue,
            "\(name) has a row whose id \(columnText(statement, 0).debugDescription) is not a UUID (a row written outside the store?); fix or delete it with SQL")
    }

    /// A snapshot from a row in column order.
    func snapshot(id: UUID, row: [AttributeValue]) -> EntitySnapshot {
        var values: [String: AttributeValue] = [:]
        values.reserveCapacity(columnNames.count)
        for (index, name) in columnNames.enumerated() { values[name] = row[index] }
        return EntitySnapshot(entityName: self.name, id: id, values: values)
    }
}
