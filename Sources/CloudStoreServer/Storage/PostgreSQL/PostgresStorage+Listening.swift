import CloudStoreWire
import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle

/// Hearing other instances' commits: the background work of ``PostgresStorage/run(changes:)``,
/// `LISTEN` on the channel every partition's commit notifies, or polling the partitions this
/// instance's long polls wait on (``ChangePoll``).
extension PostgresStorage {
    /// How long a stopping server waits for the pool to close its connections (``BoundedWait``).
    static let poolShutdownLimit: Duration = .seconds(5)

    func run(changes broker: ChangeBroker) async throws {
        // The pool runs in a task of its own, so that a shutdown can stop waiting for it.
        let pool = Task {
            async let replicas: Void = self.replicas?.run() ?? ()
            await self.client.run()
            await replicas
        }
        await cancelWhenGracefulShutdown {
            switch self.notifications {
            case .listen: await self.listen(broker.publish)
            case .poll(let interval): await self.poll(broker, every: interval)
            }
        }
        // The listener ends at the shutdown, or earlier if its connection cannot be had; the
        // pool serves requests until the shutdown either way.
        try? await gracefulShutdown()
        pool.cancel()
        if await BoundedWait.untilEnd(of: pool, atMost: Self.poolShutdownLimit) == .timedOut {
            logger.warning(
                "the PostgreSQL pool did not close its connections within \(Self.poolShutdownLimit) of the shutdown; stopping without waiting for it",
                metadata: ["storage": "postgres", "schema": "\(schemaName)"])
        }
    }

    /// Listens for other instances' commits until cancelled, reconnecting after failures: on a
    /// connection of the pool, or behind a transaction pooler on one of its own past the pooler.
    private func listen(_ onRemoteChange: @escaping @Sendable (String) -> Void) async {
        let prefix = "\(schemaName)|"
        let listen: @Sendable (PostgresConnection) async throws -> Void = { connection in
            try await connection.listen(on: Self.channel) { notifications in
                for try await notification in notifications where notification.payload.hasPrefix(prefix) {
                    onRemoteChange(String(notification.payload.dropFirst(prefix.count)))
                }
            }
        }
        while !Task.isCancelled {
            do {
                if url.transactionPooling {
                    let connection = try await connect()
                    do {
                        try await listen(connection)
                    } catch {
                        try? await connection.close()
                        throw error
                    }
                    try? await connection.close()
                } else {
                    try await client.withConnection(listen)
                }
            } catch {
                // The pool closes its connections when the server stops (also when its start
                // failed): nothing to retry.
                if Task.isCancelled || [.poolClosed, .clientClosedConnection].contains((error as? PSQLError)?.code) { return }
                logger.warning(
                    "change listener failed; retrying",
                    metadata: ["error": "\(PostgresFailure(error, doing: "listening for other instances' changes (LISTEN \(Self.channel))"))"])
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }

    /// Polls, every `interval` until cancelled, the database sequences of the partitions this
    /// instance's long polls wait on, and wakes those that moved (``ChangePoll``).
    private func poll(_ broker: ChangeBroker, every interval: Duration) async {
        var poll = ChangePoll()
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: interval)
                let watched = broker.watchedKeys
                let sequences = watched.isEmpty ? [:] : try await databaseSeqs(of: watched)
                for key in poll.round(watched: watched, sequences: sequences) { broker.publish(key) }
            } catch {
                if Task.isCancelled || [.poolClosed, .clientClosedConnection].contains((error as? PSQLError)?.code) { return }
                logger.warning(
                    "change poll failed; retrying",
                    metadata: ["error": "\(PostgresFailure(error, doing: "polling for other instances' changes"))"])
            }
        }
    }

    /// The database sequence of each partition of `keys` that has a row (``DatabasePartition/key``).
    func databaseSeqs(of keys: Set<String>) async throws -> [String: Int64] {
        let partitions = keys.compactMap(DatabasePartition.init(key:))
        let rows = try await client.withConnection { connection in
            try await self.run(
                """
                SELECT p.container, p.environment, p.scope, p.owner, p.db_seq FROM \(unescaped: self.table("partition")) AS p
                JOIN unnest(\(partitions.map(\.container)), \(partitions.map(\.environment.rawValue)),
                    \(partitions.map(\.scope.rawValue)), \(partitions.map(\.owner))) AS w(container, environment, scope, owner)
                    ON p.container = w.container AND p.environment = w.environment AND p.scope = w.scope AND p.owner = w.owner
                """, on: connection
            ).collect()
        }
        var sequences: [String: Int64] = [:]
        for row in rows {
            let (container, environment, scope, owner, seq) = try row.decode((String, String, String, String, Int64).self)
            guard let environment = CloudEnvironment(rawValue: environment), let scope = DatabaseScope(rawValue: scope) else {
                continue
            }
            let partition = DatabasePartition(container: container, environment: environment, scope: scope, owner: owner)
            sequences[partition.key] = seq
        }
        return sequences
    }
}
