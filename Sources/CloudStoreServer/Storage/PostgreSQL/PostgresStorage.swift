import CloudStoreWire
import Crypto
import Foundation
import CloudStoreLogging
import Logging
import PostgresNIO
import ServiceLifecycle
import Synchronization

/// The shared backend: PostgreSQL through PostgresNIO, for several server instances on one database.
///
/// Writes run in READ COMMITTED transactions that first lock the partition's row
/// (`SELECT ... FOR UPDATE`): sequences of a partition are assigned and committed one transaction at
/// a time, so a change can never become visible after a change with a higher sequence (a reader that
/// saw sequence 6 cannot miss a later-committed 5). Pages are read in REPEATABLE READ snapshots. Every
/// commit that changes a partition sends `NOTIFY cloudstore_changes, '<schema>|<partition key>'`;
/// every instance listens and wakes its long polls, or polls the partitions they wait on
/// (``ServerConfiguration/ChangeNotifications``).
///
/// Behind a transaction pooler (`pool_mode=transaction` in the URL, ``PostgresURL``) nothing
/// outlives a transaction on a connection: statements run unnamed with the tables qualified,
/// no `search_path` is set, and what needs a session (`LISTEN`, a layout upgrade) connects past the
/// pooler (`direct_host`, `direct_port`) or is refused at start with what to do.
final class PostgresStorage: ServerStorage {
    static let channel = "cloudstore_changes"

    let client: PostgresClient
    let schemaName: String
    let logger: Logger
    /// What PostgresNIO logs (its state machine, the SQL it sends): level 4 only, marked `from=postgres-nio`.
    let driverLogger: Logger
    /// When released assets become removable.
    let assetLifetime: AssetLifetime
    /// The server's clock, for the assets a zone deletion releases.
    let clock: ServerClock
    let url: PostgresURL
    /// The tables and indexes this release needs (``prepare()``).
    let layout: PostgresLayout
    /// How the preparation waits out conflicts with live traffic.
    let layoutRetry: PostgresLayout.Retry
    /// Whether the layout has the tables of subscriptions: false only for an instance playing a
    /// release before them (`layoutSteps`), which writes no notifications, as that release did.
    let hasSubscriptions: Bool
    /// Whether the layout has the table of secrets: false only for an instance playing a release
    /// before it, which signed no download URLs, as that release did not.
    let hasSecrets: Bool
    /// The last schema read of each container and environment (`container|environment`), with its
    /// version. A version is written once: every change raises it, a `records/modify` that extends
    /// a development schema too (``RecordWritePlan/schema``), and
    /// ``storeSchema(_:_:expected:container:environment:)`` stores only over the version read. So a
    /// write that finds the same version uses this copy without reading and decoding the JSON again.
    let schemas = Mutex<[String: CloudSchema]>([:])

    /// When a refused transaction runs again (``transaction(_:)``).
    let transactionRetry: PostgresTransactionRetry
    /// How this instance hears other instances' commits.
    let notifications: ServerConfiguration.ChangeNotifications
    /// The streaming replicas that serve reads; nil: none.
    let replicas: PostgresReplicaSet?

