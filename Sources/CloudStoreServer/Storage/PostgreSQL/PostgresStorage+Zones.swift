import CloudStoreWire
import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle

/// Zones, and the pages of `changes/database`.
extension PostgresStorage {
    static let zoneColumns = "name, seq, db_seq, incarnation, purged_through, deleted"

    func zoneRows(_ connection: PostgresConnection, _ query: PostgresQuery) async throws -> [StoredZone] {
        var zones: [StoredZone] = []
        for try await (name, seq, dbSeq, incarnation, purged, deleted) in try await self.run(query, on: connection)
            .decode((String, Int64, Int64, Int64, Int64, Bool).self)
        {
            if let zone = Self.zone(name, seq, dbSeq, incarnation, purged, deleted) { zones.append(zone) }
        }
        return zones
    }

    /// A zone's row, live or deleted.
    func zoneRow(_ connection: PostgresConnection, _ partitionID: Int64, _ name: String) async throws -> StoredZone? {
        try await zoneRows(
            connection,
            "SELECT \(unescaped: Self.zoneColumns) FROM \(unescaped: table("zone")) WHERE partition_id = \(partitionID) AND name = \(name)"
        ).first
    }

    /// A live zone; the default zone always, pristine when it has no row.
    func liveZone(_ connection: PostgresConnection, _ partitionID: Int64?, _ name: String) async throws -> StoredZone? {
        guard let partitionID else { return StoredZone.live(nil, name: name) }
        return StoredZone.live(try await zoneRow(connection, partitionID, name), name: name)
    }

    func zones(in partition: DatabasePartition) async throws -> [StoredZone] {
        try await snapshot { connection in
            guard let id = try await self.partitionID(connection, partition) else {
                return StoredZone.defaultZoneFirst([])
            }
            return StoredZone.defaultZoneFirst(
                try await self.zoneRows(
                    connection,
                    """
                    SELECT \(unescaped: Self.zoneColumns) FROM \(unescaped: self.table("zone"))
                    WHERE partition_id = \(id) AND NOT deleted ORDER BY name
                    """))
        }
    }

    func zones(named names: [String], in partition: DatabasePartition) async throws -> [String: StoredZone] {
        try await snapshot { connection in
            let id = try await self.partitionID(connection, partition)
            var found: [String: StoredZone] = [:]
            for name in Set(names) {
                found[name] = try await self.liveZone(connection, id, name)
            }
            return found
        }
    }

    func modifyZones(_ changes: [ZoneChange], in partition: DatabasePartition) async throws -> ZonesModification {
        try await transaction { connection in
            let id = try await self.lockPartition(connection, partition)
            var results: [StoredZone?] = []
            var sharedDatabases = Set<String>()
            for change in changes {
                switch change {
                case .create(let name):
                    if let live = try await self.liveZone(connection, id, name) {
                        results.append(live)
                        continue
                    }
                    let dbSeq = try await self.bumpDatabaseSeq(connection, id, partition)
                    try await self.run(
                        """
                        INSERT INTO \(unescaped: self.table("zone")) (partition_id, name, seq, db_seq, incarnation, purged_through)
                        VALUES (\(id), \(name), 0, \(dbSeq), \(dbSeq), 0)
                        ON CONFLICT (partition_id, name) DO UPDATE SET
                            deleted = FALSE, db_seq = excluded.db_seq, incarnation = excluded.incarnation,
                            purged_through = \(unescaped: self.table("zone")).seq
                        """, on: connection)
                    results.append(try await self.zoneRow(connection, id, name))
                case .delete(let name):
                    guard let live = try await self.zoneRow(connection, id, name), !live.deleted else {
                        results.append(nil)
                        continue
                    }
                    let dbSeq = try await self.bumpDatabaseSeq(connection, id, partition)
                    try await self.run(
                        "DELETE FROM \(unescaped: self.table("record")) WHERE partition_id = \(id) AND zone = \(name)", on: connection)
                    try await self.run(
                        "DELETE FROM \(unescaped: self.table("reference")) WHERE partition_id = \(id) AND zone = \(name)", on: connection)
                    try await self.run(
                        "DELETE FROM \(unescaped: self.table("record_key")) WHERE partition_id = \(id) AND zone = \(name)", on: connection)
                    try await self.releaseAssets(
                        connection, of: partition.zone(name), at: self.assetLifetime.removableAt(after: .recordDeleted(at: self.clock.now())))
                    sharedDatabases.formUnion(try await self.stopShare(connection, id, partition.zone(name)))
                    try await self.run(
                        """
                        UPDATE \(unescaped: self.table("zone")) SET deleted = TRUE, db_seq = \(dbSeq)
                        WHERE partition_id = \(id) AND name = \(name)
                        """, on: connection)
                    results.append(try await self.zoneRow(connection, id, name))
                }
            }
            return ZonesModification(zones: results, sharedDatabases: sharedDatabases)
        }
    }

    func databaseChanges(in partition: DatabasePartition, after dbSeq: Int64, limit: Int) async throws
        -> DatabaseChangesPage
    {
        guard partition.scope == .shared else { return try await ownDatabaseChanges(in: partition, after: dbSeq, limit: limit) }
        return try await snapshot { connection in
            guard let found = try await self.partitionRow(connection, partition) else {
                return DatabaseChangesPage(dbSeq: 0, zones: [])
            }
            return DatabaseChangesPage(
                dbSeq: found.dbSeq, zones: try await self.sharedDatabaseChanges(connection, found.id, after: dbSeq, limit: limit))
        }
    }

    /// A page of the zones of a private or public database in one statement (one snapshot, no
    /// transaction around it): the partition's sequence and the zones that changed after `dbSeq`.
    private func ownDatabaseChanges(in partition: DatabasePartition, after dbSeq: Int64, limit: Int) async throws
        -> DatabaseChangesPage
    {
        let query: PostgresQuery = """
            SELECT p.db_seq, z.name, z.seq, z.db_seq, z.incarnation, z.purged_through, z.deleted
            FROM (VALUES (1)) AS one (x)
            LEFT JOIN \(unescaped: table("partition")) AS p ON p.container = \(partition.container)
                AND p.environment = \(partition.environment.rawValue) AND p.scope = \(partition.scope.rawValue)
                AND p.owner = \(partition.owner)
            LEFT JOIN LATERAL (
                SELECT \(unescaped: Self.zoneColumns) FROM \(unescaped: table("zone"))
                WHERE partition_id = p.id AND db_seq > \(dbSeq) ORDER BY db_seq LIMIT \(limit + 1)
            ) AS z ON true
            ORDER BY z.db_seq
            """
        return try await client.withConnection { connection in
            var page = DatabaseChangesPage(dbSeq: 0, zones: [])
            for try await (partitionSeq, name, seq, zoneDBSeq, incarnation, purged, deleted) in try await self.run(query, on: connection)
                .decode((Int64?, String?, Int64?, Int64?, Int64?, Int64?, Bool?).self)
            {
                page.dbSeq = partitionSeq ?? 0
                if let zone = Self.zone(name, seq, zoneDBSeq, incarnation, purged, deleted) { page.zones.append(zone) }
            }
            return page
        }
    }
}
