import CloudStoreWire
import Foundation
import Hummingbird
import ServiceLifecycle

/// The long poll `GET /{db}/notifications?since=<database token>&timeout=<seconds>` (ext).
///
/// Answers at once when the database changed after `since`; otherwise waits for the
/// ``ChangeBroker`` to report a commit to the caller's database (from this process, or from another
/// server through PostgreSQL `NOTIFY`), for at most `timeout` seconds (default and maximum
/// ``ServerLimits/maxLongPollSeconds``). Without `since` it waits for the next change after now.
/// A graceful shutdown answers waiting polls at once with `changed: false`. A signed-in caller's
/// answer carries the notifications their subscriptions to this database produced for those
/// changes (WireProtocol.md §8).
struct NotificationsController: Sendable {
    let services: CloudServices

    func register(on group: RouterGroup<CloudRequestContext>) {
        group.get(":database/notifications", use: poll)
    }

    @Sendable func poll(_ request: Request, context: CloudRequestContext) async throws -> Response {
        let call = context.authenticated
        let partition = try call.partition()
        let query = request.uri.queryParameters
        let timeout = try Self.timeout(query["timeout"].map(String.init), limit: services.limits.maxLongPollSeconds)
        let deadline = ContinuousClock.now + .milliseconds(Int64(timeout * 1000))
        var since = try query["since"].map { text throws(APIError) in
            try ChangesController.databaseSeq(String(text), partition)
        }

        while true {
            let subscription = services.broker.subscribe(partition.key)
            defer { services.broker.unsubscribe(subscription) }
            let page = try await services.storage.databaseChanges(
                in: partition, after: since ?? .max, limit: services.limits.maxResultsLimit)
            let start = since ?? page.dbSeq
            since = start
            try ChangesController.checkNotAhead(start, of: page.dbSeq)
            let remaining = deadline - ContinuousClock.now
            if page.dbSeq > start || remaining <= .zero || Task.isShuttingDownGracefully || Task.isCancelled {
                context.logger.info(
                    "long poll answered",
                    metadata: ["database": "\(partition)", "changed": "\(page.dbSeq > start)", "token": "\(page.dbSeq)"])
                var notifications: [PushNotification] = []
                if page.dbSeq > start, case .user(let user) = call.caller {
                    let subscriber = Subscriber(
                        container: partition.container, environment: partition.environment, scope: partition.scope, user: user)
                    notifications = try await services.storage.notifications(
                        for: subscriber, after: start, through: page.dbSeq, limit: services.limits.maxResultsLimit)
                }
                return try JSONResponse.make(
                    NotificationsResponse(
                        changed: page.dbSeq > start, syncToken: SyncToken.database(partition, seq: page.dbSeq).encoded,
                        zones: page.zones.map { .init(zoneID: partition.address(of: $0).zoneID) },
                        notifications: notifications.isEmpty ? nil : notifications))
            }
            context.logger.debug("long poll waiting", metadata: ["database": "\(partition)", "token": "\(start)"])
            let broker = services.broker
            await services.metrics.waitingLongPoll {
                await cancelWhenGracefulShutdown { await broker.wait(subscription, timeout: remaining) }
            }
        }
    }

    /// The timeout in seconds: absent means the maximum, larger is clamped, negative is 400.
    static func timeout(_ text: String?, limit: Double) throws(APIError) -> Double {
        guard let text else { return limit }
        guard let seconds = Double(text), seconds.isFinite, seconds >= 0 else {
            throw APIError(.badRequest, "timeout \"\(text.prefix(32))\" is not a number of seconds from 0 to \(Int(limit))")
        }
        return min(seconds, limit)
    }
}
