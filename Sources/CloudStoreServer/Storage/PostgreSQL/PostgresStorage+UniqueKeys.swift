import CloudStoreWire
import Foundation
import PostgresNIO

/// The unique keys of live records (``UniqueKey``, WireProtocol.md §3 "Uniqueness constraints"):
/// one row per key in `cloudstore_record_key`, whose primary key makes two records of a zone with
/// one key impossible. Written with the record (``RecordWrite/uniqueKeys``), removed with it and
/// with its zone.
///
/// Writers of a partition are serialized by its row lock, so two instances saving one key in one
/// zone see each other: the second reads the first's row.
extension PostgresStorage {
    /// Reads the holders of `keys` in a zone, and their rows, into the snapshot
    /// (``RecordSnapshot/MissingUniqueKeys``).
    func readUniqueKeys(
        _ keys: Set<String>, into snapshot: inout RecordSnapshot, _ connection: PostgresConnection, _ partitionID: Int64,
        _ zone: String
    ) async throws {
        var holders: [String: String] = [:]
        let rows = try await run(
            """
            SELECT key, source FROM \(unescaped: table("record_key"))
            WHERE partition_id = \(partitionID) AND zone = \(zone) AND key = ANY(\(Array(keys)))
            """, on: connection)
        for try await (key, source) in rows.decode((String, String).self) {
            holders[key] = source
        }
        let unread = Set(holders.values).filter { snapshot.records[$0] == nil }
        snapshot.add(uniqueKeys: keys, holders: holders, rows: try await self.rows(connection, partitionID, zone, named: Array(unread)))
    }

    /// Replaces the key rows of the written records with their ``RecordWrite/uniqueKeys``: two
    /// statements when any write has keys, none otherwise. `stored` holds the rows the plan read
    /// (``RecordWrite/mayReplaceLive(_:)``: a created record has no rows to remove).
    func writeUniqueKeys(
        _ writes: [RecordWrite], replacing stored: [String: StoredRecord], _ connection: PostgresConnection, _ partitionID: Int64,
        _ zone: String
    ) async throws {
        let keyed = writes.filter { $0.uniqueKeys != nil }
        guard !keyed.isEmpty else { return }
        let replaced = keyed.filter { $0.mayReplaceLive(stored) }.map(\.name)
        if !replaced.isEmpty {
            try await run(
                """
                DELETE FROM \(unescaped: table("record_key"))
                WHERE partition_id = \(partitionID) AND zone = \(zone) AND source = ANY(\(replaced))
                """, on: connection)
        }
        var rows: (keys: [String], types: [String], sources: [String]) = ([], [], [])
        for write in keyed {
            for key in write.uniqueKeys ?? [] {
                rows.keys.append(key)
                rows.types.append(write.type)
                rows.sources.append(write.name)
            }
        }
        guard !rows.keys.isEmpty else { return }
        try await run(
            """
            INSERT INTO \(unescaped: table("record_key")) (partition_id, zone, key, type, source)
            SELECT \(partitionID), \(zone), key, type, source
            FROM unnest(\(rows.keys)::text[], \(rows.types)::text[], \(rows.sources)::text[]) AS row(key, type, source)
            """, on: connection)
    }
}
