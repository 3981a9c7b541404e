import CloudStoreWire
import Foundation
import PostgresNIO

/// Subscriptions, their notifications and push tokens (``SubscriptionStorage``), in the tables the
/// SQLite backend has, with the container in each key. A notification's row is written in the
/// transaction of the change that fired it, whose `NOTIFY` of the partition wakes the long polls
/// and web couriers of every instance.
extension PostgresStorage {
    func subscriptions(of subscriber: Subscriber, ids: [String]?) async throws -> [Subscription] {
        try await snapshot { connection in
            var subscriptions: [Subscription] = []
            for try await (id, content) in try await self.run(
                """
                SELECT id, content FROM \(unescaped: self.table("subscription"))
                WHERE container = \(subscriber.container) AND environment = \(subscriber.environment.rawValue)
                    AND scope = \(subscriber.scope.rawValue) AND user_name = \(subscriber.user)
                ORDER BY id
                """, on: connection
            ).decode((String, String).self) where ids?.contains(id) ?? true {
                subscriptions.append(try NotificationPlan.decoded(Subscription.self, content))
            }
            return subscriptions
        }
    }

    func modifySubscriptions(_ changes: [SubscriptionChange], of subscriber: Subscriber) async throws -> [Subscription?] {
        try await transaction { connection in
            var applied: [Subscription?] = []
            for change in changes {
                switch change {
                case .save(let subscription, let mustExist):
                    let content = try NotificationPlan.encoded(subscription)
                    let rows =
                        mustExist
                        ? try await self.run(
                            """
                            UPDATE \(unescaped: self.table("subscription"))
                            SET record_type = \(subscription.query?.recordType), content = \(content)
                            WHERE container = \(subscriber.container) AND environment = \(subscriber.environment.rawValue)
                                AND scope = \(subscriber.scope.rawValue) AND user_name = \(subscriber.user)
                                AND id = \(subscription.subscriptionID)
                            RETURNING content
                            """, on: connection)
                        : try await self.run(
                            """
                            INSERT INTO \(unescaped: self.table("subscription"))
                                (container, environment, scope, user_name, id, record_type, content)
                            VALUES (\(subscriber.container), \(subscriber.environment.rawValue), \(subscriber.scope.rawValue),
                                \(subscriber.user), \(subscription.subscriptionID), \(subscription.query?.recordType), \(content))
                            ON CONFLICT (container, environment, scope, user_name, id)
                            DO UPDATE SET record_type = excluded.record_type, content = excluded.content
                            RETURNING content
                            """, on: connection)
                    applied.append(try await Self.subscription(in: rows))
                case .delete(let id):
                    applied.append(try await self.deleteSubscription(connection, subscriber, id))
                }
            }
            return applied
        }
    }

    /// The subscription of the `content` a statement returned, or nil when it returned no row.
    private static func subscription(in rows: PostgresRowSequence) async throws -> Subscription? {
        var found: Subscription?
        for try await content in rows.decode(String.self) {
            found = try NotificationPlan.decoded(Subscription.self, content)
        }
        return found
    }

    @discardableResult
    func deleteSubscription(_ connection: PostgresConnection, _ subscriber: Subscriber, _ id: String) async throws
        -> Subscription?
    {
        try await Self.subscription(
            in: try await run(
                """
                DELETE FROM \(unescaped: table("subscription"))
                WHERE container = \(subscriber.container) AND environment = \(subscriber.environment.rawValue)
                    AND scope = \(subscriber.scope.rawValue) AND user_name = \(subscriber.user) AND id = \(id)
                RETURNING content
                """, on: connection))
    }

    func notifications(for subscriber: Subscriber, after: Int64, through: Int64, limit: Int) async throws
        -> [PushNotification]
    {
        try await snapshot { connection in
            var notifications: [PushNotification] = []
            for try await payload in try await self.run(
                """
                SELECT payload FROM \(unescaped: self.table("notification"))
                WHERE container = \(subscriber.container) AND environment = \(subscriber.environment.rawValue)
                    AND scope = \(subscriber.scope.rawValue) AND user_name = \(subscriber.user)
                    AND db_seq > \(after) AND db_seq <= \(through)
                ORDER BY id LIMIT \(limit)
                """, on: connection
            ).decode(String.self) {
                notifications.append(try NotificationPlan.decoded(PushNotification.self, payload))
            }
            return notifications
        }
    }

    func registerPushToken(digest: String, user: String, container: String, environment: CloudEnvironment)
        async throws -> Bool
    {
        try await transaction { connection in
            try await self.run(
                """
                INSERT INTO \(unescaped: self.table("push_token")) (digest, container, environment, user_name, delivered_through)
                SELECT \(digest), \(container), \(environment.rawValue), \(user),
                    COALESCE(
                        (SELECT MAX(id) FROM \(unescaped: self.table("notification"))
                         WHERE container = \(container) AND environment = \(environment.rawValue) AND user_name = \(user)),
                        0)
                ON CONFLICT (digest) DO NOTHING
                """, on: connection)
            for try await owner in try await self.run(
                "SELECT user_name FROM \(unescaped: self.table("push_token")) WHERE digest = \(digest)", on: connection
            ).decode(String.self) {
                return owner == user
            }
            return false
        }
    }

