import CloudStoreWire
import Foundation
import PostgresNIO

extension PostgresStorage {
    func partitions(container: String, environment: CloudEnvironment) async throws -> [PartitionSummary] {
        try await snapshot { connection in
            let rows = try await self.run(
                """
                SELECT p.scope, p.owner,
                    (SELECT COUNT(*) FROM \(unescaped: self.table("zone")) AS z
                     WHERE z.partition_id = p.id AND NOT z.deleted AND z.name <> \(ZoneID.defaultZoneName))
                FROM \(unescaped: self.table("partition")) AS p
                WHERE p.container = \(container) AND p.environment = \(environment.rawValue)
                ORDER BY p.scope, p.owner
                """, on: connection)
            var partitions: [PartitionSummary] = []
            for try await (scopeName, owner, zones) in rows.decode((String, String, Int64).self) {
                guard let scope = DatabaseScope(rawValue: scopeName) else { continue }
                partitions.append(PartitionSummary(scope: scope, owner: owner, zoneCount: 1 + Int(zones)))
            }
            return partitions
        }
    }

    func databaseSummary(of partition: DatabasePartition) async throws -> DatabaseSummary {
        try await snapshot { connection in
            guard let row = try await self.partitionRow(connection, partition) else {
                return DatabaseSummary(dbSeq: 0, zones: [])
            }
            let rows = try await self.run(
                """
                SELECT \(unescaped: Self.zoneColumns),
                    (SELECT COUNT(*) FROM \(unescaped: self.table("record")) AS r
                     WHERE r.partition_id = z.partition_id AND r.zone = z.name AND NOT r.deleted)
                FROM \(unescaped: self.table("zone")) AS z
                WHERE z.partition_id = \(row.id) AND NOT z.deleted ORDER BY z.name
                """, on: connection)
            var zones: [DatabaseSummary.Zone] = []
            for try await (name, seq, dbSeq, incarnation, purged, deleted, records) in rows.decode(
                (String, Int64, Int64, Int64, Int64, Bool, Int64).self)
            {
                let zone = StoredZone(
                    name: name, seq: seq, dbSeq: dbSeq, incarnation: incarnation, purgedThrough: purged, deleted: deleted)
                zones.append(DatabaseSummary.Zone(zone: zone, recordCount: Int(records)))
            }
            return DatabaseSummary(dbSeq: row.dbSeq, zones: zones)
        }
    }

    func records(in zone: ZoneAddress, after name: String?, limit: Int) async throws -> [StoredRecord]? {
        try await recordRows(inLiveZone: zone) { id in
            """
            SELECT \(unescaped: Self.recordColumns) FROM \(unescaped: self.table("record"))
            WHERE partition_id = \(id) AND zone = \(zone.zoneName) AND NOT deleted
                AND (\(name)::TEXT IS NULL OR name > \(name))
            ORDER BY name LIMIT \(Int64(limit + 1))
            """
        }
    }
}
