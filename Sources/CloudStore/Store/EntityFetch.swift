import Foundation
import GRDB
import GRDBSQLite

/// One fetch of Swift entity values, decoded straight from the current row of the fetch's
/// statement (no snapshot in between), as GRDB decodes its Codable records.
///
/// What a coding key is for this entity (a column and its type, a to-many relationship, or
/// neither) is worked out once per fetch, the first time a row asks for it. A to-many
/// relationship the Swift type declares is loaded for all the fetched objects with one query
/// when the first object decodes it (after one that reads their ids, unless the caller gave them).
final class EntityFetch: StoredEntityValues {
    private let context: ReadContext
    private let table: EntityTable
    private let sql: String
    private let arguments: [AttributeValue]
    /// The ids of all the fetched objects: given, or read when a to-many relationship needs them.
    private var ids: [UUID]?
    /// By to-many relationship: the related ids of each fetched object.
    private var members: [String: [UUID: [UUID]]] = [:]

    /// What a coding key is for the entity.
    private enum Key {
        case column(Int, AttributeType)
        case toMany
        /// Neither: `id`, or not a property of the entity.
        case absent

        var column: Int? {
            if case .column(let index, _) = self { return index }
            return nil
        }
    }

    private var keys: [String: Key] = [:]
    /// The keys the first row asked for, in order. A Swift type asks for its keys in the same
    /// order in every row, so the next key is almost always the one asked for, and finding it
    /// costs a string comparison, not a hash.
    private var order: [(name: String, key: Key)] = []
    /// Where the current row is in `order`: the next key expected.
    private var position = 0
    /// The columns the Swift type did not ask for in the first row; nil during the first row.
    private var unaskedColumns: [Int]?

    // The current row.
    private var statement: OpaquePointer?
    /// The current row's id (a placeholder before the first row: `UUID()` would ask the system
    /// for random bytes on every fetch).
    private(set) var id = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))

    /// A fetch of the rows of `sql`, a SELECT of `table.selectList`. `ids`, when the caller knows
    /// them, are the ids the rows can have (it spares reading them for to-many relationships).
    init(context: ReadContext, table: EntityTable, sql: String, arguments: [AttributeValue], ids: [UUID]? = nil) {
        self.context = context
        self.table = table
        self.sql = sql
        self.arguments = arguments
        self.ids = ids
    }

    /// The Swift values of the rows, in order.
    func entities<E: Entity>(_ type: E.Type) throws -> [E] {
        if let model = type as? any PersistentModel.Type {
            return try models(model, as: type)
        }
        let decoder = EntityDecoder(entity: table.entity, values: self)
        var result: [E] = []
        try context.db.each(sql, arguments) { statement in
            guard let id = columnUUID(statement, 0) else { throw table.damagedID(statement) }
            self.statement = statement
            self.id = id
            position = 0
            result.append(try decoder.decode(E.self))
            if unaskedColumns == nil {
                let asked = Set(keys.values.compactMap(\.column))
                unaskedColumns = table.columns.indices.filter { !asked.contains($0) }
            }
            // A row is damaged when any of its values is, as when it is read into a snapshot, even
            // one in a column the Swift type does not declare. (Declared ones are checked as read.)
            for index in unaskedColumns! { _ = try read(column: index, as: table.columnTypes[index]) }
        }
        return result
    }

    /// The values of a model type, read column by column by the code `@Model` generated.
    func models<Model: PersistentModel>(_ type: Model.Type, layout: ModelLayout? = nil) throws -> [Model] {
        let layout = try layout ?? context.layout.models.layout(type, in: context.layout)
        let reader = ModelRowReader(fetch: self, layout: layout)
        var result: [Model] = []
        try context.db.each(sql, arguments) { statement in
            guard let id = columnUUID(statement, 0) else { throw table.damagedID(statement) }
            self.id = id
            reader.moveTo(statement, id: id)
            result.append(try Model(_modelRow: reader))
        }
        return result
    }

    /// `models(Model.self)` for a caller that knows the type only as an entity type `E`, which is
    /// `Model` itself.
    private func models<Model: PersistentModel, E: Entity>(_ model: Model.Type, as type: E.Type) throws -> [E] {
        precondition(Model.self == E.self)
        return unsafeBitCast(try models(Model.self), to: [E].self)
    }

    /// The bytes of an external-storage value in `column` of the current row.
    func externalBytes(_ value: ExternalData, column: Int) throws -> Data {
        try context.externalBytes(value, of: table, column: column, id: id)
    }

    private func key(_ name: String) -> Key {
        if position < order.count && order[position].name == name {
            position += 1
            return order[position - 1].key
        }
        if position > 0 && order[position - 1].name == name { return order[position - 1].key }
        let key = keys[name] ?? resolve(name)
        if unaskedColumns == nil {  // the first row
            order.append((name, key))
            position = order.count
        }
        return key
    }

    private func resolve(_ name: String) -> Key {
        let key: Key
        if let index = table.columnIndex(of: name) {
            key = .column(index, table.columnTypes[index])
        } else if table.relationship(named: name)?.relationship.isToMany == true {
            key = .toMany
        } else {
            key = .absent
        }
        keys[name] = key
        return key
    }

    // MARK: StoredEntityValues

    var storedNames: [String] { table.columnNames }

    func property(_ name: String) throws -> StoredEntityProperty {
        switch key(name) {
        case .column(let index, let type): .value(try read(column: index, as: type))
        case .toMany: .toMany
        case .absent: .absent
        }
    }

    func storedValueIsNull(_ name: String) -> Bool? {
        guard case .column(let index, _) = key(name) else { return nil }
        return sqlite3_column_type(statement, Int32(index + 1)) == SQLITE_NULL
    }

    func isToMany(_ name: String) -> Bool {
        if case .toMany = key(name) { return true }
        return false
    }

    func toMany(_ name: String) throws -> [UUID] {
        if members[name] == nil {
            if ids == nil { ids = try idsOfRows() }
            members[name] = try context.toManyMembers(of: ids!, in: table, through: name)
        }
        return members[name]?[id] ?? []
    }

    // MARK: Reading

    private func read(column index: Int, as type: AttributeType) throws -> AttributeValue {
        guard let value = AttributeValue.read(statement!, column: Int32(index + 1), as: type) else {
            throw table.damagedValue(statement!, column: index, id: id)
        }
        if case .externalData(let external) = value {
            // An entity sees the bytes (mapped from the file where the system allows).
            return .data(try context.externalBytes(external, of: table, column: index, id: id))
        }
        return value
    }

    /// The ids of all the rows, from a second statement with the same SQL, so the same rows in
    /// the same order (the fetch's own statement is in the middle of its rows).
    private func idsOfRows() throws -> [UUID] {
        let statement = try context.db.makeStatement(sql: sql)
        let texts = try String.fetchAll(statement, arguments: StatementArguments(arguments.map(\.databaseValue)))
        return texts.compactMap(UUID.init(text:))
    }
}