    /// Reads first, and locks the token's row only to mark a notification delivered (as the
    /// SQLite backend: a courier that wakes to nothing, or a guessed URL, writes nothing).
    func takeNotification(tokenDigest: String, container: String, environment: CloudEnvironment) async throws
        -> PushDelivery?
    {
        let peeked = try await snapshot { connection in
            try await self.nextNotification(tokenDigest, container, environment, lock: false, connection)
        }
        guard let peeked else { return nil }
        guard peeked.next != nil else { return PushDelivery(user: peeked.user) }
        return try await transaction { connection in
            guard let found = try await self.nextNotification(tokenDigest, container, environment, lock: true, connection)
            else { return nil }
            guard let (id, payload) = found.next else { return PushDelivery(user: found.user) }
            try await self.run(
                "UPDATE \(unescaped: self.table("push_token")) SET delivered_through = \(id) WHERE digest = \(tokenDigest)",
                on: connection)
            return PushDelivery(user: found.user, notification: try NotificationPlan.decoded(PushNotification.self, payload))
        }
    }

    /// A token's user and the oldest notification not delivered to it; nil when the token is
    /// unknown. With `lock`, the token's row stays locked until the transaction ends.
    private func nextNotification(
        _ tokenDigest: String, _ container: String, _ environment: CloudEnvironment, lock: Bool, _ connection: PostgresConnection
    ) async throws -> (user: String, next: (Int64, String)?)? {
        var token: (String, Int64)?
        for try await row in try await run(
            """
            SELECT user_name, delivered_through FROM \(unescaped: table("push_token"))
            WHERE digest = \(tokenDigest) AND container = \(container) AND environment = \(environment.rawValue)
            \(unescaped: lock ? "FOR UPDATE" : "")
            """, on: connection
        ).decode((String, Int64).self) {
            token = row
        }
        guard let (user, deliveredThrough) = token else { return nil }
        var next: (Int64, String)?
        for try await row in try await run(
            """
            SELECT id, payload FROM \(unescaped: table("notification"))
            WHERE container = \(container) AND environment = \(environment.rawValue) AND user_name = \(user)
                AND id > \(deliveredThrough)
            ORDER BY id LIMIT 1
            """, on: connection
        ).decode((Int64, String).self) {
            next = row
        }
        return (user, next)
    }

    /// Every user's query subscriptions to these record types in a public database
    /// (``RecordWriteScript/Read/publicSubscriptions(recordTypes:)``); none without the tables of
    /// subscriptions (``hasSubscriptions``).
    func publicSubscriptions(recordTypes: [String], in partition: DatabasePartition, _ connection: PostgresConnection)
        async throws -> [(subscriber: Subscriber, subscription: Subscription)]
    {
        guard hasSubscriptions else { return [] }
        var found: [(subscriber: Subscriber, subscription: Subscription)] = []
        for try await (user, content) in try await run(
            """
            SELECT user_name, content FROM \(unescaped: table("subscription"))
            WHERE container = \(partition.container) AND environment = \(partition.environment.rawValue)
                AND scope = \(DatabaseScope.public.rawValue) AND record_type = ANY(\(recordTypes))
            """, on: connection
        ).decode((String, String).self) {
            found.append(
                (
                    Subscriber(container: partition.container, environment: partition.environment, scope: .public, user: user),
                    try NotificationPlan.decoded(Subscription.self, content)
                ))
        }
        return found
    }

    /// Every subscription of each subscriber (``RecordWriteScript/Read/subscriptions(of:)``), in one
    /// statement; none without the tables of subscriptions (``hasSubscriptions``).
    func subscriptions(of subscribers: [Subscriber], in partition: DatabasePartition, _ connection: PostgresConnection)
        async throws -> [(subscriber: Subscriber, subscription: Subscription)]
    {
        guard hasSubscriptions else { return [] }
        var found: [(subscriber: Subscriber, subscription: Subscription)] = []
        for try await (scopeName, user, content) in try await run(
            """
            SELECT subscription.scope, subscription.user_name, subscription.content
            FROM \(unescaped: table("subscription")) AS subscription
            JOIN unnest(\(subscribers.map(\.scope.rawValue))::text[], \(subscribers.map(\.user))::text[]) AS watcher(scope, user_name)
                ON subscription.scope = watcher.scope AND subscription.user_name = watcher.user_name
            WHERE subscription.container = \(partition.container) AND subscription.environment = \(partition.environment.rawValue)
            """, on: connection
        ).decode((String, String, String).self) {
            guard let scope = DatabaseScope(rawValue: scopeName) else { continue }
            found.append(
                (
                    Subscriber(container: partition.container, environment: partition.environment, scope: scope, user: user),
                    try NotificationPlan.decoded(Subscription.self, content)
                ))
        }
        return found
    }

    /// Stores notifications in one statement, in order
    /// (``RecordWriteScript/Operation/insertNotifications(_:createdAt:)``).
    func insertNotifications(
        _ notifications: [PlannedNotification], createdAt: Date, in partition: DatabasePartition, _ connection: PostgresConnection
    ) async throws {
        try await run(
            """
            INSERT INTO \(unescaped: table("notification")) (container, environment, scope, user_name, db_seq, created_at, payload)
            SELECT \(partition.container), \(partition.environment.rawValue), scope, user_name, db_seq, \(createdAt.millisecondsSince1970),
                payload
            FROM unnest(\(notifications.map(\.subscriber.scope.rawValue))::text[], \(notifications.map(\.subscriber.user))::text[],
                \(notifications.map(\.dbSeq))::bigint[], \(try notifications.map { try NotificationPlan.encoded($0.payload) })::text[])
                WITH ORDINALITY AS notification(scope, user_name, db_seq, payload, position)
            ORDER BY position
            """, on: connection)
    }
}
