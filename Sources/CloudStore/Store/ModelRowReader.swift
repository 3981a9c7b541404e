import Foundation
import GRDB
import GRDBSQLite

/// The current row of a fetch, as the code `@Model` generates reads it: property by property, by
/// the property's number, straight from the statement's columns.
///
/// Each `read` checks the stored value against the Swift type: a null for a property that is not
/// optional, or a value of the wrong kind (a row written outside the store), is an error naming
/// `Entity.property` and the object.
public final class ModelRowReader {
    private let fetch: EntityFetch
    private let layout: ModelLayout
    private let columns: [Int32]
    private var statement: OpaquePointer!
    /// The object's id.
    public private(set) var id = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
    private lazy var jsonDecoder = JSONDecoder()

    init(fetch: EntityFetch, layout: ModelLayout) {
        self.fetch = fetch
        self.layout = layout
        self.columns = layout.statementColumns
    }

    func moveTo(_ statement: OpaquePointer, id: UUID) {
        self.statement = statement
        self.id = id
    }

    // MARK: Direct reads of the common types

    /// Reads a `String` property numbered `property`; a stored null throws.
    public func read(_ type: String.Type, at property: Int) throws -> String {
        let column = try nonNull(property)
        return columnText(statement, column)
    }

    /// Reads the optional `String` property numbered `property`: nil for a stored null.
    public func read(_ type: String?.Type, at property: Int) throws -> String? {
        columnTextOrNil(statement, columns[property])
    }

    /// Reads an `Int64` property numbered `property`; a stored null throws.
    public func read(_ type: Int64.Type, at property: Int) throws -> Int64 {
        try integer(nonNull(property), property)
    }

    /// Reads the optional `Int64` property numbered `property`: nil for a stored null.
    public func read(_ type: Int64?.Type, at property: Int) throws -> Int64? {
        let column = columns[property]
        return sqlite3_column_type(statement, column) == SQLITE_NULL ? nil : try integer(column, property)
    }

    /// Reads an `Int` property numbered `property`; a stored null throws.
    public func read(_ type: Int.Type, at property: Int) throws -> Int {
        try Int(integer(nonNull(property), property))
    }

    /// Reads the optional `Int` property numbered `property`: nil for a stored null.
    public func read(_ type: Int?.Type, at property: Int) throws -> Int? {
        try read(Int64?.self, at: property).map { Int($0) }
    }

    /// Reads a `Double` property numbered `property`; a stored null throws.
    public func read(_ type: Double.Type, at property: Int) throws -> Double {
        try double(nonNull(property), property)
    }

    /// Reads the optional `Double` property numbered `property`: nil for a stored null.
    public func read(_ type: Double?.Type, at property: Int) throws -> Double? {
        let column = columns[property]
        return sqlite3_column_type(statement, column) == SQLITE_NULL ? nil : try double(column, property)
    }

    /// Reads a `Bool` property numbered `property`; a stored null throws.
    public func read(_ type: Bool.Type, at property: Int) throws -> Bool {
        try integer(nonNull(property), property) != 0
    }

    /// Reads the optional `Bool` property numbered `property`: nil for a stored null.
    public func read(_ type: Bool?.Type, at property: Int) throws -> Bool? {
        try read(Int64?.self, at: property).map { $0 != 0 }
    }

    /// Reads a `Date` property numbered `property`; a stored null throws.
    public func read(_ type: Date.Type, at property: Int) throws -> Date {
        try Date(millisecondsSince1970: integer(nonNull(property), property))
    }

    /// Reads the optional `Date` property numbered `property`: nil for a stored null.
    public func read(_ type: Date?.Type, at property: Int) throws -> Date? {
        try read(Int64?.self, at: property).map { Date(millisecondsSince1970: $0) }
    }

    /// Reads a `UUID` property numbered `property`; a stored null throws.
    public func read(_ type: UUID.Type, at property: Int) throws -> UUID {
        let column = try nonNull(property)
        guard let uuid = columnUUID(statement, column) else { throw damaged(property) }
        return uuid
    }

    /// Reads the optional `UUID` property numbered `property`: nil for a stored null.
    public func read(_ type: UUID?.Type, at property: Int) throws -> UUID? {
        let column = columns[property]
        guard sqlite3_column_type(statement, column) != SQLITE_NULL else { return nil }
        guard let uuid = columnUUID(statement, column) else { throw damaged(property) }
        return uuid
    }

    // MARK: Any attribute type, raw-value enums and JSON

