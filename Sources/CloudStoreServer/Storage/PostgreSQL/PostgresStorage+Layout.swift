import Foundation
import Logging
import PostgresNIO

/// Preparing the layout (``PostgresLayout``) at start, beside live traffic.
///
/// A database whose recorded version is current costs two reads on one connection (the catalog,
/// then `cloudstore_layout`): no DDL, no lock on any table but the read's own on
/// `cloudstore_layout`, no wait for other instances. Only an upgrade runs DDL, under a session
/// advisory lock that other upgraders of the schema wait for (polling it at least every second,
/// so that they hold no snapshot a concurrent index build would wait for), each step with
/// `lock_timeout`. A step that conflicts with live traffic is tried again after a backoff
/// (``PostgresLayout/Retry``), resuming at the first step not recorded; anything else fails the
/// start with a ``PostgresFailure`` that names the step.
extension PostgresStorage {
    /// The first half of the key of the upgrade's advisory lock, `(727273, hashtext(schema))`.
    /// Not the key of the releases before layout versions (`pg_advisory_xact_lock(727272, …)`,
    /// taken without a lock timeout): one of those starting during an upgrade must not wait on
    /// it, or a concurrent index build waiting for that instance's snapshot would deadlock with it
    /// on every attempt. It waits on the tables instead, and the deadlock detector or the step's
    /// lock timeout settles the conflict; the step is then tried again.
    static let preparationLockClass: Int32 = 727273

    func prepare() async throws {
        var connection: PostgresConnection? = try await connect()
        do {
            try await prepare(reconnecting: &connection)
        } catch {
            try? await connection?.close()
            throw error
        }
        try? await connection?.close()
    }

    /// Prepares on `connection` until done, trying again after transient failures (on a new
    /// connection when the old one was lost) and while another instance upgrades.
    private func prepare(reconnecting connection: inout PostgresConnection?) async throws {
        var conflicts = ConflictTracker()
        var waitingLogged = false
        while true {
            do {
                let session: PostgresConnection
                if let connection {
                    session = connection
                } else {
                    session = try await connect()
                    connection = session
                }
                guard try await prepareOnce(on: session) == .anotherInstanceUpgrading else { return }
                if !waitingLogged {
                    logger.notice("waiting for another instance to upgrade the storage layout", metadata: ["schema": "\(schemaName)"])
                    waitingLogged = true
                }
                try await conflicts.wait(for: nil, retry: layoutRetry, logger: logger)
            } catch let failure as PostgresFailure where failure.isTransient {
                if let lost = connection, lost.isClosed || failure.sqlState == nil {
                    connection = nil
                    try? await lost.close()
                }
                try await conflicts.wait(for: failure, retry: layoutRetry, logger: logger)
            }
        }
    }

    private enum Preparation {
        case done
        case anotherInstanceUpgrading
    }

    /// One pass: read the version; when it is behind, take the lock, read again and run what is
    /// missing. Throws ``PostgresFailure``s.
    private func prepareOnce(on connection: PostgresConnection) async throws -> Preparation {
        if case .current(let version) = layout.plan(try await found(on: connection)) {
            logger.notice(
                version > layout.version ? "storage layout is a later release's; serving with it" : "storage layout current",
                metadata: ["schema": "\(schemaName)", "version": "\(version)", "release": "\(layout.version)"])
            return .done
        }
        guard hasSession else {
            throw ServerConfigurationError(
                "the storage layout of schema \(schemaName) needs an upgrade to version \(layout.version), which holds a lock and builds indexes over one session, and the PostgreSQL URL reaches it only through a transaction pooler (pool_mode=transaction): add direct_host= and direct_port= (PostgreSQL itself, past the pooler) to the URL, or start one instance with a URL that reaches PostgreSQL directly")
        }
        try await sql(
            "SET lock_timeout = \(unescaped: String(layoutRetry.lockTimeout.milliseconds))", on: connection,
            doing: "setting lock_timeout for the storage layout's upgrade")
        let lock = "\(Self.preparationLockClass), hashtext('\(schemaName)')"
        let doing = "taking the advisory lock of the storage layout's upgrade"
        var locked = false
        do {
            for try await granted in try await sql(
                PostgresQuery(unsafeSQL: "SELECT pg_try_advisory_lock(\(lock))"), on: connection, doing: doing
            ).decode(Bool.self) {
                locked = granted
            }
        } catch {
            throw PostgresFailure(error, doing: doing)
        }
        guard locked else { return .anotherInstanceUpgrading }
        do {
            try await upgrade(on: connection)
        } catch {
            _ = try? await connection.query(PostgresQuery(unsafeSQL: "SELECT pg_advisory_unlock(\(lock))"), logger: driverLogger)
            throw error
        }
        try await sql(
            PostgresQuery(unsafeSQL: "SELECT pg_advisory_unlock(\(lock))"), on: connection,
            doing: "releasing the advisory lock of the storage layout's upgrade")
        return .done
    }

