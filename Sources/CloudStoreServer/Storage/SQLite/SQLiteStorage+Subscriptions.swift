import CloudStoreWire
import Foundation
import GRDB

/// Subscriptions, their notifications and push tokens (``SubscriptionStorage``, WireProtocol.md §8).
extension SQLiteStorage {
    static func registerSubscriptionMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v5-subscriptions") { db in
            try db.execute(
                sql: """
                    CREATE TABLE cloudstore_subscription (
                        environment TEXT NOT NULL,
                        scope TEXT NOT NULL,
                        user_name TEXT NOT NULL,
                        id TEXT NOT NULL,
                        record_type TEXT,
                        content TEXT NOT NULL,
                        PRIMARY KEY (environment, scope, user_name, id));
                    CREATE INDEX cloudstore_subscription_by_record_type
                        ON cloudstore_subscription (environment, scope, record_type) WHERE record_type IS NOT NULL;
                    CREATE TABLE cloudstore_notification (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        environment TEXT NOT NULL,
                        scope TEXT NOT NULL,
                        user_name TEXT NOT NULL,
                        db_seq INTEGER NOT NULL,
                        created_at INTEGER NOT NULL,
                        payload TEXT NOT NULL);
                    CREATE INDEX cloudstore_notification_by_user ON cloudstore_notification (environment, user_name, id);
                    CREATE INDEX cloudstore_notification_by_db_seq ON cloudstore_notification (environment, scope, user_name, db_seq);
                    CREATE INDEX cloudstore_notification_by_age ON cloudstore_notification (created_at);
                    CREATE TABLE cloudstore_push_token (
                        digest TEXT PRIMARY KEY,
                        environment TEXT NOT NULL,
                        user_name TEXT NOT NULL,
                        delivered_through INTEGER NOT NULL);
                    """)
        }
    }

    func subscriptions(of subscriber: Subscriber, ids: [String]?) async throws -> [Subscription] {
        try await pool(subscriber.container).read { db in
            var sql = "SELECT content FROM cloudstore_subscription WHERE environment = ? AND scope = ? AND user_name = ?"
            var arguments: StatementArguments = [subscriber.environment.rawValue, subscriber.scope.rawValue, subscriber.user]
            if let ids {
                sql += " AND id IN (SELECT value FROM json_each(?))"
                arguments += [Self.jsonList(ids)]
            }
            return try String.fetchAll(db.cachedStatement(sql: sql + " ORDER BY id"), arguments: arguments)
                .map { try NotificationPlan.decoded(Subscription.self, $0) }
        }
    }

    func modifySubscriptions(_ changes: [SubscriptionChange], of subscriber: Subscriber) async throws -> [Subscription?] {
        try await pool(subscriber.container).write { db in
            let key: StatementArguments = [subscriber.environment.rawValue, subscriber.scope.rawValue, subscriber.user]
            let existing = try db.cachedStatement(
                sql: "SELECT content FROM cloudstore_subscription WHERE environment = ? AND scope = ? AND user_name = ? AND id = ?")
            return try changes.map { change -> Subscription? in
                let before = try String.fetchOne(existing, arguments: key + [change.subscriptionID])
                switch change {
                case .save(_, mustExist: true) where before == nil, .delete where before == nil:
                    return nil
                case .save(let subscription, _):
                    try db.cachedStatement(
                        sql: """
                            INSERT INTO cloudstore_subscription (environment, scope, user_name, id, record_type, content)
                            VALUES (?, ?, ?, ?, ?, ?)
                            ON CONFLICT DO UPDATE SET record_type = excluded.record_type, content = excluded.content
                            """
                    ).execute(
                        arguments: key + [
                            subscription.subscriptionID, subscription.query?.recordType, try NotificationPlan.encoded(subscription),
                        ])
                    return subscription
                case .delete(let id):
                    try self.deleteSubscription(db, subscriber, id)
                    return try before.map { try NotificationPlan.decoded(Subscription.self, $0) }
                }
            }
        }
    }

    func deleteSubscription(_ db: Database, _ subscriber: Subscriber, _ id: String) throws {
        try db.cachedStatement(
            sql: "DELETE FROM cloudstore_subscription WHERE environment = ? AND scope = ? AND user_name = ? AND id = ?"
        ).execute(arguments: [subscriber.environment.rawValue, subscriber.scope.rawValue, subscriber.user, id])
    }

    func notifications(for subscriber: Subscriber, after: Int64, through: Int64, limit: Int) async throws
        -> [PushNotification]
    {
        try readNow(subscriber.container) { db in
            try String.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT payload FROM cloudstore_notification
                        WHERE environment = ? AND scope = ? AND user_name = ? AND db_seq > ? AND db_seq <= ?
                        ORDER BY id LIMIT ?
                        """),
                arguments: [
                    subscriber.environment.rawValue, subscriber.scope.rawValue, subscriber.user, after, through, limit,
                ]
            ).map { try NotificationPlan.decoded(PushNotification.self, $0) }
        }
    }

    func registerPushToken(digest: String, user: String, container: String, environment: CloudEnvironment)
        async throws -> Bool
    {
        try await pool(container).write { db in
            if let owner = try String.fetchOne(
                db, sql: "SELECT user_name FROM cloudstore_push_token WHERE digest = ?", arguments: [digest])
            {
                return owner == user
            }
            let newest =
                try Int64.fetchOne(db, sql: "SELECT MAX(id) FROM cloudstore_notification") ?? 0
            try db.execute(
                sql: "INSERT INTO cloudstore_push_token (digest, environment, user_name, delivered_through) VALUES (?, ?, ?, ?)",
                arguments: [digest, environment.rawValue, user, newest])
            return true
        }
    }

    /// Reads first, and writes only to mark a notification delivered: a courier that wakes to
    /// find nothing (every public write wakes them all), or a guessed courier URL, never waits
    /// for the file's one writer.
    func takeNotification(tokenDigest: String, container: String, environment: CloudEnvironment) async throws
        -> PushDelivery?
    {
        let pool = try pool(container)
        @Sendable func next(_ db: Database) throws -> (user: String, id: Int64?, payload: String?)? {
            guard
                let token = try Row.fetchOne(
                    db.cachedStatement(
                        sql: "SELECT user_name, delivered_through FROM cloudstore_push_token WHERE digest = ? AND environment = ?"),
                    arguments: [tokenDigest, environment.rawValue])
            else { return nil }
            let user: String = token["user_name"]
            let next = try Row.fetchOne(
                db.cachedStatement(
                    sql: """
                        SELECT id, payload FROM cloudstore_notification
                        WHERE environment = ? AND user_name = ? AND id > ? ORDER BY id LIMIT 1
                        """),
                arguments: [environment.rawValue, user, token["delivered_through"] as Int64])
            return (user, next?["id"], next?["payload"])
        }
        guard let peeked = try await pool.read(next) else { return nil }
        guard peeked.id != nil else { return PushDelivery(user: peeked.user) }
        return try await pool.write { db in
            guard let found = try next(db) else { return nil }
            guard let id = found.id, let payload = found.payload else { return PushDelivery(user: found.user) }
            try db.execute(
                sql: "UPDATE cloudstore_push_token SET delivered_through = ? WHERE digest = ?", arguments: [id, tokenDigest])
            return PushDelivery(user: found.user, notification: try NotificationPlan.decoded(PushNotification.self, payload))
        }
    }

    /// Every user's query subscriptions to these record types in a public database, through
    /// their index (``RecordWriteScript/Read/publicSubscriptions(recordTypes:)``).
    func publicSubscriptions(recordTypes: [String], in partition: DatabasePartition, _ db: Database) throws
        -> [(subscriber: Subscriber, subscription: Subscription)]
    {
        try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT user_name, content FROM cloudstore_subscription
                    WHERE environment = ? AND scope = ? AND record_type IN (SELECT value FROM json_each(?))
                    """),
            arguments: [partition.environment.rawValue, DatabaseScope.public.rawValue, Self.jsonList(recordTypes)]
        ).map { row in
            (
                Subscriber(container: partition.container, environment: partition.environment, scope: .public, user: row["user_name"]),
                try NotificationPlan.decoded(Subscription.self, row["content"])
            )
        }
    }

    /// Every subscription of each subscriber (``RecordWriteScript/Read/subscriptions(of:)``).
    func subscriptions(of subscribers: [Subscriber], _ db: Database) throws -> [(subscriber: Subscriber, subscription: Subscription)] {
        let select = try db.cachedStatement(
            sql: "SELECT content FROM cloudstore_subscription WHERE environment = ? AND scope = ? AND user_name = ?")
        var found: [(subscriber: Subscriber, subscription: Subscription)] = []
        for subscriber in subscribers {
            for content in try String.fetchAll(select, arguments: [subscriber.environment.rawValue, subscriber.scope.rawValue, subscriber.user]) {
                found.append((subscriber, try NotificationPlan.decoded(Subscription.self, content)))
            }
        }
        return found
    }

    /// Stores notifications, in order (``RecordWriteScript/Operation/insertNotifications(_:createdAt:)``).
    func insertNotifications(_ notifications: [PlannedNotification], createdAt: Date, _ db: Database) throws {
        let insert = try db.cachedStatement(
            sql: """
                INSERT INTO cloudstore_notification (environment, scope, user_name, db_seq, created_at, payload)
                VALUES (?, ?, ?, ?, ?, ?)
                """)
        for notification in notifications {
            try insert.execute(arguments: [
                notification.subscriber.environment.rawValue, notification.subscriber.scope.rawValue, notification.subscriber.user,
                notification.dbSeq, createdAt.millisecondsSince1970, try NotificationPlan.encoded(notification.payload),
            ])
        }
    }
}
