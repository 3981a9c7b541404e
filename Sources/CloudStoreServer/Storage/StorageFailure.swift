import GRDB
import PostgresNIO

/// What a storage error means for the caller, whichever backend raised it.
enum StorageFailure: Equatable, Sendable {
    /// The storage has no room for the write (SQLite's `SQLITE_FULL`, PostgreSQL's `disk_full` and
    /// its other "insufficient resources" errors, class 53) or could not write it (SQLite's
    /// `SQLITE_IOERR`): nothing was written, and the same request may succeed once space returns.
    case outOfSpace
    /// Anything else.
    case other

    init(_ error: any Error) {
        if let error = error as? DatabaseError {
            self = error.resultCode == .SQLITE_FULL || error.resultCode == .SQLITE_IOERR ? .outOfSpace : .other
        } else if let error = error as? PSQLError, let state = error.serverInfo?[.sqlState], state.hasPrefix("53") {
            self = .outOfSpace
        } else {
            self = .other
        }
    }

    /// Seconds a client is asked to wait before retrying after ``outOfSpace``.
    static let retryAfterSeconds = 30.0
}

extension StorageFailure {
    /// What a storage error says in a log line or an answer, with what the server was `doing`: a
    /// PostgreSQL failure explained (``PostgresFailure``: SQLSTATE, message, detail, hint), never
    /// PostgresNIO's redacted placeholder; anything else as it describes itself (GRDB's errors
    /// leave out the statement's values).
    static func describe(_ error: any Error, doing: String) -> String {
        if error is PSQLError || error is PostgresFailure { return PostgresFailure(error, doing: doing).description }
        return "\(doing): \(error)"
    }
}
