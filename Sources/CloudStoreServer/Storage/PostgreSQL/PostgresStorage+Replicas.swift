import Foundation
import Logging
import PostgresNIO
import Synchronization

/// The streaming replicas a ``PostgresStorage`` reads from (`--postgres-replica`), by the rules of
/// ``ReplicaRouting``: each with a pool of its own, connected as the primary's connections are
/// (its URL's host, port, user, password and TLS; the primary's schema, which the replica copies:
/// a replica URL's own `schema` is not read).
final class PostgresReplicaSet: Sendable {
    struct Replica: Sendable {
        /// `host:port`, as logs, `/readyz` and the metrics name it.
        let name: String
        let client: PostgresClient
    }

    let replicas: [Replica]
    /// How long a read waits for a connection to a replica before the primary answers it.
    static let leaseLimit: Duration = .seconds(1)
    /// Hears each replica read's outcome (the server's metrics).
    let observe: (@Sendable (_ replica: String, ReplicaRouting.Outcome) -> Void)?
    private let routing: Mutex<ReplicaRouting>
    private let started = ContinuousClock.now

    init(
        urls: [String], startupParameters: [(String, String)], logger: Logger,
        observe: (@Sendable (String, ReplicaRouting.Outcome) -> Void)?
    ) throws {
        replicas = try urls.enumerated().map { index, text in
            let url: PostgresURL
            do {
                url = try PostgresURL(text)
            } catch {
                throw ServerConfigurationError("replica \(index + 1) (\(PostgresURL.redacted(text))): \(error)")
            }
            var configuration = PostgresClient.Configuration(
                host: url.host, port: url.port, username: url.user, password: url.password, database: url.database,
                tls: url.requireTLS ? .require(.makeClientConfiguration()) : .disable)
            configuration.options.maximumConnections = 16
            configuration.options.connectionIdleTimeout = .seconds(30)
            configuration.options.additionalStartupParameters = startupParameters
            let name = "\(url.host):\(url.port)"
            return Replica(name: name, client: PostgresClient(configuration: configuration, backgroundLogger: logger))
        }
        self.observe = observe
        routing = Mutex(ReplicaRouting(count: replicas.count))
    }

