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

    /// The holders of unique keys in a zone, by key (``RecordWriteScript/Read/uniqueKeyHolders(_:)``).
    func uniqueKeyHolders(_ keys: [String], _ db: Database, _ partitionID: Int64, _ zone: String) throws -> [String: String] {
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
        return holders
    }

    /// Removes the key rows of records (``RecordWriteScript/Operation/removeUniqueKeys(sources:)``).
    func removeUniqueKeys(of sources: [String], _ db: Database, _ partitionID: Int64, _ zone: String) throws {
        try db.cachedStatement(
            sql: "DELETE FROM cloudstore_record_key WHERE partition_id = ? AND zone = ? AND source IN (SELECT value FROM json_each(?))"
        ).execute(arguments: [partitionID, zone, Self.jsonList(sources)])
    }

    /// Inserts key rows (``RecordWriteScript/Operation/insertUniqueKeys(_:)``).
    func insertUniqueKeys(_ rows: [RecordWriteScript.UniqueKeyRow], _ db: Database, _ partitionID: Int64, _ zone: String) throws {
        let insert = try db.cachedStatement(
            sql: "INSERT INTO cloudstore_record_key (partition_id, zone, key, type, source) VALUES (?, ?, ?, ?, ?)")
        for row in rows {
            try insert.execute(arguments: [partitionID, zone, row.key, row.type, row.source])
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
