import CloudStoreWire
import Foundation
import GRDB

extension SQLiteStorage {
    /// The pool of a container whose file exists; nil when nothing was ever stored for it, so
    /// that looking never creates a file.
    private func existingPool(_ container: String) throws -> DatabasePool? {
        let path = directory.appendingPathComponent("\(container).sqlite").path
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        return try pool(container)
    }

    func partitions(container: String, environment: CloudEnvironment) async throws -> [PartitionSummary] {
        guard let pool = try existingPool(container) else { return [] }
        return try await pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT p.scope, p.owner,
                        (SELECT COUNT(*) FROM cloudstore_zone AS z
                         WHERE z.partition_id = p.id AND z.deleted = 0 AND z.name <> ?) AS zones
                    FROM cloudstore_partition AS p
                    WHERE p.environment = ?
                    ORDER BY p.scope, p.owner
                    """,
                arguments: [ZoneID.defaultZoneName, environment.rawValue]
            ).compactMap { row -> PartitionSummary? in
                guard let scope = DatabaseScope(rawValue: row["scope"]) else { return nil }
                return PartitionSummary(scope: scope, owner: row["owner"], zoneCount: 1 + (row["zones"] as Int))
            }
        }
    }

    func databaseSummary(of partition: DatabasePartition) async throws -> DatabaseSummary {
        guard let pool = try existingPool(partition.container) else { return DatabaseSummary(dbSeq: 0, zones: []) }
        return try await pool.read { db in
            guard let id = try self.partitionID(db, partition) else { return DatabaseSummary(dbSeq: 0, zones: []) }
            let dbSeq = try Int64.fetchOne(db, sql: "SELECT db_seq FROM cloudstore_partition WHERE id = ?", arguments: [id])
            let zones = try Row.fetchAll(
                db,
                sql: """
                    SELECT \(Self.zoneColumns),
                        (SELECT COUNT(*) FROM cloudstore_record AS r
                         WHERE r.partition_id = z.partition_id AND r.zone = z.name AND r.deleted = 0) AS records
                    FROM cloudstore_zone AS z
                    WHERE z.partition_id = ? AND z.deleted = 0 ORDER BY z.name
                    """,
                arguments: [id]
            ).map { row in DatabaseSummary.Zone(zone: Self.zone(row), recordCount: row["records"]) }
            return DatabaseSummary(dbSeq: dbSeq ?? 0, zones: zones)
        }
    }

    func records(in zone: ZoneAddress, after name: String?, limit: Int) async throws -> [StoredRecord]? {
        guard let pool = try existingPool(zone.partition.container) else {
            return zone.isDefaultZone ? [] : nil
        }
        return try await pool.read { db -> [StoredRecord]? in
            let id = try self.partitionID(db, zone.partition)
            guard try self.liveZone(db, id, zone.zoneName) != nil else { return nil }
            guard let id else { return [] }
            var sql = "SELECT \(Self.recordColumns) FROM cloudstore_record WHERE partition_id = ? AND zone = ? AND deleted = 0"
            var arguments: StatementArguments = [id, zone.zoneName]
            if let name {
                sql += " AND name > ?"
                arguments += [name]
            }
            sql += " ORDER BY name LIMIT ?"
            arguments += [limit + 1]
            return try Row.fetchAll(db, sql: sql, arguments: arguments).map(Self.record)
        }
    }
}
