import CloudStoreWire
import Foundation
import PostgresNIO

extension PostgresStorage {
    static let recordColumns = "name, type, seq, deleted_at, content"

    /// A record of ``recordColumns`` read through an outer join: nil when the join found none.
    static func record(_ name: String?, _ type: String?, _ seq: Int64?, _ deletedAt: Int64?, _ content: String?) -> StoredRecord? {
        guard let name, let type, let seq else { return nil }
        return StoredRecord(
            name: name, type: type, seq: seq, content: content.map(StoredContent.init(json:)),
            deletedAt: deletedAt.map(Date.init(millisecondsSince1970:)))
    }

    /// A zone of ``zoneColumns`` read through an outer join: nil when the join found none.
    static func zone(
        _ name: String?, _ seq: Int64?, _ dbSeq: Int64?, _ incarnation: Int64?, _ purged: Int64?, _ deleted: Bool?
    ) -> StoredZone? {
        guard let name, let seq, let dbSeq, let incarnation, let purged, let deleted else { return nil }
        return StoredZone(name: name, seq: seq, dbSeq: dbSeq, incarnation: incarnation, purgedThrough: purged, deleted: deleted)
    }

    func recordRows(_ connection: PostgresConnection, _ query: PostgresQuery) async throws -> [StoredRecord] {
        var records: [StoredRecord] = []
        for try await (name, type, seq, deletedAt, content) in try await self.run(query, on: connection)
            .decode((String, String, Int64, Int64?, String?).self)
        {
            if let record = Self.record(name, type, seq, deletedAt, content) { records.append(record) }
        }
        return records
    }

    /// Rows by name, live and tombstones.
    func rows(_ connection: PostgresConnection, _ partitionID: Int64, _ zone: String, named names: [String]) async throws
        -> [String: StoredRecord]
    {
        guard !names.isEmpty else { return [:] }
        let rows = try await recordRows(connection, lookup(partitionID, zone, named: names))
        return Dictionary(rows.map { ($0.name, $0) }, uniquingKeysWith: { $1 })
    }

    /// The query of ``rows(_:_:_:named:)``: through `cloudstore_record_by_key`, a unique index on
    /// ``recordKeySQL``, never through the zone's other rows.
    ///
    /// Written as `partition_id = … AND zone = … AND name = ANY(…)`, the lookup was planned from
    /// statistics, and when they did not know the zone yet (a zone that grew since the last
    /// `ANALYZE`, a new user's among other users' zones) PostgreSQL took the zone for a few rows and
    /// scanned all of them through an index on `(partition_id, zone, …)`, the names as a filter:
    /// each `records/modify` then cost time in proportion to the zone (measured: 16–23 ms per batch
    /// of 200 at 100,000 records, about 1.5 ms this way). The key expression matches only that
    /// index, whose uniqueness tells the planner one row per name without statistics.
    func lookup(_ partitionID: Int64, _ zone: String, named names: [String]) -> PostgresQuery {
        let keys = names.map { Self.recordKey(partitionID, zone, $0) }
        return """
            SELECT \(unescaped: Self.recordColumns) FROM \(unescaped: table("record"))
            WHERE \(unescaped: Self.recordKeySQL) = ANY(\(keys))
            """
    }

    /// A record's key as one text: partition, `:`, zone, U+0001, name. One-to-one with
    /// `(partition_id, zone, name)`: the partition is digits, and a zone name has no control
    /// characters (``ZoneNames``), so neither holds its separator.
    static let recordKeySQL = "(partition_id::text || ':' || zone || chr(1) || name)"

    /// ``recordKeySQL`` of one record, computed here.
    static func recordKey(_ partitionID: Int64, _ zone: String, _ name: String) -> String {
        "\(partitionID):\(zone)\u{1}\(name)"
    }

