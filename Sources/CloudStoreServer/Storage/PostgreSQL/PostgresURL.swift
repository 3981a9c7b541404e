import Foundation

/// A PostgreSQL connection URL: `postgres://user:password@host:port/database?schema=name`.
///
/// `schema` (ext) names the PostgreSQL schema that holds CloudStore's tables (default `public`);
/// `sslmode=require` asks for TLS. `pool_mode=transaction` says the URL reaches PostgreSQL through
/// a transaction pooler (PgBouncer's `pool_mode = transaction`), which hands each transaction
/// whichever server connection is free: the server then keeps nothing in a connection between
/// transactions. `direct_host` and `direct_port` reach the same database without the pooler, for
/// what needs a session of its own (`LISTEN`, upgrading the layout); by default the URL's own.
struct PostgresURL: Hashable, Sendable {
    var host: String
    var port: Int
    var user: String
    var password: String?
    var database: String?
    var schema: String
    var requireTLS: Bool
    /// Whether the URL reaches PostgreSQL through a transaction pooler.
    var transactionPooling: Bool
    /// Where the same database is reached without a transaction pooler; nil: through a
    /// transaction pooler only (`pool_mode=transaction` without `direct_host` or `direct_port`).
    var direct: (host: String, port: Int)? {
        guard transactionPooling else { return (host, port) }
        guard directHost != nil || directPort != nil else { return nil }
        return (directHost ?? host, directPort ?? port)
    }
    private var directHost: String?
    private var directPort: Int?

    init(_ text: String) throws(ServerConfigurationError) {
        guard let components = URLComponents(string: text),
            ["postgres", "postgresql"].contains(components.scheme?.lowercased()),
            let host = components.host, !host.isEmpty
        else {
            throw ServerConfigurationError(
                "the PostgreSQL URL is not of the form postgres://user:password@host:5432/database")
        }
        self.host = host
        self.port = components.port ?? 5432
        self.user = components.user.flatMap { $0.removingPercentEncoding } ?? "postgres"
        self.password = components.password.flatMap { $0.removingPercentEncoding }
        let path = components.path.trimmingCharacters(in: CharacterSet(charactersIn: "/"))
        self.database = path.isEmpty ? nil : path
        let items = components.queryItems ?? []
        self.schema = items.first { $0.name == "schema" }?.value ?? "public"
        self.requireTLS = items.first { $0.name == "sslmode" }?.value == "require"
        switch items.first(where: { $0.name == "pool_mode" })?.value {
        case nil, "session": transactionPooling = false
        case "transaction": transactionPooling = true
        case let other?:
            throw ServerConfigurationError(
                "pool_mode=\(other) in the PostgreSQL URL is not one the server knows: use pool_mode=transaction behind a transaction pooler such as PgBouncer, or leave it out")
        }
        directHost = items.first { $0.name == "direct_host" }?.value
        if let text = items.first(where: { $0.name == "direct_port" })?.value {
            guard let port = Int(text), (1...65535).contains(port) else {
                throw ServerConfigurationError("direct_port=\(text) in the PostgreSQL URL must be a port, 1 to 65535")
            }
            directPort = port
        }
        let schemaIsIdentifier = schema.utf8.allSatisfy {
            ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5F
        }
        guard schemaIsIdentifier, !schema.isEmpty, schema.utf8.count <= 63 else {
            throw ServerConfigurationError("the schema \(schema) in the PostgreSQL URL must be lowercase letters, digits and _")
        }
    }

    /// The URL with its password replaced, for logs and the startup line.
    static func redacted(_ text: String) -> String {
        guard var components = URLComponents(string: text) else { return "<unreadable URL>" }
        if components.password != nil { components.password = "***" }
        return components.string ?? "<unreadable URL>"
    }
}
