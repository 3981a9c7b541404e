import CloudStoreWire
import Foundation
import PostgresNIO

/// The unique keys of live records (``UniqueKey``, WireProtocol.md §3 "Uniqueness constraints"):
/// one row per key in `cloudstore_record_key`, whose primary key makes two records of a zone with
/// one key impossible. Written with the record (``RecordWrite/uniqueKeys``), removed with it and
/// with its zone, and rebuilt for a record type when a schema change gives it other constraints.
///
/// Writers of a partition are serialized by its row lock, so two instances saving one key in one
/// zone see each other: the second reads the first's row. A rebuild locks every partition of the
/// container and environment that holds records, and takes the advisory lock
/// `(727274, hashtext('<container>|<environment>'))` that creating such a partition takes shared
/// (``lockPartition(_:_:)``): every record write either commits before the rebuild reads the
/// records, or reads the schema the rebuild stores.
extension PostgresStorage {
    /// The first half of the key of the advisory lock of a rebuild of unique keys.
    static let uniqueKeyRebuildLockClass: Int32 = 727274

    /// The second half of that key's text: a container and environment.
    static func uniqueKeyRebuildLockName(_ container: String, _ environment: CloudEnvironment) -> String {
        "\(container)|\(environment.rawValue)"
    }

    /// The holders of unique keys in a zone, by key (``RecordWriteScript/Read/uniqueKeyHolders(_:)``).
    func uniqueKeyHolders(_ keys: [String], _ connection: PostgresConnection, _ partitionID: Int64, _ zone: String) async throws
        -> [String: String]
    {
        var holders: [String: String] = [:]
        let rows = try await run(
            """
            SELECT key, source FROM \(unescaped: table("record_key"))
            WHERE partition_id = \(partitionID) AND zone = \(zone) AND key = ANY(\(keys))
            """, on: connection)
        for try await (key, source) in rows.decode((String, String).self) {
            holders[key] = source
        }
        return holders
    }

    /// Removes the key rows of records (``RecordWriteScript/Operation/removeUniqueKeys(sources:)``).
    func removeUniqueKeys(of sources: [String], _ connection: PostgresConnection, _ partitionID: Int64, _ zone: String)
        async throws
    {
        try await run(
            """
            DELETE FROM \(unescaped: table("record_key"))
            WHERE partition_id = \(partitionID) AND zone = \(zone) AND source = ANY(\(sources))
            """, on: connection)
    }

    /// Inserts key rows in one statement (``RecordWriteScript/Operation/insertUniqueKeys(_:)``).
    func insertUniqueKeys(
        _ rows: [RecordWriteScript.UniqueKeyRow], _ connection: PostgresConnection, _ partitionID: Int64, _ zone: String
    ) async throws {
        try await run(
            """
            INSERT INTO \(unescaped: table("record_key")) (partition_id, zone, key, type, source)
            SELECT \(partitionID), \(zone), key, type, source
            FROM unnest(\(rows.map(\.key))::text[], \(rows.map(\.type))::text[], \(rows.map(\.source))::text[]) AS row(key, type, source)
            """, on: connection)
    }

    /// Rebuilds the key rows of every record type whose constraints differ between `current` and
    /// `changed`, in every zone of the container and environment (``UniqueKeyRebuild``, which
    /// throws when two records of a zone hold one key), under the locks the extension's summary
    /// describes. Nothing, not even a lock, when no type's constraints change.
    func rebuildUniqueKeys(
        _ connection: PostgresConnection, container: String, environment: CloudEnvironment, from current: CloudSchema,
        to changed: CloudSchema
    ) async throws {
        let types = UniqueKey.typesWithChangedConstraints(from: current, to: changed)
        guard !types.isEmpty else { return }
        try await run(
            """
            SELECT pg_advisory_xact_lock(\(Self.uniqueKeyRebuildLockClass), hashtext(\(Self.uniqueKeyRebuildLockName(container, environment))))
            """, on: connection)
        let locked = try await run(
            """
            SELECT id FROM \(unescaped: table("partition"))
            WHERE container = \(container) AND environment = \(environment.rawValue) AND scope <> \(DatabaseScope.shared.rawValue)
            ORDER BY id FOR UPDATE
            """, on: connection)
        for try await _ in locked.decode(Int64.self) {}
        for type in types {
            try await run(
                """
                DELETE FROM \(unescaped: table("record_key")) AS k USING \(unescaped: table("partition")) AS p
                WHERE p.id = k.partition_id AND p.container = \(container) AND p.environment = \(environment.rawValue)
                    AND k.type = \(type.name)
                """, on: connection)
            var rebuild = UniqueKeyRebuild(type: type)
            let records = try await run(
                """
                SELECT r.partition_id, r.zone, r.name, r.type, r.seq, r.deleted_at, r.content
                FROM \(unescaped: table("record")) AS r JOIN \(unescaped: table("partition")) AS p ON p.id = r.partition_id
                WHERE p.container = \(container) AND p.environment = \(environment.rawValue) AND r.type = \(type.name)
                    AND NOT r.deleted
                ORDER BY r.partition_id, r.zone, r.name
                """, on: connection)
            for try await (partitionID, zone, name, recordType, seq, deletedAt, content) in records.decode(
                (Int64, String, String, String, Int64, Int64?, String?).self)
            {
                guard let record = Self.record(name, recordType, seq, deletedAt, content) else { continue }
                try rebuild.add(record, partitionID: partitionID, zone: zone)
            }
            for chunk in rebuild.rows.chunked(1000) {
                try await run(
                    """
                    INSERT INTO \(unescaped: table("record_key")) (partition_id, zone, key, type, source)
                    SELECT partition_id, zone, key, \(type.name), source
                    FROM unnest(\(chunk.map(\.partitionID))::bigint[], \(chunk.map(\.zone))::text[], \(chunk.map(\.key))::text[],
                        \(chunk.map(\.source))::text[]) AS row(partition_id, zone, key, source)
                    """, on: connection)
            }
        }
    }
}