    /// Runs the record write's script (``RecordWriteScript``) in a transaction that first locks
    /// the partition's row; again when it stored no schema because another transaction changed it
    /// first (``StorageRetry``).
    ///
    /// A batch of creates or of updates without references costs six round trips (`BEGIN`, the
    /// partition's lock, ``modifyContext(_:_:_:named:)``, ``WriteBatchStatement``, the
    /// subscriptions watching the zone, `COMMIT`); removing replaced references, cascades,
    /// receipts, shares, schema changes, notifications and records of types with uniqueness
    /// constraints (their keys' holders, their key rows) add theirs, one statement per operation
    /// whatever the number of records (PostgresRoundTripTests counts them).
    func modifyRecords<Decision: Sendable>(
        in zone: ZoneAddress, loading request: RecordSnapshotRequest,
        decide: @Sendable (RecordSnapshot) throws -> (RecordWritePlan, Decision)
    ) async throws -> (Decision, [StoredRecord])? {
        while true {
            do {
                return try await transaction { connection in
                    let id = try await self.lockPartition(connection, zone.partition)
                    let script = RecordWriteScript(zone: zone, loading: request, now: self.clock.now(), assetLifetime: self.assetLifetime)
                    return try await script.run(
                        deciding: decide, read: { try await self.read($0, connection, id, zone) },
                        write: { try await self.apply($0, connection, id, zone) })
                }
            } catch is StorageRetry {
                continue
            }
        }
    }

    /// Answers a read of a record write's script.
    private func read(_ read: RecordWriteScript.Read, _ connection: PostgresConnection, _ id: Int64, _ zone: ZoneAddress)
        async throws -> RecordWriteScript.Answer
    {
        let partition = zone.partition
        switch read {
        case .snapshot(let names, let receipts):
            let context = try await modifyContext(connection, id, zone, named: names)
            guard let stored = StoredZone.live(context.zone, name: zone.zoneName) else { return .snapshot(nil) }
            return .snapshot(
                RecordSnapshot(
                    zone: stored, records: context.records,
                    schema: try await schema(
                        connection, container: partition.container, environment: partition.environment,
                        version: .some(context.schemaVersion)),
                    receipts: try await assetReceipts(connection, receipts),
                    share: context.hasShare ? try await loadShare(connection, id, zone) : nil))
        case .deleteSelfReferrers(let targets):
            let rows = try await run(
                """
                SELECT reference.target, reference.source FROM \(unescaped: table("reference")) AS reference
                JOIN \(unescaped: table("record")) AS record ON record.partition_id = reference.partition_id
                    AND record.zone = reference.zone AND record.name = reference.source AND NOT record.deleted
                WHERE reference.partition_id = \(id) AND reference.zone = \(zone.zoneName) AND reference.target = ANY(\(targets))
                """, on: connection)
            var pairs: [(target: String, source: String)] = []
            for try await pair in rows.decode((String, String).self) { pairs.append(pair) }
            return .referrers(pairs)
        case .rows(let names):
            return .rows(try await rows(connection, id, zone.zoneName, named: names))
        case .uniqueKeyHolders(let keys):
            return .uniqueKeyHolders(try await uniqueKeyHolders(keys, connection, id, zone.zoneName))
        case .publicSubscriptions(let recordTypes):
            return .subscriptions(try await publicSubscriptions(recordTypes: recordTypes, in: partition, connection))
        case .subscriptions(let subscribers):
            return .subscriptions(try await subscriptions(of: subscribers, in: partition, connection))
        }
    }