    /// Reads a property of an ``AttributeStorable`` type numbered `property`; a stored null throws.
    public func read<T: AttributeStorable>(_ type: T.Type, at property: Int) throws -> T {
        guard let value = try read(T?.self, at: property) else { throw null(property) }
        return value
    }

    /// Reads an optional property of an ``AttributeStorable`` type numbered `property`: nil for a
    /// stored null; a value the type cannot hold (too large, say) throws.
    public func read<T: AttributeStorable>(_ type: T?.Type, at property: Int) throws -> T? {
        let stored = try value(property, as: T.attributeType)
        if stored.isNull { return nil }
        guard let value = T(attributeValue: stored) else {
            throw EntityError(
                entity: layout.table.name, property: name(property),
                "the stored value \(stored) cannot be read as \(T.self) (object \(id.uuidString))")
        }
        return value
    }

    /// Reads a raw-value enum property numbered `property`, stored as its raw value; a stored null,
    /// or a raw value the enum has no case for, throws.
    public func read<T: RawRepresentable & Codable>(_ type: T.Type, at property: Int) throws -> T
    where T.RawValue: AttributeStorable {
        guard let value = try read(T?.self, at: property) else { throw null(property) }
        return value
    }

    /// Reads an optional raw-value enum property numbered `property`: nil for a stored null; a raw
    /// value the enum has no case for throws.
    public func read<T: RawRepresentable & Codable>(_ type: T?.Type, at property: Int) throws -> T?
    where T.RawValue: AttributeStorable {
        guard let raw = try read(T.RawValue?.self, at: property) else { return nil }
        guard let value = T(rawValue: raw) else {
            throw EntityError(
                entity: layout.table.name, property: name(property),
                "the stored value \(raw.attributeValue) is not a raw value of \(T.self) (object \(id.uuidString)); add the case, or change the value")
        }
        return value
    }

    /// Reads a `Codable` property numbered `property`, decoded from its stored JSON; a stored null
    /// throws.
    public func read<T: Codable>(_ type: T.Type, at property: Int) throws -> T {
        guard let value = try read(T?.self, at: property) else { throw null(property) }
        return value
    }

    /// Reads an optional `Codable` property numbered `property`, decoded from its stored JSON: nil
    /// for a stored null.
    public func read<T: Codable>(_ type: T?.Type, at property: Int) throws -> T? {
        let column = columns[property]
        guard sqlite3_column_type(statement, column) != SQLITE_NULL else { return nil }
        do {
            return try jsonDecoder.decode(T.self, from: columnData(statement, column))
        } catch {
            throw EntityError(
                entity: layout.table.name, property: name(property),
                "the stored JSON cannot be read as \(T.self) (object \(id.uuidString)): \(error)")
        }
    }

    /// The ids of the objects a to-many relationship relates.
    public func readToMany(at property: Int) throws -> [UUID] {
        guard case .toMany(let relationship) = layout.slots[property] else { return [] }
        return try fetch.toMany(relationship)
    }

    // MARK: Checks

    private func name(_ property: Int) -> String { layout.modelTable.names[property] }

    private func nonNull(_ property: Int) throws -> Int32 {
        let column = columns[property]
        if sqlite3_column_type(statement, column) == SQLITE_NULL { throw null(property) }
        return column
    }

    private func null(_ property: Int) -> EntityError {
        EntityError.storedNull(entity: layout.table.name, property: name(property), id: id)
    }

    private func damaged(_ property: Int) -> StoreError {
        layout.table.damagedValue(statement, column: Int(columns[property] - 1), id: id)
    }

    private func integer(_ column: Int32, _ property: Int) throws -> Int64 {
        switch sqlite3_column_type(statement, column) {
        case SQLITE_INTEGER: return sqlite3_column_int64(statement, column)
        default:
            guard case .int64(let value)? = AttributeValue.read(statement, column: column, as: .int64) else {
                throw damaged(property)
            }
            return value
        }
    }

    private func double(_ column: Int32, _ property: Int) throws -> Double {
        switch sqlite3_column_type(statement, column) {
        case SQLITE_FLOAT, SQLITE_INTEGER: return sqlite3_column_double(statement, column)
        default: throw damaged(property)
        }
    }

    /// The stored value of a property as an attribute value of `type`, with external-storage
    /// bytes loaded.
    private func value(_ property: Int, as type: AttributeType) throws -> AttributeValue {
        let column = columns[property]
        guard let value = AttributeValue.read(statement, column: column, as: type) else { throw damaged(property) }
        if case .externalData(let external) = value {
            return .data(try fetch.externalBytes(external, column: Int(column - 1)))
        }
        return value
    }
}