    /// - Parameters:
    ///   - notifications: how this instance hears other instances' commits.
    ///   - replicaURLs: streaming replicas that serve reads (``PostgresReplicaSet``).
    ///   - onReplicaRead: hears each replica read's outcome (the server's metrics).
    ///   - layoutSteps: for tests that play an earlier release: the layout ends after this many
    ///     steps (``PostgresLayout/prefix(_:)``); nil: this release's.
    init(
        url text: String, logger: Logger, assetLifetime: AssetLifetime = AssetLifetime(), clock: ServerClock = .system,
        notifications: ServerConfiguration.ChangeNotifications = .listen, replicaURLs: [String] = [],
        onReplicaRead: (@Sendable (_ replica: String, ReplicaRouting.Outcome) -> Void)? = nil,
        layoutSteps: Int? = nil, layoutRetry: PostgresLayout.Retry = PostgresLayout.Retry(),
        transactionRetry: PostgresTransactionRetry = PostgresTransactionRetry()
    ) throws {
        self.transactionRetry = transactionRetry
        self.notifications = notifications
        let url = try PostgresURL(text)
        if url.transactionPooling, url.direct == nil, notifications == .listen {
            throw ServerConfigurationError(
                "the PostgreSQL URL says pool_mode=transaction, and LISTEN needs a connection that stays its own, which a transaction pooler does not give: add direct_host= and direct_port= (PostgreSQL itself, past the pooler) to the URL, or hear other instances' changes by polling (--notifications poll)")
        }
        let layout = PostgresLayout(schema: url.schema)
        self.layout = layoutSteps.map { layout.prefix($0) } ?? layout
        self.hasSubscriptions = self.layout.steps.contains { $0.name == "cloudstore_notification" }
        self.hasSecrets = self.layout.steps.contains { $0.name == "cloudstore_secret" }
        self.layoutRetry = layoutRetry
        var configuration = PostgresClient.Configuration(
            host: url.host, port: url.port, username: url.user, password: url.password, database: url.database,
            tls: url.requireTLS ? .require(.makeClientConfiguration()) : .disable)
        configuration.options.maximumConnections = 16
        configuration.options.connectionIdleTimeout = .seconds(30)
        configuration.options.additionalStartupParameters = Self.startupParameters(url)
        // PostgresNIO warns when the first lease (prepare) races the pool's start (run), which is
        // harmless: the lease waits. Its own lines show at level 4 only.
        let backgroundLogger = logger.forLibrary("postgres-nio")
        client = PostgresClient(configuration: configuration, backgroundLogger: backgroundLogger)
        replicas =
            replicaURLs.isEmpty
            ? nil
            : try PostgresReplicaSet(
                urls: replicaURLs, startupParameters: Self.startupParameters(url),
                logger: backgroundLogger, observe: onReplicaRead)
        schemaName = url.schema
        self.url = url
        self.logger = logger
        self.driverLogger = backgroundLogger
        self.assetLifetime = assetLifetime
        self.clock = clock
    }

    /// What each connection sets as it starts: the schema as its `search_path`, for the prepared
    /// statements (PostgresStatements.swift), except behind a transaction pooler.
    private static func startupParameters(_ url: PostgresURL) -> [(String, String)] {
        url.transactionPooling ? [] : [("search_path", "\"\(url.schema)\"")]
    }

    private var startupParameters: [(String, String)] { Self.startupParameters(url) }

    /// Whether a session of its own can be had: the URL reaches PostgreSQL past any transaction
    /// pooler, or names where it can (``PostgresURL/direct``).
    var hasSession: Bool { url.direct != nil }

    /// Connects outside the pool, past any transaction pooler when the URL names how (else
    /// through it, for reads only), for the preparation of the layout (``prepare()``) and `LISTEN`:
    /// an unreachable PostgreSQL, or one that refuses the user or the database, is one clear
    /// error within 10 s (the connect timeout) rather than the pool's retries. The message names
    /// host, port, database and user, never the password.
    func connect() async throws -> PostgresConnection {
        let (host, port) = url.direct ?? (url.host, url.port)
        var configuration = PostgresConnection.Configuration(
            host: host, port: port, username: url.user, password: url.password, database: url.database,
            tls: url.requireTLS ? .require(try .init(configuration: .makeClientConfiguration())) : .disable)
        configuration.options.connectTimeout = .seconds(10)
        // As the pool's connections are made: a pooler that refuses them refuses this one first,
        // and the start says why.
        configuration.options.additionalStartupParameters = startupParameters
        do {
            return try await PostgresConnection.connect(configuration: configuration, id: 0, logger: driverLogger)
        } catch {
            let place = "PostgreSQL at \(host):\(port), database \(url.database ?? url.user), user \(url.user)"
            let failure = PostgresFailure(error, doing: "cannot reach \(place)")
            if failure.message.contains("unsupported startup parameter") {
                throw ServerConfigurationError(
                    "cannot reach \(place): it answered \"\(failure.message)\", as a pooler in front of PostgreSQL (PgBouncer) does: add pool_mode=transaction to the URL, and the server sets no search_path (it works behind PgBouncer in either pool mode)")
            }
            throw ServerConfigurationError(
                "\(failure); check the URL of --postgres (or CLOUDSTORE_POSTGRES) and that PostgreSQL runs and accepts this user")
        }
    }

