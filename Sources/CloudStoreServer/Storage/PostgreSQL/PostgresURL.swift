import Foundation

/// A PostgreSQL connection URL: `postgres://user:password@host:port/database?schema=name`.
///
/// `schema` (ext) names the PostgreSQL schema that holds CloudStore's tables (default `public`);
/// `sslmode=require` asks for TLS.
struct PostgresURL: Hashable, Sendable {
    var host: String
    var port: Int
    var user: String
    var password: String?
    var database: String?
    var schema: String
    var requireTLS: Bool

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
