import PostgresNIO

// The statements of every `records/modify` batch and every `changes/zone` page, prepared once per
// connection (PostgresNIO's `PostgresPreparedStatement`): PostgreSQL parses and plans them once,
// where an unnamed statement is parsed and planned on each execution (a third of PostgreSQL's CPU
// during a bulk upload). A prepared statement's SQL is fixed, so it names the tables without the
// schema: every connection of a ``PostgresStorage`` has the storage's schema as its `search_path`.
// Behind a transaction pooler, where neither a prepared statement nor the `search_path` outlives
// a transaction, the same SQL runs unnamed with the tables qualified (``PostgresStorage/run(_:on:)``).

/// A statement whose SQL is written once for both ways it runs: prepared, naming the tables
/// without the schema, or unnamed, naming them as `table` does.
protocol PostgresStatement: PostgresPreparedStatement {
    /// The SQL, naming table `cloudstore_x` as `table("x")`.
    static func sql(naming table: (String) -> String) -> String
}

extension PostgresStatement {
    /// How the prepared statement names a table: unqualified.
    static func unqualified(_ name: String) -> String { "cloudstore_\(name)" }
}

/// What a `records/modify` batch reads before it decides, in one statement: the zone's row, the
/// version of the container's schema, whether the zone has a share, and the rows the keys name
/// (live and tombstones, through `cloudstore_record_by_key`; ``PostgresStorage/lookup(_:_:named:)``).
struct ModifyContextStatement: PostgresStatement {
    static let sql: String = Self.sql(naming: Self.unqualified)
    static func sql(naming table: (String) -> String) -> String {
        """
        SELECT z.name, z.seq, z.db_seq, z.incarnation, z.purged_through, z.deleted,
            (SELECT version FROM \(table("schema")) WHERE container = $1 AND environment = $2),
            EXISTS (SELECT 1 FROM \(table("share")) WHERE partition_id = $3 AND zone = $4),
            r.name, r.type, r.seq, r.deleted_at, r.content
        FROM (VALUES (1)) AS one (x)
        LEFT JOIN \(table("zone")) AS z ON z.partition_id = $3 AND z.name = $4
        LEFT JOIN LATERAL (
            SELECT \(PostgresStorage.recordColumns) FROM \(table("record"))
            WHERE \(PostgresStorage.recordKeySQL) = ANY($5)
        ) AS r ON true
        """
    }
    typealias Row = (String?, Int64?, Int64?, Int64?, Int64?, Bool?, Int64?, Bool, String?, String?, Int64?, Int64?, String?)

    var container: String
    var environment: String
    var partitionID: Int64
    var zone: String
    /// ``PostgresStorage/recordKey(_:_:_:)`` of each name.
    var keys: [String]

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 5)
        bindings.append(container)
        bindings.append(environment)
        bindings.append(partitionID)
        bindings.append(zone)
        bindings.append(keys)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
}

/// A batch's rows (``RecordWriteScript/RecordRows``) written in one statement: raises the
/// partition's database sequence (telling other instances at commit), writes the rows, their new
/// references and the zone's sequences, and releases the assets the replaced records no longer
/// reference while marking those the records reference saved (each asset is its record's: the
/// upload bound it to the record). The sub-statements touch different tables (the two asset updates
/// different rows), so they do not need to see each other's writes. Arrays cannot carry NULL here:
/// -1 and '' stand for a missing time and a tombstone's missing content. Answers the partition's
/// new database sequence.
struct WriteBatchStatement: PostgresStatement {
    static let sql: String = Self.sql(naming: Self.unqualified)
    static func sql(naming table: (String) -> String) -> String {
        """
        WITH bumped AS (
            UPDATE \(table("partition")) SET db_seq = db_seq + 1 WHERE id = $1 RETURNING db_seq
        ), written AS (
            INSERT INTO \(table("record")) (partition_id, zone, name, type, seq, deleted, deleted_at, content)
            SELECT $1, $2, name, type, seq, deleted, NULLIF(deleted_at, -1), NULLIF(content, '')
            FROM unnest($3::text[], $4::text[], $5::bigint[], $6::boolean[], $7::bigint[], $8::text[])
                AS row(name, type, seq, deleted, deleted_at, content)
            ON CONFLICT (partition_id, zone, name) DO UPDATE SET type = excluded.type, seq = excluded.seq,
                deleted = excluded.deleted, deleted_at = excluded.deleted_at, content = excluded.content
        ), referenced AS (
            INSERT INTO \(table("reference")) (partition_id, zone, source, target)
            SELECT $1, $2, source, target FROM unnest($9::text[], $10::text[]) AS pair(source, target)
            ON CONFLICT DO NOTHING
        ), advanced AS (
            INSERT INTO \(table("zone")) (partition_id, name, seq, db_seq)
            SELECT $1, $2, $11, db_seq FROM bumped
            ON CONFLICT (partition_id, name) DO UPDATE SET seq = excluded.seq, db_seq = excluded.db_seq
        ), released AS (
            UPDATE \(table("asset")) AS asset SET state = 'released', removable_at = NULLIF(gone.removable_at, -1)
            FROM unnest($12::text[], $13::bigint[]) AS gone(record, removable_at)
            WHERE asset.container = $14 AND asset.environment = $15 AND asset.scope = $16 AND asset.owner = $17
                AND asset.zone = $2 AND asset.record = gone.record AND asset.state = 'saved'
                AND NOT EXISTS (
                    SELECT 1 FROM unnest($18::text[], $19::text[]) AS keep(record, id)
                    WHERE keep.record = asset.record AND keep.id = asset.id)
        ), kept AS (
            UPDATE \(table("asset")) AS asset SET state = 'saved', removable_at = NULL
            FROM unnest($18::text[], $19::text[]) AS keep(record, id)
            WHERE asset.id = keep.id AND asset.record = keep.record AND asset.container = $14 AND asset.environment = $15
                AND asset.scope = $16 AND asset.owner = $17 AND asset.zone = $2
        )
        SELECT bumped.db_seq FROM bumped, pg_notify($20, $21)
        """
    }
    typealias Row = Int64

