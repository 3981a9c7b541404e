/// The schema, tables and indexes of the PostgreSQL backend, as an ordered list of steps, and what
/// a server must run at start given what the database holds.
///
/// The database records its **layout version** in `cloudstore_layout`: version *v* means steps 1…*v*
/// are done. At start a server reads it (``PostgresLayout/Found``) and asks ``plan(_:)``:
///
/// | the database | plan |
/// |---|---|
/// | version ≥ ``version`` (current, or a later release's) | ``Plan/current``: no DDL, no lock |
/// | version *v* below it | run steps *v*+1 … ``version``, recording each |
/// | no version (written before versions were recorded, or empty) | run the steps whose object is missing, in order, recording each once `cloudstore_layout` exists |
///
/// Rules for the list, which every release appends to and never edits:
/// - A step is **additive**: it creates a schema, a table (with what a new empty table needs,
///   such as its column storage) or an index, so that servers of the previous release keep
///   serving while a newer one upgrades. Removing or renaming something comes later, as a step of
///   a release after the one that stopped using it.
/// - A step is idempotent (`IF NOT EXISTS`): a crash between a step and its record, or a second
///   upgrader, runs it again harmlessly.
/// - An index on a table that already existed before the upgrade is built without blocking
///   writes (``PlannedStep/concurrently``); one on a table the same upgrade creates is built in
///   the table's transaction, as the table is empty.
struct PostgresLayout: Sendable {
    /// One change of the layout.
    struct Step: Sendable, Hashable {
        /// What the step creates.
        enum Object: Sendable, Hashable {
            case schema(String)
            /// A table and the statements that make it (`CREATE TABLE`, then settings of the new table).
            case table(String, statements: [String])
            case index(Index)
        }

        var object: Object

        /// The object's name (unqualified: an index lives in its table's schema).
        var name: String {
            switch object {
            case .schema(let name): name
            case .table(let name, _): name
            case .index(let index): index.name
            }
        }

        /// What the step does, for logs and errors: "creating index cloudstore_reference_by_target".
        var description: String {
            switch object {
            case .schema(let name): "creating schema \(name)"
            case .table(let name, _): "creating table \(name)"
            case .index(let index): "creating \(index.unique ? "unique index" : "index") \(index.name)"
            }
        }

        /// The statements to run: in the step's transaction, or (`concurrently`, indexes only) alone.
        func statements(schema: String, concurrently: Bool = false) -> [String] {
            switch object {
            case .schema(let name): ["CREATE SCHEMA IF NOT EXISTS \"\(name)\""]
            case .table(_, let statements): statements
            case .index(let index): [index.sql(schema: schema, concurrently: concurrently)]
            }
        }
    }

    /// An index of a table of the layout.
    struct Index: Sendable, Hashable {
        var name: String
        /// The table's unqualified name.
        var table: String
        var unique = false
        /// What is indexed, e.g. `(partition_id, zone, seq)`.
        var columns: String
        /// A partial index's condition.
        var condition: String?

        func sql(schema: String, concurrently: Bool) -> String {
            "CREATE \(unique ? "UNIQUE " : "")INDEX \(concurrently ? "CONCURRENTLY " : "")IF NOT EXISTS \(name)"
                + " ON \"\(schema)\".\(table) \(columns)" + (condition.map { " WHERE \($0)" } ?? "")
        }
    }

    /// What the database holds, as read at start.
    struct Found: Sendable, Equatable {
        /// Whether the schema exists.
        var schemaExists: Bool
        /// The tables and valid indexes of the schema, by name. An index a failed concurrent build
        /// left invalid is not among them.
        var relations: Set<String>
        /// The recorded layout version; nil when `cloudstore_layout` has none.
        var version: Int?

        init(schemaExists: Bool, relations: Set<String> = [], version: Int? = nil) {
            self.schemaExists = schemaExists
            self.relations = relations
            self.version = version
        }
    }

    /// A step to run, by its number (1-based, the version it brings the database to).
    struct PlannedStep: Sendable, Equatable {
        var number: Int
        /// Build the index with `CREATE INDEX CONCURRENTLY`, outside a transaction: its table
        /// existed before this upgrade and may be busy.
        var concurrently = false
    }