    /// Under the lock: reads again (another instance may have upgraded between the first read
    /// and the lock) and runs every step the plan names, then records the version.
    private func upgrade(on connection: PostgresConnection) async throws {
        guard case .upgrade(let from, let steps) = layout.plan(try await found(on: connection)) else { return }
        let started = ContinuousClock.now
        logger.notice(
            "upgrading the storage layout",
            metadata: [
                "schema": "\(schemaName)", "from": "\(from.map(String.init) ?? "unrecorded")", "to": "\(layout.version)",
                "steps": "\(steps.count)",
            ])
        for step in steps {
            try await run(step, on: connection)
        }
        try await record(layout.version, on: connection, inTransaction: true, doing: "recording the storage layout's version")
        logger.notice(
            "storage layout upgraded",
            metadata: [
                "schema": "\(schemaName)", "version": "\(layout.version)",
                "duration": "\(started.duration(to: .now).milliseconds) ms",
            ])
    }

    /// Runs one step and records it: in one transaction, or (an index on an existing table)
    /// as `CREATE INDEX CONCURRENTLY`, after dropping what an interrupted build left, then the record.
    private func run(_ step: PostgresLayout.PlannedStep, on connection: PostgresConnection) async throws {
        let doing = "preparing the storage layout, \(layout.describe(step))"
        let started = ContinuousClock.now
        let definition = layout.steps[step.number - 1]
        if step.concurrently {
            if try await isInvalidIndex(definition.name, on: connection, doing: doing) {
                try await sql(
                    PostgresQuery(unsafeSQL: "DROP INDEX CONCURRENTLY IF EXISTS \"\(schemaName)\".\(definition.name)"),
                    on: connection, doing: doing)
            }
            for statement in definition.statements(schema: schemaName, concurrently: true) {
                try await sql(PostgresQuery(unsafeSQL: statement), on: connection, doing: doing)
            }
            try await record(step.number, on: connection, inTransaction: true, doing: doing)
        } else {
            try await sql("BEGIN", on: connection, doing: doing)
            do {
                for statement in definition.statements(schema: schemaName) {
                    try await sql(PostgresQuery(unsafeSQL: statement), on: connection, doing: doing)
                }
                try await record(step.number, on: connection, inTransaction: false, doing: doing)
                try await sql("COMMIT", on: connection, doing: doing)
            } catch {
                _ = try? await connection.query("ROLLBACK", logger: driverLogger)
                throw error
            }
        }
        logger.info(
            "storage layout step done",
            metadata: [
                "step": "\(layout.describe(step))", "concurrently": "\(step.concurrently)",
                "duration": "\(started.duration(to: .now).milliseconds) ms",
            ])
    }

    /// Records that steps 1…`version` are done, once `cloudstore_layout` exists (never lowering it).
    private func record(_ version: Int, on connection: PostgresConnection, inTransaction: Bool, doing: String) async throws {
        guard let tableStep = layout.versionTableStep, version >= tableStep else { return }
        let step = version == 0 ? "" : layout.steps[version - 1].description
        let upsert: PostgresQuery = """
            INSERT INTO \(unescaped: table("layout")) AS layout (id, version, step) VALUES (1, \(version), \(step))
            ON CONFLICT (id) DO UPDATE SET version = excluded.version, step = excluded.step, recorded_at = now()
            WHERE layout.version < excluded.version
            """
        if !inTransaction {
            try await sql(upsert, on: connection, doing: doing)
            return
        }
        try await sql("BEGIN", on: connection, doing: doing)
        do {
            try await sql(upsert, on: connection, doing: doing)
            try await sql("COMMIT", on: connection, doing: doing)
        } catch {
            _ = try? await connection.query("ROLLBACK", logger: driverLogger)
            throw error
        }
    }