    var partitionID: Int64
    var zone: String
    var rows: RecordWriteScript.RecordRows
    var partition: DatabasePartition
    var channel: String
    var notification: String

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 21)
        bindings.append(partitionID)
        bindings.append(zone)
        bindings.append(rows.records.map(\.name))
        bindings.append(rows.records.map(\.type))
        bindings.append(rows.records.map(\.seq))
        bindings.append(rows.records.map(\.isDeleted))
        bindings.append(rows.records.map { $0.deletedAt?.millisecondsSince1970 ?? -1 })
        bindings.append(rows.records.map { $0.content?.json ?? "" })
        bindings.append(rows.references.map(\.source))
        bindings.append(rows.references.map(\.target))
        bindings.append(rows.zoneSeq)
        bindings.append(rows.releasedAssets.map(\.record))
        bindings.append(rows.releasedAssets.map { $0.removableAt?.millisecondsSince1970 ?? -1 })
        bindings.append(partition)
        let kept = rows.savedAssets.flatMap { save in save.assetIDs.sorted().map { (save.record, $0) } }
        bindings.append(kept.map(\.0))
        bindings.append(kept.map(\.1))
        bindings.append(channel)
        bindings.append(notification)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
}

/// A page of a zone's changes in one statement (one snapshot, no transaction around it): the
/// zone's row, whether it has tombstones deleted before the cutoff, and the rows after a sequence,
/// one more than the page holds.
struct ZoneChangesPageStatement: PostgresStatement {
    static let sql: String = Self.sql(naming: Self.unqualified)
    static func sql(naming table: (String) -> String) -> String {
        """
        SELECT z.name, z.seq, z.db_seq, z.incarnation, z.purged_through, z.deleted,
            EXISTS (SELECT 1 FROM \(table("record")) AS old
                WHERE old.partition_id = z.partition_id AND old.zone = z.name AND old.deleted AND old.deleted_at < $1),
            r.name, r.type, r.seq, r.deleted_at, r.content
        FROM (VALUES (1)) AS one (x)
        LEFT JOIN (\(table("partition")) AS p
            JOIN \(table("zone")) AS z ON z.partition_id = p.id AND z.name = $2)
            ON p.container = $3 AND p.environment = $4 AND p.scope = $5 AND p.owner = $6
        LEFT JOIN LATERAL (
            SELECT \(PostgresStorage.recordColumns) FROM \(table("record"))
            WHERE partition_id = z.partition_id AND zone = z.name AND seq > $7
                AND (NOT $8 OR type = ANY($9::text[]))
            ORDER BY seq LIMIT $10
        ) AS r ON true
        """
    }
    typealias Row = (String?, Int64?, Int64?, Int64?, Int64?, Bool?, Bool, String?, String?, Int64?, Int64?, String?)

    var cutoff: Int64
    var zone: String
    var partition: DatabasePartition
    var seq: Int64
    /// Nil: every type.
    var recordTypes: [String]?
    var limit: Int64

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 10)
        bindings.append(cutoff)
        bindings.append(zone)
        bindings.append(partition)
        bindings.append(seq)
        bindings.append(recordTypes != nil)
        bindings.append(recordTypes ?? [])
        bindings.append(limit)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
}

extension PostgresBindings {
    /// A partition's columns as four parameters: container, environment, scope, owner.
    mutating func append(_ partition: DatabasePartition) {
        append(partition.container)
        append(partition.environment.rawValue)
        append(partition.scope.rawValue)
        append(partition.owner)
    }
}