    /// Runs a query, its SQL logged at level 4 as the SQLite backend logs its statements.
    @discardableResult
    func run(_ query: PostgresQuery, on connection: PostgresConnection) async throws -> PostgresRowSequence {
        logger.trace("sql", metadata: ["sql": "\(query.sql)"])
        return try await connection.query(query, logger: driverLogger)
    }

    /// Runs a statement prepared once per connection, its SQL logged at level 4 as ``run(_:on:)``'s;
    /// behind a transaction pooler, unnamed with the tables qualified (PostgresStatements.swift).
    func run<Statement: PostgresStatement>(_ statement: Statement, on connection: PostgresConnection) async throws
        -> AsyncThrowingMapSequence<PostgresRowSequence, Statement.Row>
    {
        guard url.transactionPooling else {
            logger.trace("sql", metadata: ["sql": "\(Statement.sql)"])
            return try await connection.execute(statement, logger: driverLogger)
        }
        let query = PostgresQuery(unsafeSQL: Statement.sql(naming: table), binds: try statement.makeBindings())
        return try await run(query, on: connection).map { try statement.decodeRow($0) }
    }

    /// A table name qualified by the schema (an identifier checked by ``PostgresURL``).
    func table(_ name: String) -> String { "\"\(schemaName)\".cloudstore_\(name)" }