    /// Applies a row operation of a record write's script: one statement each, except
    /// ``RecordWriteScript/Operation/deleteSubscriptions(_:)`` (one per subscription),
    /// ``RecordWriteScript/Operation/advanceSharedDatabases(_:)`` (three per user) and
    /// ``RecordWriteScript/Operation/applyShare(_:)`` (one, and three per participant).
    private func apply(_ operation: RecordWriteScript.Operation, _ connection: PostgresConnection, _ id: Int64, _ zone: ZoneAddress)
        async throws -> RecordWriteScript.Answer
    {
        let partition = zone.partition
        switch operation {
        case .removeReferences(let sources):
            try await run(
                """
                DELETE FROM \(unescaped: table("reference"))
                WHERE partition_id = \(id) AND zone = \(zone.zoneName) AND source = ANY(\(sources))
                """, on: connection)
        case .removeUniqueKeys(let sources):
            try await removeUniqueKeys(of: sources, connection, id, zone.zoneName)
        case .insertUniqueKeys(let rows):
            try await insertUniqueKeys(rows, connection, id, zone.zoneName)
        case .writeRecords(let rows):
            let statement = WriteBatchStatement(
                partitionID: id, zone: zone.zoneName, rows: rows, partition: partition, channel: Self.channel,
                notification: notification(partition))
            var dbSeq: Int64?
            for try await seq in try await run(statement, on: connection) { dbSeq = seq }
            guard let dbSeq else { throw PostgresStorageError("the row of partition \(partition) vanished") }
            return .databaseSeq(dbSeq)
        case .storeSchema(let schema, let version):
            return .schemaStored(
                try await storeSchema(
                    connection, schema, expected: version, container: partition.container, environment: partition.environment))
        case .applyShare(let change):
            try await applyShare(change, connection, id, zone)
        case .advanceSharedDatabases(let users):
            return .sharedDatabaseSeqs(try await advanceSharedDatabases(users, connection, id, zone))
        case .insertNotifications(let notifications, let createdAt):
            try await insertNotifications(notifications, createdAt: createdAt, in: partition, connection)
        case .deleteSubscriptions(let keys):
            for key in keys { try await deleteSubscription(connection, key.subscriber, key.id) }
        case .removeNotifications(let date):
            try await run(
                "DELETE FROM \(unescaped: table("notification")) WHERE created_at < \(date.millisecondsSince1970)", on: connection)
        }
        return .applied
    }

    /// What a records/modify batch reads first (``ModifyContextStatement``): the zone's row, the
    /// version of the container's schema, whether the zone has a share, and the rows by name.
    private func modifyContext(_ connection: PostgresConnection, _ id: Int64, _ zone: ZoneAddress, named names: [String])
        async throws -> (zone: StoredZone?, schemaVersion: Int64?, hasShare: Bool, records: [String: StoredRecord])
    {
        let partition = zone.partition
        let statement = ModifyContextStatement(
            container: partition.container, environment: partition.environment.rawValue, partitionID: id, zone: zone.zoneName,
            keys: names.map { Self.recordKey(id, zone.zoneName, $0) })
        var context: (zone: StoredZone?, schemaVersion: Int64?, hasShare: Bool, records: [String: StoredRecord])?
        for try await (zoneName, zoneSeq, dbSeq, incarnation, purged, deleted, version, hasShare, name, type, seq, deletedAt, content)
            in try await self.run(statement, on: connection)
        {
            if context == nil {
                let row = Self.zone(zoneName, zoneSeq, dbSeq, incarnation, purged, deleted)
                context = (row, version, hasShare && partition.scope == .private, [:])
            }
            if let record = Self.record(name, type, seq, deletedAt, content) { context?.records[record.name] = record }
        }
        guard let context else { throw PostgresStorageError("the context of a write to zone \(zone.zoneName) read no row") }
        return context
    }

    func records(named names: [String], in zone: ZoneAddress) async throws -> [String: StoredRecord]? {
        try await readSnapshot(of: zone.partition) { connection in
            let id = try await self.partitionID(connection, zone.partition)
            guard try await self.liveZone(connection, id, zone.zoneName) != nil else { return nil }
            guard let id else { return [:] }
            return try await self.rows(connection, id, zone.zoneName, named: Array(Set(names))).filter { !$0.value.isDeleted }
        }
    }

    func records(ofType recordType: String, in zone: ZoneAddress) async throws -> [StoredRecord]? {
        try await recordRows(inLiveZone: zone) { id in
            """
            SELECT \(unescaped: Self.recordColumns) FROM \(unescaped: self.table("record"))
            WHERE partition_id = \(id) AND zone = \(zone.zoneName) AND type = \(recordType) AND NOT deleted
            """
        }
    }

