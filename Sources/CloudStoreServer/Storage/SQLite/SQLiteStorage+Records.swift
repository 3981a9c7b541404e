import CloudStoreWire
import Foundation
import GRDB

extension SQLiteStorage {
    static let recordColumns = "name, type, seq, deleted_at, content"

    static func record(_ row: Row) throws -> StoredRecord {
        let content: String? = row["content"]
        let deletedAt: Int64? = row["deleted_at"]
        return StoredRecord(
            name: row["name"], type: row["type"], seq: row["seq"], content: content.map(StoredContent.init(json:)),
            deletedAt: deletedAt.map(Date.init(millisecondsSince1970:)))
    }

    /// A list of values bound as one argument, read in SQL as `(SELECT value FROM json_each(?))`:
    /// a statement's SQL stays the same whatever the list's length, so it is compiled once per
    /// connection (GRDB's `cachedStatement`) and never meets SQLite's limit on parameters.
    static func jsonList(_ values: some Sequence<String>) -> String {
        var json = JSONBytes()
        json.array(values) { json, value in json.string(value) }
        return String(decoding: json.bytes, as: UTF8.self)
    }

    /// Rows by name (live and tombstones).
    func rows(_ db: Database, _ partitionID: Int64, _ zone: String, named names: some Collection<String>) throws
        -> [String: StoredRecord]
    {
        guard !names.isEmpty else { return [:] }
        let statement = try db.cachedStatement(
            sql: """
                SELECT \(Self.recordColumns) FROM cloudstore_record
                WHERE partition_id = ? AND zone = ? AND name IN (SELECT value FROM json_each(?))
                """)
        var rows: [String: StoredRecord] = [:]
        let cursor = try Row.fetchCursor(statement, arguments: [partitionID, zone, Self.jsonList(names)])
        while let row = try cursor.next() {
            let record = try Self.record(row)
            rows[record.name] = record
        }
        return rows
    }