    /// What the database holds: the schema, its valid relations and the recorded version.
    private func found(on connection: PostgresConnection) async throws -> PostgresLayout.Found {
        let doing = "reading the storage layout's version"
        var found = PostgresLayout.Found(schemaExists: false)
        let rows = try await sql(
            """
            SELECT n.oid IS NOT NULL, c.relname
            FROM (VALUES (1)) AS one (x)
            LEFT JOIN pg_catalog.pg_namespace AS n ON n.nspname = \(schemaName)
            LEFT JOIN pg_catalog.pg_class AS c ON c.relnamespace = n.oid AND c.relname LIKE 'cloudstore%'
                AND c.relkind IN ('r', 'p', 'i')
            LEFT JOIN pg_catalog.pg_index AS i ON i.indexrelid = c.oid
            WHERE i.indexrelid IS NULL OR i.indisvalid
            """, on: connection, doing: doing)
        do {
            for try await (schemaExists, relation) in rows.decode((Bool, String?).self) {
                found.schemaExists = found.schemaExists || schemaExists
                if let relation { found.relations.insert(relation) }
            }
            guard found.relations.contains(PostgresLayout.versionTable) else { return found }
            for try await version in try await self.run("SELECT version FROM \(unescaped: table("layout")) WHERE id = 1", on: connection)
                .decode(Int.self)
            {
                found.version = version
            }
        } catch {
            throw PostgresFailure(error, doing: doing)
        }
        return found
    }

    /// Whether an index exists but is invalid (a concurrent build that was interrupted).
    private func isInvalidIndex(_ name: String, on connection: PostgresConnection, doing: String) async throws -> Bool {
        let rows = try await sql(
            """
            SELECT NOT i.indisvalid FROM pg_catalog.pg_index AS i
            JOIN pg_catalog.pg_class AS c ON c.oid = i.indexrelid
            JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
            WHERE n.nspname = \(schemaName) AND c.relname = \(name)
            """, on: connection, doing: doing)
        do {
            return try await rows.decode(Bool.self).reduce(false) { $0 || $1 }
        } catch {
            throw PostgresFailure(error, doing: doing)
        }
    }

    /// Runs a statement; PostgreSQL's refusal becomes a ``PostgresFailure`` saying what CloudStore was doing.
    @discardableResult
    private func sql(_ query: PostgresQuery, on connection: PostgresConnection, doing: String) async throws
        -> PostgresRowSequence
    {
        do {
            return try await run(query, on: connection)
        } catch {
            throw PostgresFailure(error, doing: doing)
        }
    }
}

/// The conflicts of one preparation: how many in a row, since when, and the pause before the
/// next attempt (``PostgresLayout/Retry``).
private struct ConflictTracker {
    private var attempts = 0
    private var since: ContinuousClock.Instant?
    /// What conflicted last (a step, or nil: the lock): another thing conflicting means progress,
    /// and counts afresh.
    private var last: String??

    /// Sleeps before the next attempt after `failure` (nil: another instance holds the lock), or
    /// throws it once the retry policy gives up.
    mutating func wait(for failure: PostgresFailure?, retry: PostgresLayout.Retry, logger: Logger) async throws {
        let now = ContinuousClock.now
        if last != .some(failure?.doing) {
            (attempts, self.since, last) = (0, nil, .some(failure?.doing))
        }
        let since = self.since ?? now
        self.since = since
        attempts += 1
        guard var delay = retry.delay(afterAttempt: attempts, elapsed: since.duration(to: now), random: .random(in: 0...1)) else {
            guard var failure else {
                throw PostgresStorageError(
                    "another instance has been upgrading the storage layout for \(since.duration(to: now).seconds) s (it holds the upgrade's advisory lock): check that instance's log, or stop it and start this one again")
            }
            failure.message += " (gave up after \(attempts) attempts over \(since.duration(to: now).seconds) s)"
            throw failure
        }
        // The lock is polled at least every second: this instance starts soon after the upgrade.
        if failure == nil { delay = min(delay, .seconds(1)) }
        if let failure {
            logger.notice(
                "storage layout preparation conflicted with live traffic; retrying",
                metadata: [
                    "doing": "\(failure.doing)", "sqlState": "\(failure.sqlState ?? "none")", "reason": "\(failure.message)",
                    "attempt": "\(attempts)", "delay": "\(delay.milliseconds) ms",
                ])
        }
        try await Task.sleep(for: delay)
    }
}

extension PostgresLayout {
    /// The number of the step that creates `cloudstore_layout`: versions are recorded from it on.
    var versionTableStep: Int? {
        steps.firstIndex { $0.name == Self.versionTable }.map { $0 + 1 }
    }
}

extension Duration {
    var milliseconds: Int64 { components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000 }
    fileprivate var seconds: Int64 { components.seconds }
}
