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
/// changes (WireProtocol.md §8), and, when the poll named `since`, the `changes/database` answer
/// for it and the first `changes/zone` page of each changed zone whose token it named in `zones`,
/// which save the client those requests.
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
        let requested = try query["since"].map { text throws(APIError) in
            try ChangesController.databaseSeq(String(text), partition)
        }
        let zoneTokens = try Self.zoneTokens(query["zones"].map(String.init))
        var since = requested
        let limit = services.limits.maxResultsLimit

        while true {
            let subscription = services.broker.subscribe(partition.key)
            defer { services.broker.unsubscribe(subscription) }
            let page = try await services.storage.databaseChanges(in: partition, after: since ?? .max, limit: limit)
            let start = since ?? page.dbSeq
            since = start
            try ChangesController.checkNotAhead(start, of: page.dbSeq)
            let remaining = deadline - ContinuousClock.now
            if page.dbSeq > start || remaining <= .zero || Task.isShuttingDownGracefully || Task.isCancelled {
                let changed = page.dbSeq > start
                context.logger.info(
                    "long poll answered",
                    metadata: ["database": "\(partition)", "changed": "\(changed)", "token": "\(page.dbSeq)"])
                var notifications: [PushNotification] = []
                if changed, case .user(let user) = call.caller {
                    let subscriber = Subscriber(
                        container: partition.container, environment: partition.environment, scope: partition.scope, user: user)
                    notifications = try await services.storage.notifications(
                        for: subscriber, after: start, through: page.dbSeq, limit: services.limits.maxResultsLimit)
                }
                let databaseChanges =
                    changed && requested != nil
                    ? ChangesController.databaseChanges(page, after: start, limit: limit, in: partition) : nil
                var zoneChanges: [ZoneChanges] = []
                var records: [[[UInt8]]] = []
                if databaseChanges != nil, !zoneTokens.isEmpty {
                    let listed = page.zones.prefix(limit).filter { !$0.deleted }
                    for (changes, pageRecords) in await zonePages(
                        for: zoneTokens, of: listed, in: partition, context: context)
                    {
                        zoneChanges.append(changes)
                        records.append(pageRecords)
                    }
                }
                return try JSONResponse.make(
                    NotificationsResponse(
                        changed: changed, syncToken: SyncToken.database(partition, seq: page.dbSeq).encoded,
                        zones: page.zones.map { .init(zoneID: partition.address(of: $0).zoneID) },
                        notifications: notifications.isEmpty ? nil : notifications, databaseChanges: databaseChanges,
                        zoneChanges: zoneChanges.isEmpty ? nil : zoneChanges),
                    records: records)
            }
            context.logger.debug("long poll waiting", metadata: ["database": "\(partition)", "token": "\(start)"])
            let broker = services.broker
            await services.metrics.waitingLongPoll {
                await cancelWhenGracefulShutdown { await broker.wait(subscription, timeout: remaining) }
            }
        }
    }

    /// For each of the changed `zones` whose token the poll named: the first page of its
    /// changes from that token, as `changes/zone` answers it. A zone whose page cannot be
    /// served that way (its token expired, say) is left to the client's own `changes/zone`.
    private func zonePages(
        for tokens: [SyncToken], of zones: [StoredZone], in partition: DatabasePartition, context: CloudRequestContext
    ) async -> [(changes: ZoneChanges, records: [[UInt8]])] {
        let changes = ChangesController(services: services)
        var pages: [(changes: ZoneChanges, records: [[UInt8]])] = []
        for zone in zones {
            let address = partition.address(of: zone)
            let identity = SyncToken.identity(of: address)
            guard let token = tokens.first(where: { $0.identity == identity }) else { continue }
            let item = ZoneChangesRequest.Zone(
                zoneID: address.zoneID, syncToken: token.encoded, resultsLimit: NotificationsResponse.maxZoneChangesRecords)
            let result = try? await changes.changes(
                of: item, defaults: ZoneChangesRequest(zones: []), in: partition, context: context)
            guard case .success(let page)? = result else { continue }
            pages.append(page)
        }
        return pages
    }

    /// The zone tokens of `zones=<token>,<token>` (at most ``NotificationsResponse/maxZoneTokens``).
    static func zoneTokens(_ text: String?) throws(APIError) -> [SyncToken] {
        guard let text, !text.isEmpty else { return [] }
        let parts = text.split(separator: ",", omittingEmptySubsequences: true)
        guard parts.count <= NotificationsResponse.maxZoneTokens else {
            throw APIError(
                .badRequest,
                "zones names \(parts.count) zone tokens; name at most \(NotificationsResponse.maxZoneTokens)")
        }
        var tokens: [SyncToken] = []
        for part in parts {
            do {
                tokens.append(try SyncToken.decode(String(part), as: .zone))
            } catch {
                throw APIError(.badRequest, "zones: \(error.error.reason ?? "a token is malformed"); name only zone tokens")
            }
        }
        return tokens
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