    /// What a server runs at start.
    enum Plan: Sendable, Equatable {
        /// The layout is current (or a later release's, which only added to it): nothing to run.
        case current(version: Int)
        /// Run these steps in order, then record ``PostgresLayout/version``.
        case upgrade(from: Int?, steps: [PlannedStep])
    }

    /// The schema the layout lives in.
    let schema: String
    /// Every step, in order; version *v* means `steps[0..<v]` are done.
    let steps: [Step]

    /// The version a database has once every step is done.
    var version: Int { steps.count }

    /// The table that records the version.
    static let versionTable = "cloudstore_layout"

    /// The layout of this release: `schema` holds the tables.
    init(schema: String) {
        self.init(schema: schema, steps: Self.steps(schema: schema))
    }

    init(schema: String, steps: [Step]) {
        self.schema = schema
        self.steps = steps
    }

    /// The layout of an earlier release: the first `count` steps.
    func prefix(_ count: Int) -> PostgresLayout {
        PostgresLayout(schema: schema, steps: Array(steps.prefix(count)))
    }

    /// "step 4 of 22: creating index cloudstore_zone_by_db_seq".
    func describe(_ step: PlannedStep) -> String {
        "step \(step.number) of \(version): \(steps[step.number - 1].description)"
    }

    /// What to run, given what the database holds.
    func plan(_ found: Found) -> Plan {
        if let recorded = found.version {
            if recorded >= version { return .current(version: recorded) }
            return .upgrade(from: recorded, steps: planned(Array((recorded + 1)...version)))
        }
        let missing = steps.indices.filter { !isDone(steps[$0], in: found) }.map { $0 + 1 }
        return .upgrade(from: nil, steps: planned(missing))
    }

    private func isDone(_ step: Step, in found: Found) -> Bool {
        if case .schema = step.object { return found.schemaExists }
        return found.relations.contains(step.name)
    }

    /// Numbers as planned steps: an index is built concurrently unless its table is created by
    /// one of these steps (then it is new and empty).
    private func planned(_ numbers: [Int]) -> [PlannedStep] {
        let created = Set(numbers.compactMap { number -> String? in
            if case .table(let name, _) = steps[number - 1].object { return name }
            return nil
        })
        return numbers.map { number in
            guard case .index(let index) = steps[number - 1].object else { return PlannedStep(number: number) }
            return PlannedStep(number: number, concurrently: !created.contains(index.table))
        }
    }
}

extension PostgresLayout {
    /// How a step that conflicted with live traffic (a lock not granted within the lock timeout,
    /// a deadlock, a serialization failure, a dropped connection) is tried again: after an
    /// exponential backoff with jitter, until ``giveUpAfter`` has passed since the first attempt.
    struct Retry: Sendable, Equatable {
        /// How long a step's statement waits for a lock before PostgreSQL cancels it (55P03):
        /// writes that queue behind a waiting DDL lock wait at most this long.
        var lockTimeout: Duration = .seconds(2)
        /// The first delay; each later one doubles, up to ``maximumDelay``.
        var firstDelay: Duration = .milliseconds(100)
        var maximumDelay: Duration = .seconds(5)
        /// When a step still conflicts this long after its first attempt, the start fails.
        var giveUpAfter: Duration = .seconds(600)

        /// The delay before attempt `attempt + 1`, after `attempt` failed attempts over `elapsed`;
        /// nil when the next attempt would start after ``giveUpAfter``. `random` (0 to 1) spreads
        /// the instances that conflicted together: the delay is between half and all of the backoff.
        func delay(afterAttempt attempt: Int, elapsed: Duration, random: Double) -> Duration? {
            let delay = Backoff.delay(afterAttempt: attempt, first: firstDelay, maximum: maximumDelay, random: random)
            return elapsed + delay > giveUpAfter ? nil : delay
        }
    }
}

