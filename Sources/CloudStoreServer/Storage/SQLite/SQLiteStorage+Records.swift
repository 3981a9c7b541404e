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

    /// Runs the record write's script (``RecordWriteScript``) in one write transaction of the
    /// container's file, whose one writer serializes every partition's writes.
    func modifyRecords<Decision: Sendable>(
        in zone: ZoneAddress, loading request: RecordSnapshotRequest,
        decide: @Sendable (RecordSnapshot) throws -> (RecordWritePlan, Decision)
    ) async throws -> (Decision, [StoredRecord])? {
        try await pool(zone.partition.container).write { db in
            let id = try self.ensurePartition(db, zone.partition)
            let script = RecordWriteScript(zone: zone, loading: request, now: self.clock.now(), assetLifetime: self.assetLifetime)
            return try script.run(
                deciding: decide, read: { try self.read($0, db, id, zone) }, write: { try self.apply($0, db, id, zone) })
        }
    }

    /// Answers a read of a record write's script.
    private func read(_ read: RecordWriteScript.Read, _ db: Database, _ id: Int64, _ zone: ZoneAddress) throws
        -> RecordWriteScript.Answer
    {
        switch read {
        case .snapshot(let names, let receipts):
            guard let stored = try liveZone(db, id, zone.zoneName) else { return .snapshot(nil) }
            return .snapshot(
                RecordSnapshot(
                    zone: stored, records: try rows(db, id, zone.zoneName, named: names),
                    schema: try schema(db, container: zone.partition.container, zone.partition.environment),
                    receipts: try assetReceipts(db, receipts, container: zone.partition.container), share: try loadShare(db, id, zone)))
        case .deleteSelfReferrers(let targets):
            return .referrers(try deleteSelfReferrers(db, id, zone.zoneName, of: targets))
        case .rows(let names):
            return .rows(try rows(db, id, zone.zoneName, named: names))
        case .uniqueKeyHolders(let keys):
            return .uniqueKeyHolders(try uniqueKeyHolders(keys, db, id, zone.zoneName))
        case .publicSubscriptions(let recordTypes):
            return .subscriptions(try publicSubscriptions(recordTypes: recordTypes, in: zone.partition, db))
        case .subscriptions(let subscribers):
            return .subscriptions(try subscriptions(of: subscribers, db))
        }
    }

    /// Applies a row operation of a record write's script.
    private func apply(_ operation: RecordWriteScript.Operation, _ db: Database, _ id: Int64, _ zone: ZoneAddress) throws
        -> RecordWriteScript.Answer
    {
        switch operation {
        case .removeReferences(let sources):
            try db.cachedStatement(
                sql: "DELETE FROM cloudstore_reference WHERE partition_id = ? AND zone = ? AND source IN (SELECT value FROM json_each(?))"
            ).execute(arguments: [id, zone.zoneName, Self.jsonList(sources)])
        case .removeUniqueKeys(let sources):
            try removeUniqueKeys(of: sources, db, id, zone.zoneName)
        case .insertUniqueKeys(let rows):
            try insertUniqueKeys(rows, db, id, zone.zoneName)
        case .writeRecords(let rows):
            return .databaseSeq(try writeRecords(rows, db, id, zone))
        case .storeSchema(let schema, _):
            // The file's one writer read the stored version in this transaction: it is still current.
            try Self.storeSchema(db, schema, zone.partition.environment)
            return .schemaStored(true)
        case .applyShare(let change):
            try applyShare(change, db, id, zone)
        case .advanceSharedDatabases(let users):
            return .sharedDatabaseSeqs(try advanceSharedDatabases(users, db, id, zone))
        case .insertNotifications(let notifications, let createdAt):
            try insertNotifications(notifications, createdAt: createdAt, db)
        case .deleteSubscriptions(let keys):
            for key in keys { try deleteSubscription(db, key.subscriber, key.id) }
        case .removeNotifications(let date):
            try db.cachedStatement(sql: "DELETE FROM cloudstore_notification WHERE created_at < ?")
                .execute(arguments: [date.millisecondsSince1970])
        }
        return .applied
    }

    /// Raises the partition's database sequence and writes a batch's rows at it, one statement
    /// per row; answers the sequence.
    private func writeRecords(_ rows: RecordWriteScript.RecordRows, _ db: Database, _ id: Int64, _ zone: ZoneAddress) throws
        -> Int64
    {
        let dbSeq = try bumpDatabaseSeq(db, id)
        let upsert = try db.cachedStatement(
            sql: """
                INSERT INTO cloudstore_record (partition_id, zone, name, type, seq, deleted, deleted_at, content)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (partition_id, zone, name) DO UPDATE SET type = excluded.type, seq = excluded.seq,
                    deleted = excluded.deleted, deleted_at = excluded.deleted_at, content = excluded.content
                """)
        for record in rows.records {
            try upsert.execute(arguments: [
                id, zone.zoneName, record.name, record.type, record.seq, record.isDeleted,
                record.deletedAt?.millisecondsSince1970, record.content?.json,
            ])
        }
        let reference = try db.cachedStatement(
            sql: "INSERT INTO cloudstore_reference (partition_id, zone, source, target) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING")
        for row in rows.references {
            try reference.execute(arguments: [id, zone.zoneName, row.source, row.target])
        }
        try db.cachedStatement(
            sql: """
                INSERT INTO cloudstore_zone (partition_id, name, seq, db_seq) VALUES (?, ?, ?, ?)
                ON CONFLICT (partition_id, name) DO UPDATE SET seq = excluded.seq, db_seq = excluded.db_seq
                """
        ).execute(arguments: [id, zone.zoneName, rows.zoneSeq, dbSeq])
        let saved = Dictionary(rows.savedAssets.map { ($0.record, $0.assetIDs) }, uniquingKeysWith: { $0.union($1) })
        for release in rows.releasedAssets {
            try releaseAssets(db, of: zone, records: [release.record], keeping: saved[release.record] ?? [], removableAt: release.removableAt)
        }
        for save in rows.savedAssets {
            try saveAssets(db, save.assetIDs, of: zone, record: save.record)
        }
        return dbSeq
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