    /// Seconds since the set was made: the routing's clock.
    private var now: Double {
        let elapsed = started.duration(to: .now)
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    /// The replica to read from next; nil: the primary.
    func next() -> (index: Int, replica: Replica)? {
        let now = self.now
        return routing.withLock { $0.next(now: now) }.map { ($0, replicas[$0]) }
    }

    func record(_ outcome: ReplicaRouting.Outcome, of index: Int) {
        let now = self.now
        routing.withLock { $0.record(outcome, of: index, now: now) }
        observe?(replicas[index].name, outcome)
    }

    /// Each replica's state, for `/readyz`.
    var statuses: [ReplicaStatus] {
        let now = self.now
        return routing.withLock { routing in
            replicas.indices.map { index in
                let record = routing.records[index]
                return ReplicaStatus(
                    replica: replicas[index].name, available: routing.isAvailable(index, now: now), served: record.served,
                    behind: record.behind, failed: record.failed)
            }
        }
    }

    /// Runs every replica's pool until cancelled.
    func run() async {
        await withDiscardingTaskGroup { group in
            for replica in replicas { group.addTask { await replica.client.run() } }
        }
    }
}

/// Whether a lease was granted, seen from another task.
private final class LeaseFlag: Sendable {
    private let state = Mutex(false)
    var isSet: Bool { state.withLock { $0 } }
    func set() { state.withLock { $0 = true } }
}

/// A replica URL that reaches a server which is not a standby (a primary, or a replica promoted
/// since): its data need not be the primary's, so it answers no read.
struct NotAStandby: Error, CustomStringConvertible {
    var description: String {
        "the server is not a standby (pg_is_in_recovery() is false): point --postgres-replica at a streaming replica of --postgres"
    }
}

/// No connection to a replica could be had in time.
struct ReplicaUnavailable: Error, CustomStringConvertible {
    var limit: Duration
    var description: String { "no connection to the replica within \(limit) (it does not answer)" }
}

/// A replica as `GET /readyz` reports it.
struct ReplicaStatus: Sendable, Encodable, Equatable {
    var replica: String
    /// Whether it takes reads now (false for a while after a read failed on it).
    var available: Bool
    /// Reads it answered, was behind for, and failed, since the server started.
    var served: Int
    var behind: Int
    var failed: Int
}

extension PostgresStorage {
    /// Runs `read` in a read-only snapshot on a replica that holds every commit of `partition` the
    /// primary holds now (``ReplicaRouting``), or answers nil (no replica, all resting, the one
    /// tried behind or failing): the caller then reads the primary. A failure on the replica is
    /// logged and counted, never thrown.
    func onReplica<T: Sendable>(
        _ partition: DatabasePartition, _ read: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async -> T? {
        guard let replicas, let (index, replica) = replicas.next() else { return nil }
        do {
            let primarySeq = try await client.withConnection { try await self.partitionRow($0, partition)?.dbSeq }
            let answer: T? = try await Self.withConnection(of: replica.client, leasedWithin: PostgresReplicaSet.leaseLimit) { connection in
                try await self.run("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", on: connection)
                do {
                    let (isStandby, replicaSeq) = try await self.standbyState(connection, partition)
                    guard isStandby else { throw NotAStandby() }
                    let value =
                        ReplicaRouting.mayAnswer(replicaSeq: replicaSeq, primarySeq: primarySeq) ? try await read(connection) : nil
                    try await self.run("COMMIT", on: connection)
                    return value
                } catch {
                    _ = try? await self.run("ROLLBACK", on: connection)
                    throw error
                }
            }
            replicas.record(answer == nil ? .behind : .served, of: index)
            return answer
        } catch {
            replicas.record(.failed, of: index)
            logger.warning(
                "replica read failed; the primary answers, and the replica rests",
                metadata: ["replica": "\(replica.name)", "error": "\(PostgresFailure(error, doing: "reading from replica \(replica.name)"))"])
            return nil
        }
    }

    /// Runs `body` on a connection of `client`, or throws ``ReplicaUnavailable`` when none could
    /// be had within `limit`: a pool whose server is down keeps trying to connect for a minute
    /// before it fails a lease, and a read must not wait that long for a replica.
    static func withConnection<T: Sendable>(
        of client: PostgresClient, leasedWithin limit: Duration, _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        let leased = LeaseFlag()
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                try await client.withConnection { connection in
                    leased.set()
                    return try await body(connection)
                }
            }
            group.addTask {
                try await Task.sleep(for: limit)
                return nil
            }
            while let next = try await group.next() {
                if let value = next {
                    group.cancelAll()
                    return value
                }
                if !leased.isSet {
                    group.cancelAll()
                    throw ReplicaUnavailable(limit: limit)
                }
            }
            throw CancellationError()
        }
    }

    /// Whether the server `connection` reaches replays a primary (`pg_is_in_recovery()`), and its
    /// database sequence of `partition` (nil: no row), in one statement.
    private func standbyState(_ connection: PostgresConnection, _ partition: DatabasePartition) async throws
        -> (isStandby: Bool, dbSeq: Int64?)
    {
        let rows = try await run(
            """
            SELECT pg_is_in_recovery(), (SELECT db_seq FROM \(unescaped: table("partition"))
                WHERE container = \(partition.container) AND environment = \(partition.environment.rawValue)
                    AND scope = \(partition.scope.rawValue) AND owner = \(partition.owner))
            """, on: connection)
        for try await row in rows.decode((Bool, Int64?).self) { return row }
        return (false, nil)
    }

    /// Runs `read` in a read-only snapshot on a replica that has caught up (``onReplica(_:_:)``),
    /// else on the primary.
    func readSnapshot<T: Sendable>(
        of partition: DatabasePartition, _ read: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        if let value = await onReplica(partition, read) { return value }
        return try await snapshot(read)
    }
}
