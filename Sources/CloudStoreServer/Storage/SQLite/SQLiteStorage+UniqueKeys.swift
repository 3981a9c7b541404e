import CloudStoreWire
import Foundation
import GRDB

/// The unique keys of live records (``UniqueKey``, WireProtocol.md §3 "Uniqueness constraints"):
/// one row per key in `cloudstore_record_key`, whose primary key makes two records of a zone with
/// one key impossible. Written with the record (``RecordWrite/uniqueKeys``), removed with it and
/// with its zone, and rebuilt for a record type when a schema change gives it other constraints.
extension SQLiteStorage {
    static func registerUniqueKeyMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v4-record-keys") { db in
            try db.execute(
                sql: """
                    CREATE TABLE cloudstore_record_key (
                        partition_id INTEGER NOT NULL,
                        zone TEXT NOT NULL,
                        key TEXT NOT NULL,
                        type TEXT NOT NULL,
                        source TEXT NOT NULL,
                        PRIMARY KEY (partition_id, zone, key));
                    CREATE INDEX cloudstore_record_key_by_source ON cloudstore_record_key (partition_id, zone, source);
                    """)
        }
    }

    /// Reads the holders of `keys` in a zone, and their rows, into the snapshot
    /// (``RecordSnapshot/MissingUniqueKeys``).
    func readUniqueKeys(_ keys: Set<String>, into snapshot: inout RecordSnapshot, _ db: Database, _ partitionID: Int64, _ zone: String)
        throws
    {
        var holders: [String: String] = [:]
        let cursor = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT key, source FROM cloudstore_record_key
                    WHERE partition_id = ? AND zone = ? AND key IN (SELECT value FROM json_each(?))
                    """),
            arguments: [partitionID, zone, Self.jsonList(keys)])
        while let row = try cursor.next() {
            holders[row["key"]] = row["source"]
        }
        let unread = Set(holders.values).filter { snapshot.records[$0] == nil }
        snapshot.add(uniqueKeys: keys, holders: holders, rows: try rows(db, partitionID, zone, named: unread))
    }

    /// Replaces a written record's key rows with ``RecordWrite/uniqueKeys`` (nothing when nil);
    /// `replacesLive` (``RecordWrite/mayReplaceLive(_:)``): the record may have rows to remove first.
    func replaceUniqueKeys(of write: RecordWrite, replacesLive: Bool, _ db: Database, _ partitionID: Int64, _ zone: String) throws {
        guard let keys = write.uniqueKeys else { return }
        if replacesLive {
            try db.cachedStatement(sql: "DELETE FROM cloudstore_record_key WHERE partition_id = ? AND zone = ? AND source = ?")
                .execute(arguments: [partitionID, zone, write.name])
        }
        let insert = try db.cachedStatement(
            sql: "INSERT INTO cloudstore_record_key (partition_id, zone, key, type, source) VALUES (?, ?, ?, ?, ?)")
        for key in keys {
            try insert.execute(arguments: [partitionID, zone, key, write.type, write.name])
        }
    }

    /// Rebuilds the key rows of every record type whose constraints differ between `current` and
    /// `changed`, in every zone of the environment (``UniqueKeyRebuild``, which throws when two
    /// records of a zone hold one key).
    func rebuildUniqueKeys(_ db: Database, _ environment: CloudEnvironment, from current: CloudSchema, to changed: CloudSchema) throws {
        for type in UniqueKey.typesWithChangedConstraints(from: current, to: changed) {
            try db.execute(
                sql: """
                    DELETE FROM cloudstore_record_key
                    WHERE type = ? AND partition_id IN (SELECT id FROM cloudstore_partition WHERE environment = ?)
                    """,
                arguments: [type.name, environment.rawValue])
            var rebuild = UniqueKeyRebuild(type: type)
            let records = try Row.fetchCursor(
                db,
                sql: """
                    SELECT r.partition_id, r.zone, r.name, r.type, r.seq, r.deleted_at, r.content
                    FROM cloudstore_record AS r JOIN cloudstore_partition AS p ON p.id = r.partition_id
                    WHERE p.environment = ? AND r.type = ? AND r.deleted = 0
                    ORDER BY r.partition_id, r.zone, r.name
                    """,
                arguments: [environment.rawValue, type.name])
            while let row = try records.next() {
                try rebuild.add(try Self.record(row), partitionID: row["partition_id"], zone: row["zone"])
            }
            let insert = try db.cachedStatement(
                sql: "INSERT INTO cloudstore_record_key (partition_id, zone, key, type, source) VALUES (?, ?, ?, ?, ?)")
            for row in rebuild.rows {
                try insert.execute(arguments: [row.partitionID, row.zone, row.key, type.name, row.source])
            }
        }
    }
}
