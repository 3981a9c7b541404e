import CloudStoreWire
import Hummingbird

/// `subscriptions/list`, `subscriptions/lookup` and `subscriptions/modify` (WireProtocol.md §8).
///
/// Subscriptions belong to the signed-in user and one database: each user sees and changes only
/// their own, also in the public database. `create` saves a subscription (replacing one with its
/// ID), `update` replaces an existing one, `delete` removes one (answering it as it was); an
/// update or a delete of a
/// subscription that does not exist is a per-item `NOT_FOUND`, an invalid one a per-item
/// `BAD_REQUEST` (``SubscriptionRules``), and the other items stand.
struct SubscriptionsController: Sendable {
    let services: CloudServices

    func register(on group: RouterGroup<CloudRequestContext>) {
        group.get(":database/subscriptions/list", use: list)
        group.post(":database/subscriptions/list", use: list)
        group.post(":database/subscriptions/lookup", use: lookup)
        group.post(":database/subscriptions/modify", use: modify)
    }

    @Sendable func list(_ request: Request, context: CloudRequestContext) async throws -> Response {
        let subscriber = try context.authenticated.subscriber()
        let subscriptions = try await services.storage.subscriptions(of: subscriber, ids: nil)
        return try JSONResponse.make(SubscriptionsResponse(subscriptions: subscriptions.map { .value($0) }))
    }

    @Sendable func lookup(_ request: Request, context: CloudRequestContext) async throws -> Response {
        let call = context.authenticated
        let subscriber = try call.subscriber()
        let body = try call.decode(SubscriptionsLookupRequest.self)
        try services.limits.checkOperationCount(body.subscriptions.count, of: "subscriptions")
        let ids = body.subscriptions.map(\.subscriptionID)
        let valid = ids.filter { SubscriptionRules.idProblem($0) == nil }
        let found = try await services.storage.subscriptions(of: subscriber, ids: valid)
        let byID = Dictionary(found.map { ($0.subscriptionID, $0) }, uniquingKeysWith: { $1 })
        return try JSONResponse.make(
            SubscriptionsResponse(
                subscriptions: ids.map { id in
                    if let problem = SubscriptionRules.idProblem(id) { return .error(ServerError(.badRequest, reason: problem, subscriptionID: id)) }
                    return byID[id].map { .value($0) } ?? .error(Self.notFound(id))
                }))
    }

    @Sendable func modify(_ request: Request, context: CloudRequestContext) async throws -> Response {
        let call = context.authenticated
        let subscriber = try call.subscriber()
        let body = try call.decode(SubscriptionsModifyRequest.self)
        try services.limits.checkOperationCount(body.operations.count, of: "operations")
        var results: [SubscriptionResult?] = []
        var changes: [(index: Int, change: SubscriptionChange)] = []
        for (index, operation) in body.operations.enumerated() {
            switch operation.operationType {
            case .delete:
                if let problem = SubscriptionRules.idProblem(operation.subscriptionID) {
                    results.append(.error(ServerError(.badRequest, reason: problem, subscriptionID: operation.subscriptionID)))
                    continue
                }
                changes.append((index, .delete(operation.subscriptionID)))
                results.append(nil)
            case .create, .update:
                guard let subscription = operation.subscription else { throw APIError(.internalError, "a save without a subscription") }
                if let problem = SubscriptionRules.problem(subscription, in: subscriber.scope) {
                    results.append(.error(ServerError(.badRequest, reason: problem, subscriptionID: subscription.subscriptionID)))
                    continue
                }
                let normalized = SubscriptionRules.normalized(subscription)
                changes.append((index, .save(normalized, mustExist: operation.operationType == .update)))
                results.append(nil)
            }
        }
        let applied = try await services.storage.modifySubscriptions(changes.map(\.change), of: subscriber)
        for ((index, change), applied) in zip(changes, applied) {
            results[index] = applied.map { .value($0) } ?? .error(Self.notFound(change.subscriptionID))
        }
        context.logger.info(
            "subscriptions modified", metadata: ["subscriber": "\(subscriber)", "count": "\(changes.count)"])
        return try JSONResponse.make(SubscriptionsResponse(subscriptions: results.compactMap { $0 }))
    }

    static func notFound(_ id: String) -> ServerError {
        ServerError(.notFound, reason: "subscription \(id) does not exist: list the subscriptions with subscriptions/list", subscriptionID: id)
    }
}

extension AuthenticatedCall {
    /// The signed-in user's subscriptions in this call's database; 421 without a user (an API
    /// token alone, a server-to-server key).
    func subscriber() throws(APIError) -> Subscriber {
        guard let scope else { preconditionFailure("subscriber() on a route without a database") }
        guard case .user(let user) = caller else {
            throw APIError(
                .authenticationRequired,
                "subscriptions belong to a signed-in user: send the user's ckWebAuthToken (or a bearer token)")
        }
        return Subscriber(container: container, environment: environment, scope: scope, user: user)
    }
}
