import Foundation
import Logging
import PostgresNIO

/// A PostgreSQL schema of its own for one test, in the database a URL names (usually
/// `CLOUDSTORE_TEST_POSTGRES_URL`), dropped when the test is done.
///
/// A server on a URL with `?schema=name` creates its tables in that schema; a test's schema holds
/// tens of megabytes once the server has written to it, and a developer's database kept every
/// run's until they were dropped here.
///
/// ```swift
/// try await TestPostgresSchema.with(in: postgresURL) { url in
///     try await TestServer.with(storage: .postgres(url: url)) { server in
///         // ...
///     }
/// }
/// ```
public enum TestPostgresSchema {
    /// A new schema name: `cs_test_` and 16 random hex digits.
    private static func freshName() -> String {
        "cs_test_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(16)
    }

    /// `url` with a `schema` query item.
    private static func url(_ url: String, schema: String) -> String {
        url + (url.contains("?") ? "&" : "?") + "schema=\(schema)"
    }

    /// Runs `body` with the URL of a new schema in the database `url` names, then drops the schema
    /// (also when `body` throws; then `body`'s error is the one thrown). Servers on the schema must
    /// be shut down by the end of `body`.
    public static func with<T>(in url: String, _ body: (_ url: String) async throws -> T) async throws -> T {
        let schema = freshName()
        return try await running { try await body(Self.url(url, schema: schema)) } finally: {
            try await drop(schema, in: url)
        }
    }

    /// Drops `schema` and everything in it from the database `url` names.
    private static func drop(_ schema: String, in url: String) async throws {
        guard !schema.isEmpty, schema.utf8.allSatisfy({ $0 == UInt8(ascii: "_") || (48...57).contains($0) || (97...122).contains($0) })
        else { throw TestPostgresSchemaError("\(schema) is not a schema name of lowercase letters, digits and _") }
        guard let components = URLComponents(string: url), let host = components.host else {
            throw TestPostgresSchemaError("\(url) is not a postgres://user@host:port/database URL")
        }
        let logger = Logger(label: "cloudstore.test-postgres", factory: { _ in SwiftLogNoOpLogHandler() })
        let configuration = PostgresConnection.Configuration(
            host: host, port: components.port ?? 5432, username: components.user ?? "postgres",
            password: components.password, database: components.path.trimmingCharacters(in: ["/"]).nonEmpty, tls: .disable)
        let connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
        do {
            try await connection.query("DROP SCHEMA IF EXISTS \(unescaped: schema) CASCADE", logger: logger)
        } catch {
            try? await connection.close()
            throw error
        }
        try await connection.close()
    }
}

/// A test schema could not be dropped or its URL read.
public struct TestPostgresSchemaError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

extension String {
    fileprivate var nonEmpty: String? { isEmpty ? nil : self }
}
