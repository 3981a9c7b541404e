import CloudStoreWire
import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle

/// The schema of each container and environment, read through a cache of the last version read.
extension PostgresStorage {
    /// The schema of a container and environment. `version`, when the caller read it already
    /// (``modifyContext(_:_:_:)``), is answered from the last schema read if that is the version.
    func schema(
        _ connection: PostgresConnection, container: String, environment: CloudEnvironment, version: Int64?? = nil
    ) async throws -> CloudSchema {
        let key = "\(container)|\(environment.rawValue)"
        if case .some(let version) = version {
            guard let version else { return .empty }
            if let cached = schemas.withLock({ $0[key] }), cached.version == Int(version) { return cached }
        }
        let rows = try await self.run(
            """
            SELECT version, content FROM \(unescaped: table("schema"))
            WHERE container = \(container) AND environment = \(environment.rawValue)
            """, on: connection)
        for try await (version, content) in rows.decode((Int64, String).self) {
            var schema = try WireCoding.decode(CloudSchema.self, from: Data(content.utf8))
            schema.version = Int(version)
            schemas.withLock { $0[key] = schema }
            return schema
        }
        return .empty
    }

    func schema(container: String, environment: CloudEnvironment) async throws -> CloudSchema {
        try await snapshot { connection in try await self.schema(connection, container: container, environment: environment) }
    }

    /// Stores a schema if the stored version is still `expected`; false when another transaction
    /// changed it first.
    func storeSchema(
        _ connection: PostgresConnection, _ schema: CloudSchema, expected: Int, container: String,
        environment: CloudEnvironment
    ) async throws -> Bool {
        var content = schema
        content.version = nil
        let text = String(decoding: try WireCoding.encode(content), as: UTF8.self)
        let version = Int64(schema.version ?? 0)
        let rows = try await self.run(
            """
            INSERT INTO \(unescaped: table("schema")) AS stored (container, environment, version, content)
            VALUES (\(container), \(environment.rawValue), \(version), \(text))
            ON CONFLICT (container, environment) DO UPDATE SET version = excluded.version, content = excluded.content
            WHERE stored.version = \(Int64(expected))
            RETURNING version
            """, on: connection)
        for try await _ in rows.decode(Int64.self) { return true }
        return false
    }

    func updateSchema<Decision: Sendable>(
        container: String, environment: CloudEnvironment,
        _ change: @Sendable (CloudSchema) throws -> (CloudSchema?, Decision)
    ) async throws -> (CloudSchema, Decision) {
        while true {
            do {
                return try await transaction { connection in
                    let current = try await self.schema(connection, container: container, environment: environment)
                    let (changed, decision) = try change(current)
                    guard var changed else { return (current, decision) }
                    changed.version = (current.version ?? 0) + 1
                    try await self.rebuildUniqueKeys(
                        connection, container: container, environment: environment, from: current, to: changed)
                    guard
                        try await self.storeSchema(
                            connection, changed, expected: current.version ?? 0, container: container,
                            environment: environment)
                    else { throw StorageRetry() }
                    return (changed, decision)
                }
            } catch is StorageRetry {
                continue
            }
        }
    }
}