extension PostgresLayout {
    /// Every step of every release, in order. Append only.
    private static func steps(schema: String) -> [Step] {
        func table(_ name: String, _ columns: String, then settings: [String] = []) -> Step {
            Step(object: .table(name, statements: ["CREATE TABLE IF NOT EXISTS \"\(schema)\".\(name) (\(columns))"] + settings))
        }
        func index(
            _ name: String, on table: String, _ columns: String, unique: Bool = false, where condition: String? = nil
        ) -> Step {
            Step(object: .index(Index(name: name, table: table, unique: unique, columns: columns, condition: condition)))
        }
        let binding = """
            container TEXT NOT NULL, environment TEXT NOT NULL, scope TEXT NOT NULL, owner TEXT NOT NULL,
            zone TEXT NOT NULL, record TEXT NOT NULL, field TEXT NOT NULL, caller TEXT NOT NULL
            """
        return [
            Step(object: .schema(schema)),
            table(
                versionTable,
                """
                id INTEGER PRIMARY KEY CHECK (id = 1),
                version INTEGER NOT NULL,
                step TEXT NOT NULL,
                recorded_at TIMESTAMPTZ NOT NULL DEFAULT now()
                """),
            // Records, zones and schemas (the first release).
            table(
                "cloudstore_partition",
                """
                id BIGSERIAL PRIMARY KEY,
                container TEXT NOT NULL,
                environment TEXT NOT NULL,
                scope TEXT NOT NULL,
                owner TEXT NOT NULL,
                db_seq BIGINT NOT NULL DEFAULT 0,
                UNIQUE (container, environment, scope, owner)
                """),
            table(
                "cloudstore_zone",
                """
                partition_id BIGINT NOT NULL REFERENCES "\(schema)".cloudstore_partition (id),
                name TEXT NOT NULL,
                seq BIGINT NOT NULL DEFAULT 0,
                db_seq BIGINT NOT NULL DEFAULT 0,
                incarnation BIGINT NOT NULL DEFAULT 0,
                purged_through BIGINT NOT NULL DEFAULT 0,
                deleted BOOLEAN NOT NULL DEFAULT FALSE,
                PRIMARY KEY (partition_id, name)
                """),
            index("cloudstore_zone_by_db_seq", on: "cloudstore_zone", "(partition_id, db_seq)"),
            table(
                "cloudstore_record",
                """
                partition_id BIGINT NOT NULL,
                zone TEXT NOT NULL,
                name TEXT NOT NULL,
                type TEXT NOT NULL,
                seq BIGINT NOT NULL,
                deleted BOOLEAN NOT NULL DEFAULT FALSE,
                deleted_at BIGINT,
                content TEXT,
                PRIMARY KEY (partition_id, zone, name)
                """),
            index("cloudstore_record_by_seq", on: "cloudstore_record", "(partition_id, zone, seq)"),
            index("cloudstore_record_by_type", on: "cloudstore_record", "(partition_id, zone, type)"),
            index("cloudstore_record_tombstones", on: "cloudstore_record", "(partition_id, zone, deleted_at)", where: "deleted"),
            table(
                "cloudstore_reference",
                """
                partition_id BIGINT NOT NULL,
                zone TEXT NOT NULL,
                source TEXT NOT NULL,
                target TEXT NOT NULL,
                PRIMARY KEY (partition_id, zone, source, target)
                """),
            index("cloudstore_reference_by_target", on: "cloudstore_reference", "(partition_id, zone, target)"),
            table(
                "cloudstore_schema",
                """
                container TEXT NOT NULL,
                environment TEXT NOT NULL,
                version BIGINT NOT NULL,
                content TEXT NOT NULL,
                PRIMARY KEY (container, environment)
                """),
            // Assets (WireProtocol.md §7).
            table("cloudstore_asset_upload", "id TEXT PRIMARY KEY, \(binding), expires_at BIGINT NOT NULL"),
            index("cloudstore_asset_upload_by_expiry", on: "cloudstore_asset_upload", "(expires_at)"),
            table(
                "cloudstore_asset",
                """
                id TEXT PRIMARY KEY, \(binding),
                receipt TEXT UNIQUE,
                checksum TEXT NOT NULL DEFAULT '',
                size BIGINT NOT NULL DEFAULT 0,
                state TEXT NOT NULL,
                expires_at BIGINT NOT NULL,
                removable_at BIGINT
                """),
            index(
                "cloudstore_asset_by_record", on: "cloudstore_asset", "(container, environment, scope, owner, zone, record)",
                where: "state = 'saved'"),
            index("cloudstore_asset_removable", on: "cloudstore_asset", "(removable_at)", where: "removable_at IS NOT NULL"),
            // Bytes of files are mostly compressed already: store them out of line, uncompressed.
            table(
                "cloudstore_asset_chunk", "asset_id TEXT NOT NULL, seq INTEGER NOT NULL, bytes BYTEA NOT NULL, PRIMARY KEY (asset_id, seq)",
                then: ["ALTER TABLE \"\(schema)\".cloudstore_asset_chunk ALTER COLUMN bytes SET STORAGE EXTERNAL"]),
            // Sharing (WireProtocol.md §6).
            table(
                "cloudstore_share",
                """
                partition_id BIGINT NOT NULL,
                zone TEXT NOT NULL,
                short_guid TEXT NOT NULL UNIQUE,
                owner_participant_id TEXT NOT NULL,
                public_permission TEXT NOT NULL,
                PRIMARY KEY (partition_id, zone)
                """),
            table(
                "cloudstore_share_participant",
                """
                partition_id BIGINT NOT NULL,
                zone TEXT NOT NULL,
                user_name TEXT NOT NULL,
                participant_id TEXT NOT NULL,
                permission TEXT NOT NULL,
                status TEXT NOT NULL,
                shared_partition_id BIGINT NOT NULL,
                db_seq BIGINT NOT NULL DEFAULT 0,
                PRIMARY KEY (partition_id, zone, user_name)
                """),
            index("cloudstore_share_participant_by_db_seq", on: "cloudstore_share_participant", "(shared_partition_id, db_seq)"),
            // The lookup of a batch by name (PostgresStorage.lookup(_:_:named:)).
            index("cloudstore_record_by_key", on: "cloudstore_record", "(\(PostgresStorage.recordKeySQL))", unique: true),
            // Unique keys of records under their types' uniqueness constraints (UniqueKey).
            table(
                "cloudstore_record_key",
                """
                partition_id BIGINT NOT NULL,
                zone TEXT NOT NULL,
                key TEXT NOT NULL,
                type TEXT NOT NULL,
                source TEXT NOT NULL,
                PRIMARY KEY (partition_id, zone, key)
                """),
            index("cloudstore_record_key_by_source", on: "cloudstore_record_key", "(partition_id, zone, source)"),
            // Subscriptions, their notifications and push tokens (WireProtocol.md §8).
            table(
                "cloudstore_subscription",
                """
                container TEXT NOT NULL,
                environment TEXT NOT NULL,
                scope TEXT NOT NULL,
                user_name TEXT NOT NULL,
                id TEXT NOT NULL,
                record_type TEXT,
                content TEXT NOT NULL,
                PRIMARY KEY (container, environment, scope, user_name, id)
                """),
            table(
                "cloudstore_notification",
                """
                id BIGSERIAL PRIMARY KEY,
                container TEXT NOT NULL,
                environment TEXT NOT NULL,
                scope TEXT NOT NULL,
                user_name TEXT NOT NULL,
                db_seq BIGINT NOT NULL,
                created_at BIGINT NOT NULL,
                payload TEXT NOT NULL
                """),
            table(
                "cloudstore_push_token",
                """
                digest TEXT PRIMARY KEY,
                container TEXT NOT NULL,
                environment TEXT NOT NULL,
                user_name TEXT NOT NULL,
                delivered_through BIGINT NOT NULL
                """),
            index("cloudstore_notification_by_user", on: "cloudstore_notification", "(container, environment, user_name, id)"),
            index(
                "cloudstore_notification_by_db_seq", on: "cloudstore_notification",
                "(container, environment, scope, user_name, db_seq)"),
            index("cloudstore_notification_by_age", on: "cloudstore_notification", "(created_at)"),
            index(
                "cloudstore_subscription_by_record_type", on: "cloudstore_subscription",
                "(container, environment, scope, record_type)", where: "record_type IS NOT NULL"),
            // Secrets every instance shares (ServerStorage.secret(_:container:)).
            table(
                "cloudstore_secret",
                """
                container TEXT NOT NULL,
                name TEXT NOT NULL,
                value TEXT NOT NULL,
                PRIMARY KEY (container, name)
                """),
        ]
    }
}
