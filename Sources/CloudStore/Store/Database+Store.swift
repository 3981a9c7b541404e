import Foundation
import GRDB
import GRDBSQLite

/// The store's hot paths bind and read prepared statements with SQLite's C API: the statements
/// come from GRDB's per-connection cache, so they are prepared once per connection.
extension Database {
    /// A prepared statement for `sql`, reset and ready to bind.
    func prepared(_ sql: String) throws -> OpaquePointer {
        let statement = try cachedStatement(sql: sql).sqliteStatement
        sqlite3_reset(statement)
        return statement
    }

    /// Binds `arguments` (1-based) to a prepared statement.
    func bind(_ arguments: [AttributeValue], to statement: OpaquePointer, sql: String) throws {
        for (index, value) in arguments.enumerated() {
            let code = value.bind(to: statement, at: Int32(index + 1))
            if code != SQLITE_OK { throw error(code, sql: sql) }
        }
    }

    /// Runs a statement that returns no rows.
    func run(_ sql: String, _ arguments: [AttributeValue] = []) throws {
        let statement = try prepared(sql)
        try bind(arguments, to: statement, sql: sql)
        try step(statement, sql: sql)
    }

    /// Steps a bound statement to its end and resets it.
    func step(_ statement: OpaquePointer, sql: String) throws {
        let code = sqlite3_step(statement)
        if code != SQLITE_DONE && code != SQLITE_ROW {
            let failure = error(code, sql: sql)
            sqlite3_reset(statement)
            throw failure
        }
        sqlite3_reset(statement)
    }

    /// Runs a query and calls `row` for each row, with the statement positioned on it.
    func each(_ sql: String, _ arguments: [AttributeValue] = [], _ row: (OpaquePointer) throws -> Void) throws {
        try eachWhile(sql, arguments) { statement in
            try row(statement)
            return true
        }
    }

    /// Runs a query and calls `row` for each row, with the statement positioned on it, while `row`
    /// answers true.
    func eachWhile(_ sql: String, _ arguments: [AttributeValue] = [], _ row: (OpaquePointer) throws -> Bool) throws {
        let statement = try prepared(sql)
        defer { sqlite3_reset(statement) }
        try bind(arguments, to: statement, sql: sql)
        while true {
            let code = sqlite3_step(statement)
            if code == SQLITE_DONE { return }
            guard code == SQLITE_ROW else { throw error(code, sql: sql) }
            guard try row(statement) else { return }
        }
    }

    /// The UUIDs in the first column of a query's rows.
    func uuids(_ sql: String, _ arguments: [AttributeValue] = []) throws -> [UUID] {
        var ids: [UUID] = []
        try each(sql, arguments) { statement in
            if let id = columnUUID(statement, 0) { ids.append(id) }
        }
        return ids
    }

    /// The first column of the first row as an integer, if any.
    func integer(_ sql: String, _ arguments: [AttributeValue] = []) throws -> Int64? {
        var result: Int64?
        try each(sql, arguments) { statement in
            if result == nil, sqlite3_column_type(statement, 0) != SQLITE_NULL {
                result = sqlite3_column_int64(statement, 0)
            }
        }
        return result
    }

    /// The connection's current error as a GRDB error.
    func error(_ code: Int32, sql: String) -> DatabaseError {
        let connection = sqliteConnection
        let extended = connection.map { sqlite3_extended_errcode($0) } ?? code
        let message = connection.flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) }
        return DatabaseError(resultCode: ResultCode(rawValue: extended), message: message, sql: sql)
    }
}