    /// Live records that refer to any of `targets` with `DELETE_SELF`.
    func deleteSelfReferrers(_ db: Database, _ partitionID: Int64, _ zone: String, of targets: [String]) throws
        -> [(target: String, source: String)]
    {
        guard !targets.isEmpty else { return [] }
        return try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT reference.target, reference.source FROM cloudstore_reference AS reference
                    JOIN cloudstore_record AS record ON record.partition_id = reference.partition_id
                        AND record.zone = reference.zone AND record.name = reference.source AND record.deleted = 0
                    WHERE reference.partition_id = ? AND reference.zone = ?
                        AND reference.target IN (SELECT value FROM json_each(?))
                    """),
            arguments: [partitionID, zone, Self.jsonList(targets)]
        ).map { row in (row["target"], row["source"]) }
    }

    func modifyRecords<Decision: Sendable>(
        in zone: ZoneAddress, loading request: RecordSnapshotRequest,
        decide: @Sendable (RecordSnapshot) throws -> (RecordWritePlan, Decision)
    ) async throws -> (Decision, [StoredRecord])? {
        try await pool(zone.partition.container).write { db -> (Decision, [StoredRecord])? in
            let id = try self.ensurePartition(db, zone.partition)
            guard var stored = try self.liveZone(db, id, zone.zoneName) else { return nil }

            var records = try self.rows(db, id, zone.zoneName, named: request.names)
            var search = CascadeSearch(roots: request.cascadeRoots)
            while !search.frontier.isEmpty {
                search.advance(with: try self.deleteSelfReferrers(db, id, zone.zoneName, of: search.frontier))
                let missing = search.frontier.filter { records[$0] == nil }
                records.merge(try self.rows(db, id, zone.zoneName, named: missing)) { $1 }
            }
            let schema = try Self.schema(db, zone.partition.environment)
            let receipts = try self.assetReceipts(db, request.receipts, container: zone.partition.container)
            var snapshot = RecordSnapshot(
                zone: stored, records: records, deleteSelfReferrers: search.referrers, schema: schema,
                receipts: receipts, share: try self.loadShare(db, id, zone))
            var decided = try snapshot.decision(decide)
            while case .failure(let missing) = decided {
                try self.readUniqueKeys(missing.keys, into: &snapshot, db, id, zone.zoneName)
                decided = try snapshot.decision(decide)
            }
            let (plan, decision) = try decided.get()
            guard !plan.writes.isEmpty else { return (decision, []) }

            let dbSeq = try self.bumpDatabaseSeq(db, id)
            var written: [StoredRecord] = []
            for write in plan.writes {
                stored.seq += 1
                let replacesLive = write.mayReplaceLive(snapshot.records)
                written.append(try self.apply(write, seq: stored.seq, replacesLive: replacesLive, db, id, zone.zoneName))
                try self.replaceUniqueKeys(of: write, replacesLive: replacesLive, db, id, zone.zoneName)
                let assetIDs = write.assetIDs
                if replacesLive {
                    try self.releaseAssets(db, of: zone, records: [write.name], keeping: assetIDs, after: write.assetRelease)
                }
                try self.saveAssets(db, assetIDs, of: zone, record: write.name)
            }
            try db.cachedStatement(
                sql: """
                    INSERT INTO cloudstore_zone (partition_id, name, seq, db_seq) VALUES (?, ?, ?, ?)
                    ON CONFLICT (partition_id, name) DO UPDATE SET seq = excluded.seq, db_seq = excluded.db_seq
                    """
            ).execute(arguments: [id, zone.zoneName, stored.seq, dbSeq])
            if let schema = plan.schema {
                try Self.storeSchema(db, schema, zone.partition.environment)
            }
            if let change = plan.share {
                try self.applyShare(change, db, id, zone)
            }
            let sharedSeqs = try self.advanceSharedDatabases(plan.sharedDatabases, db, id, zone)
            try self.writeNotifications(
                of: plan.writes, before: snapshot.records, in: zone, dbSeq: dbSeq, sharedSeqs: sharedSeqs, db)
            return (decision, written)
        }
    }

    /// Writes one row; `replacesLive` (``RecordWrite/mayReplaceLive(_:)``): the record's old
    /// references are removed first.
    private func apply(_ write: RecordWrite, seq: Int64, replacesLive: Bool, _ db: Database, _ id: Int64, _ zone: String) throws
        -> StoredRecord
    {
        if replacesLive {
            try db.cachedStatement(sql: "DELETE FROM cloudstore_reference WHERE partition_id = ? AND zone = ? AND source = ?")
                .execute(arguments: [id, zone, write.name])
        }
        let record: StoredRecord
        switch write.change {
        case .save(let content, _, let targets):
            record = StoredRecord(name: write.name, type: write.type, seq: seq, content: content, deletedAt: nil)
            let insertReference = try db.cachedStatement(
                sql: "INSERT INTO cloudstore_reference (partition_id, zone, source, target) VALUES (?, ?, ?, ?)")
            for target in targets {
                try insertReference.execute(arguments: [id, zone, write.name, target])
            }
        case .delete:
            record = StoredRecord(name: write.name, type: write.type, seq: seq, content: nil, deletedAt: write.time)
        }
        try db.cachedStatement(
            sql: """
                INSERT INTO cloudstore_record (partition_id, zone, name, type, seq, deleted, deleted_at, content)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (partition_id, zone, name) DO UPDATE SET type = excluded.type, seq = excluded.seq,
                    deleted = excluded.deleted, deleted_at = excluded.deleted_at, content = excluded.content
                """
        ).execute(
            arguments: [
                id, zone, write.name, write.type, seq, record.isDeleted,
                record.deletedAt?.millisecondsSince1970, record.content?.json,
            ])
        return record
    }

    func records(named names: [String], in zone: ZoneAddress) async throws -> [String: StoredRecord]? {
        try await pool(zone.partition.container).read { db in
            let id = try self.partitionID(db, zone.partition)
            guard try self.liveZone(db, id, zone.zoneName) != nil else { return nil }
            guard let id else { return [:] }
            return try self.rows(db, id, zone.zoneName, named: Set(names)).filter { !$0.value.isDeleted }
        }
    }

    func records(ofType recordType: String, in zone: ZoneAddress) async throws -> [StoredRecord]? {
        try await pool(zone.partition.container).read { db in
            let id = try self.partitionID(db, zone.partition)
            guard try self.liveZone(db, id, zone.zoneName) != nil else { return nil }
            guard let id else { return [] }
            return try Row.fetchAll(
                db,
                sql: """
                    SELECT \(Self.recordColumns) FROM cloudstore_record
                    WHERE partition_id = ? AND zone = ? AND type = ? AND deleted = 0
                    """,
                arguments: [id, zone.zoneName, recordType]
            ).map(Self.record)
        }
    }

    func zoneChanges(
        in zone: ZoneAddress, after seq: Int64, limit: Int, recordTypes: [String]?, purgingTombstonesBefore cutoff: Date
    ) async throws -> ZoneChangesPage? {
        let pool = try pool(zone.partition.container)
        let purgeThrough = try await pool.read { db -> Int64? in
            guard let id = try self.partitionID(db, zone.partition) else { return nil }
            return try Int64.fetchOne(
                db,
                sql: """
                    SELECT MAX(seq) FROM cloudstore_record
                    WHERE partition_id = ? AND zone = ? AND deleted = 1 AND deleted_at < ?
                    """,
                arguments: [id, zone.zoneName, cutoff.millisecondsSince1970])
        }
        if purgeThrough != nil {
            try await purgeTombstones(in: zone, before: cutoff)
        }
        return try await pool.read { db -> ZoneChangesPage? in
            let id = try self.partitionID(db, zone.partition)
            guard let stored = try self.liveZone(db, id, zone.zoneName) else { return nil }
            guard let id else { return ZoneChangesPage(zone: stored, records: []) }
            var sql = "SELECT \(Self.recordColumns) FROM cloudstore_record WHERE partition_id = ? AND zone = ? AND seq > ?"
            var arguments: StatementArguments = [id, zone.zoneName, seq]
            if let recordTypes {
                sql += " AND type IN (SELECT value FROM json_each(?))"
                arguments += [Self.jsonList(recordTypes)]
            }
            sql += " ORDER BY seq LIMIT ?"
            arguments += [limit + 1]
            return ZoneChangesPage(
                zone: stored, records: try Row.fetchAll(db.cachedStatement(sql: sql), arguments: arguments).map(Self.record))
        }
    }

    /// Removes tombstones deleted before `cutoff` and raises the zone's `purged_through` past them.
    private func purgeTombstones(in zone: ZoneAddress, before cutoff: Date) async throws {
        try await pool(zone.partition.container).write { db in
            guard let id = try self.partitionID(db, zone.partition) else { return }
            let arguments: StatementArguments = [id, zone.zoneName, cutoff.millisecondsSince1970]
            guard
                let through = try Int64.fetchOne(
                    db,
                    sql: """
                        SELECT MAX(seq) FROM cloudstore_record
                        WHERE partition_id = ? AND zone = ? AND deleted = 1 AND deleted_at < ?
                        """,
                    arguments: arguments)
            else { return }
            try db.execute(
                sql: "DELETE FROM cloudstore_record WHERE partition_id = ? AND zone = ? AND deleted = 1 AND deleted_at < ?",
                arguments: arguments)
            try db.execute(
                sql: """
                    UPDATE cloudstore_zone SET purged_through = MAX(purged_through, ?) WHERE partition_id = ? AND name = ?
                    """,
                arguments: [through, id, zone.zoneName])
            self.logger.info("tombstones purged", metadata: ["zone": "\(zone)", "token": "\(through)"])
        }
    }
}

extension Array {
    /// The array in consecutive pieces of at most `size` elements.
    func chunked(_ size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min($0 + size, count)] }
    }
}