    func secret(_ name: String, container: String) async throws -> [UInt8]? {
        guard hasSecrets else { return nil }
        let made = Data(SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }).base64EncodedString()
        let table = self.table("secret")
        let stored = try await client.withConnection { connection -> String? in
            try await self.run(
                """
                INSERT INTO \(unescaped: table) (container, name, value) VALUES (\(container), \(name), \(made))
                ON CONFLICT (container, name) DO NOTHING
                """, on: connection)
            let rows = try await self.run(
                "SELECT value FROM \(unescaped: table) WHERE container = \(container) AND name = \(name)", on: connection)
            for try await value in rows.decode(String.self) { return value }
            return nil
        }
        guard let stored, let bytes = Data(base64Encoded: stored), bytes.count == 32 else {
            throw PostgresStorageError("the stored secret \(name) of \(container) is not 32 bytes in base64")
        }
        return Array(bytes)
    }

    var replicaStatuses: [ReplicaStatus] { replicas?.statuses ?? [] }

    func checkReachable() async throws {
        _ = try await client.withConnection { connection in
            try await self.run("SELECT 1", on: connection)
        }
    }

    // MARK: - Transactions

    /// Runs `body` in a READ COMMITTED transaction; rolls back when it throws, rethrowing its error.
    /// A transaction PostgreSQL refused for a conflict (40001, 40P01), or whose connection was lost
    /// before `COMMIT`, runs again from the start on a connection of the pool, after a backoff
    /// (``PostgresTransactionRetry``): `body` must do nothing but its statements, which every
    /// caller's body does (decisions are pure functions of what the transaction read).
    func transaction<T: Sendable>(_ body: @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        try await transaction(begin: "BEGIN", body)
    }

    /// ``transaction(_:)`` opened with `begin`, a `BEGIN` that may name the isolation level and
    /// access mode (one statement, one round trip).
    private func transaction<T: Sendable>(begin: PostgresQuery, _ body: @Sendable (PostgresConnection) async throws -> T)
        async throws -> T
    {
        var attempt = 0
        while true {
            attempt += 1
            var stage = PostgresTransactionRetry.Stage.beforeCommit
            do {
                return try await client.withConnection { connection in
                    try await self.run(begin, on: connection)
                    let value: T
                    do {
                        value = try await body(connection)
                    } catch {
                        _ = try? await self.run("ROLLBACK", on: connection)
                        throw error
                    }
                    stage = .commit
                    try await self.run("COMMIT", on: connection)
                    return value
                }
            } catch {
                let failure = PostgresFailure(error, doing: "running a transaction")
                guard PostgresTransactionRetry.mayRetry(failure, at: stage),
                    let delay = transactionRetry.delay(afterAttempt: attempt, random: Double.random(in: 0...1))
                else { throw error }
                logger.debug(
                    "transaction refused; running it again",
                    metadata: [
                        "storage": "postgres", "attempt": "\(attempt)", "sqlstate": "\(failure.sqlState ?? "connection")",
                        "delay": "\(delay)",
                    ])
                try await Task.sleep(for: delay)
            }
        }
    }

    /// Runs `body` in a read-only REPEATABLE READ transaction: one snapshot for every statement.
    func snapshot<T: Sendable>(_ body: @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        try await transaction(begin: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", body)
    }

    // MARK: - Partitions

    func partitionID(_ connection: PostgresConnection, _ partition: DatabasePartition, lock: Bool = false) async throws
        -> Int64?
    {
        let rows = try await self.run(
            """
            SELECT id FROM \(unescaped: table("partition"))
            WHERE container = \(partition.container) AND environment = \(partition.environment.rawValue)
                AND scope = \(partition.scope.rawValue) AND owner = \(partition.owner)
            \(unescaped: lock ? "FOR UPDATE" : "")
            """, on: connection)
        for try await id in rows.decode(Int64.self) { return id }
        return nil
    }

    /// The partition's row ID and database sequence, or nil when nothing was ever written to it.
    func partitionRow(_ connection: PostgresConnection, _ partition: DatabasePartition) async throws
        -> (id: Int64, dbSeq: Int64)?
    {
        let rows = try await self.run(
            """
            SELECT id, db_seq FROM \(unescaped: table("partition"))
            WHERE container = \(partition.container) AND environment = \(partition.environment.rawValue)
                AND scope = \(partition.scope.rawValue) AND owner = \(partition.owner)
            """, on: connection)
        for try await row in rows.decode((Int64, Int64).self) { return row }
        return nil
    }

    /// The partition's row ID, creating the row, locked until the transaction ends: every write to a
    /// partition goes through here first, which serializes them.
    /// An existing partition (every write but a user's first) takes one statement. Creating one
    /// that can hold records first takes the advisory lock of rebuilds of unique keys shared
    /// (PostgresStorage+UniqueKeys.swift), so that a rebuild running meanwhile sees its records.
    func lockPartition(_ connection: PostgresConnection, _ partition: DatabasePartition) async throws -> Int64 {
        if let id = try await partitionID(connection, partition, lock: true) { return id }
        if partition.scope != .shared {
            let lockName = Self.uniqueKeyRebuildLockName(partition.container, partition.environment)
            try await self.run(
                "SELECT pg_advisory_xact_lock_shared(\(Self.uniqueKeyRebuildLockClass), hashtext(\(lockName)))", on: connection)
        }
        try await self.run(
            """
            INSERT INTO \(unescaped: table("partition")) (container, environment, scope, owner)
            VALUES (\(partition.container), \(partition.environment.rawValue), \(partition.scope.rawValue), \(partition.owner))
            ON CONFLICT DO NOTHING
            """, on: connection)
        guard let id = try await partitionID(connection, partition, lock: true) else {
            throw PostgresStorageError("the row of partition \(partition) vanished")
        }
        return id
    }

    /// What tells other instances that a partition changed (``listen(_:)`` reads it).
    func notification(_ partition: DatabasePartition) -> String { "\(schemaName)|\(partition.key)" }

    /// Raises the partition's database sequence, tells other instances, and answers the new value.
    func bumpDatabaseSeq(_ connection: PostgresConnection, _ partitionID: Int64, _ partition: DatabasePartition)
        async throws -> Int64
    {
        // One statement: the notification is sent (at commit) by the one that raises the sequence.
        let rows = try await self.run(
            """
            WITH bumped AS (
                UPDATE \(unescaped: table("partition")) SET db_seq = db_seq + 1 WHERE id = \(partitionID) RETURNING db_seq
            )
            SELECT bumped.db_seq FROM bumped, pg_notify(\(Self.channel), \(notification(partition)))
            """, on: connection)
        var seq: Int64?
        for try await value in rows.decode(Int64.self) { seq = value }
        guard let seq else { throw PostgresStorageError("the row of partition \(partition) vanished") }
        return seq
    }

}

/// A failure inside the PostgreSQL backend that is not PostgreSQL's own.
struct PostgresStorageError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