    /// The rows `query` selects in one snapshot (a replica's that has caught up, or the primary's),
    /// given the partition's row ID: nil when the zone does not exist, none when the partition has
    /// no row yet (a pristine default zone).
    func recordRows(
        inLiveZone zone: ZoneAddress, _ query: @escaping @Sendable (Int64) -> PostgresQuery
    ) async throws -> [StoredRecord]? {
        try await readSnapshot(of: zone.partition) { connection in
            let id = try await self.partitionID(connection, zone.partition)
            guard try await self.liveZone(connection, id, zone.zoneName) != nil else { return nil }
            guard let id else { return [] }
            return try await self.recordRows(connection, query(id))
        }
    }

    func zoneChanges(
        in zone: ZoneAddress, after seq: Int64, limit: Int, recordTypes: [String]?, purgingTombstonesBefore cutoff: Date
    ) async throws -> ZoneChangesPage? {
        let cutoffMilliseconds = cutoff.millisecondsSince1970
        let read = try await zoneChangesPage(zone, after: seq, limit: limit, recordTypes: recordTypes, tombstonesBefore: cutoffMilliseconds)
        guard read.hasOldTombstones else { return read.page }
        try await purgeTombstones(in: zone, before: cutoffMilliseconds)
        return try await zoneChangesPage(zone, after: seq, limit: limit, recordTypes: recordTypes, tombstonesBefore: cutoffMilliseconds).page
    }

    /// A page of a zone's changes in one statement (``ZoneChangesPageStatement``). Was eleven
    /// round trips (two read-only transactions); a fetch is on the propagation path. On a replica
    /// that has caught up when there is one (``onReplica(_:_:)``).
    private func zoneChangesPage(
        _ zone: ZoneAddress, after seq: Int64, limit: Int, recordTypes: [String]?, tombstonesBefore cutoff: Int64
    ) async throws -> (page: ZoneChangesPage?, hasOldTombstones: Bool) {
        let statement = ZoneChangesPageStatement(
            cutoff: cutoff, zone: zone.zoneName, partition: zone.partition, seq: seq, recordTypes: recordTypes, limit: Int64(limit + 1))
        let read: @Sendable (PostgresConnection) async throws -> (page: ZoneChangesPage?, hasOldTombstones: Bool) = { connection in
            var row: StoredZone?
            var hasOldTombstones = false
            var records: [StoredRecord] = []
            for try await (zoneName, zoneSeq, dbSeq, incarnation, purged, deleted, old, name, type, recordSeq, deletedAt, content)
                in try await self.run(statement, on: connection)
            {
                row = row ?? Self.zone(zoneName, zoneSeq, dbSeq, incarnation, purged, deleted)
                hasOldTombstones = hasOldTombstones || old
                if let record = Self.record(name, type, recordSeq, deletedAt, content) { records.append(record) }
            }
            guard let stored = StoredZone.live(row, name: zone.zoneName) else { return (nil, false) }
            // In sequence order as the lateral read them (an outer ORDER BY would sort the contents
            // again); SQL does not promise that order through the join, so it is checked.
            if !zip(records, records.dropFirst()).allSatisfy({ $0.seq < $1.seq }) { records.sort { $0.seq < $1.seq } }
            return (ZoneChangesPage(zone: stored, records: records), hasOldTombstones)
        }
        if let page = await onReplica(zone.partition, read) { return page }
        return try await client.withConnection(read)
    }

    /// Removes tombstones deleted before the cutoff and raises the zone's `purged_through` past them.
    private func purgeTombstones(in zone: ZoneAddress, before cutoff: Int64) async throws {
        try await transaction { connection in
            let id = try await self.lockPartition(connection, zone.partition)
            let rows = try await self.run(
                """
                DELETE FROM \(unescaped: self.table("record"))
                WHERE partition_id = \(id) AND zone = \(zone.zoneName) AND deleted AND deleted_at < \(cutoff)
                RETURNING seq
                """, on: connection)
            var through: Int64?
            for try await seq in rows.decode(Int64.self) { through = max(through ?? seq, seq) }
            guard let through else { return }
            try await self.run(
                """
                UPDATE \(unescaped: self.table("zone")) SET purged_through = GREATEST(purged_through, \(through))
                WHERE partition_id = \(id) AND name = \(zone.zoneName)
                """, on: connection)
            self.logger.info("tombstones purged", metadata: ["zone": "\(zone)", "token": "\(through)"])
        }
    }
}
