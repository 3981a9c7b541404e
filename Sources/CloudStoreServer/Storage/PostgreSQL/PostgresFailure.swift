import PostgresNIO

/// A failure of PostgreSQL, or of the connection to it, in words an operator can act on: what
/// CloudStore was doing, the SQLSTATE, PostgreSQL's message, detail and hint, and the fix when
/// CloudStore knows one.
///
/// PostgresNIO's `PSQLError` describes itself as a redacted placeholder; this is the one place
/// that turns it into a message, at start (``PostgresStorage/prepare()``) and for failures logged
/// at run time. It never holds the password, nor a statement's bound values (user data).
///
/// ```
/// preparing the storage layout, step 1 of 22: creating schema app: PostgreSQL error 42501
/// (insufficient_privilege): permission denied for database cloudstore; grant the PostgreSQL user
/// the privilege named, or run the first start of a new release as a user that has it
/// ```
struct PostgresFailure: Error, CustomStringConvertible, Equatable, Sendable {
    /// What CloudStore was doing: "preparing the storage layout, step 4 of 22: creating index cloudstore_zone_by_db_seq".
    var doing: String
    /// The five-character SQLSTATE of an error PostgreSQL sent; nil for a connection that failed.
    var sqlState: String?
    /// PostgreSQL's message, or what happened to the connection.
    var message: String
    var detail: String?
    var hint: String?
    /// Whether the same work may succeed when tried again (``isTransient(sqlState:)``, or a lost
    /// connection).
    var isTransient: Bool

    init(
        doing: String, sqlState: String?, message: String, detail: String? = nil, hint: String? = nil,
        isTransient: Bool? = nil
    ) {
        self.doing = doing
        self.sqlState = sqlState
        self.message = message
        self.detail = detail
        self.hint = hint
        self.isTransient = isTransient ?? sqlState.map(Self.isTransient(sqlState:)) ?? false
    }

    /// Explains any error thrown while CloudStore was `doing` something with PostgreSQL.
    init(_ error: any Error, doing: String) {
        if let failure = error as? PostgresFailure {
            self = failure
            self.doing = doing
            return
        }
        guard let error = error as? PSQLError else {
            self.init(doing: doing, sqlState: nil, message: "\(error)")
            return
        }
        if let info = error.serverInfo {
            self.init(
                doing: doing, sqlState: info[.sqlState], message: info[.message] ?? "no message",
                detail: info[.detail], hint: info[.hint])
        } else {
            self.init(
                doing: doing, sqlState: nil, message: Self.connectionProblem(error),
                isTransient: [.serverClosedConnection, .connectionError].contains(error.code))
        }
    }

    /// What PostgresNIO says happened to the connection, without the query or its values.
    private static func connectionProblem(_ error: PSQLError) -> String {
        let underlying = error.underlying.map { ": \($0)" } ?? ""
        switch error.code {
        case .serverClosedConnection: return "PostgreSQL closed the connection\(underlying)"
        case .clientClosedConnection: return "the connection was closed\(underlying)"
        case .connectionError: return "cannot connect\(underlying)"
        case .queryCancelled: return "the query was cancelled"
        default: return "\(error.code)\(underlying)"
        }
    }

    var description: String {
        var text = "\(doing): "
        if let sqlState {
            text += "PostgreSQL error \(sqlState)\(Self.conditionNames[sqlState].map { " (\($0))" } ?? ""): \(message)"
        } else {
            text += message
        }
        if let detail, !detail.isEmpty { text += "; detail: \(detail)" }
        if let hint, !hint.isEmpty { text += "; hint: \(hint)" }
        if let fix { text += "; \(fix)" }
        return text
    }

    /// What to do about it, when CloudStore knows.
    var fix: String? {
        guard let sqlState else { return nil }
        if sqlState == "42501" {
            return "grant the PostgreSQL user the privilege named, or run the first start of a new release (which upgrades the storage layout) as a user that has it"
        }
        if sqlState == "3D000" { return "create the database, or correct its name in the PostgreSQL URL" }
        if sqlState.hasPrefix("28") { return "check the user and password of the PostgreSQL URL and PostgreSQL's pg_hba.conf" }
        if sqlState == "53300" { return "raise PostgreSQL's max_connections or run fewer server instances" }
        if sqlState.hasPrefix("53") { return "give PostgreSQL more disk or memory" }
        if isTransient { return "this conflict is transient: retrying may succeed" }
        return nil
    }

    /// Whether work PostgreSQL refused with `sqlState` may succeed when tried again: a lock not
    /// granted in time (55P03), a deadlock (40P01), a serialization failure (40001), PostgreSQL
    /// shutting down or starting (57P01-57P03), a connection problem (class 08).
    static func isTransient(sqlState: String) -> Bool {
        return ["40P01", "55P03", "40001", "57P01", "57P02", "57P03"].contains(sqlState) || sqlState.hasPrefix("08")
    }

    /// PostgreSQL's names of the conditions an operator is likely to meet (Appendix A of its manual).
    static let conditionNames: [String: String] = [
        "08000": "connection_exception", "08003": "connection_does_not_exist", "08006": "connection_failure",
        "0A000": "feature_not_supported", "23505": "unique_violation", "25P02": "in_failed_sql_transaction",
        "28000": "invalid_authorization_specification", "28P01": "invalid_password",
        "3D000": "invalid_catalog_name", "3F000": "invalid_schema_name", "40001": "serialization_failure",
        "40P01": "deadlock_detected", "42501": "insufficient_privilege", "42P01": "undefined_table",
        "42P07": "duplicate_table", "53100": "disk_full", "53200": "out_of_memory",
        "53300": "too_many_connections", "55P03": "lock_not_available", "57014": "query_canceled",
        "57P01": "admin_shutdown", "57P02": "crash_shutdown", "57P03": "cannot_connect_now",
    ]
}
