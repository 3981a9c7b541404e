import CloudStoreWire
import Crypto
import Foundation
import Hummingbird
import ServiceLifecycle

/// Push tokens and the web courier (WireProtocol.md §8): `tokens/create` and `tokens/register`
/// (under `/device/1/{container}/{environment}/`, as OpenCloudKit sends them, under
/// `/database/1/…/`, as Apple's reference writes them, and under `/database/1/…/{database}/`, as
/// MistKit does), and `GET` of the web courier URL they answer.
///
/// The server sends no Apple push notifications: a token is a courier token. Its URL is absolute
/// and is its own authority: its last segment is the token's SHA-256 (hex), a secret only the
/// token's holder can compute (the server keeps only that segment's own digest), so a client
/// long-polls it with no other credential. Each `GET` answers the
/// token user's next notification not yet delivered to that token, in CloudKit's payload shape,
/// and counts it as delivered; when none comes within the wait (`?timeout=<seconds>`, at most
/// ``ServerLimits/maxLongPollSeconds``) it answers 200 with an empty body: ask again.
struct PushController: Sendable {
    let services: CloudServices

    /// The path of a token's web courier below the origin.
    static func courierPath(container: String, environment: CloudEnvironment, token: String) -> String {
        "/device/1/\(container)/\(environment.rawValue)/courier/\(hexDigest(token))"
    }

    func register(database: RouterGroup<CloudRequestContext>, device: RouterGroup<CloudRequestContext>) {
        // MistKit's paths name a database too; tokens belong to the user whatever it names.
        for (group, prefix) in [(database, ""), (database, ":database/"), (device, "")] {
            group.post("\(prefix)tokens/create", use: create)
            group.post("\(prefix)tokens/register", use: register)
        }
    }

    /// The courier route, outside the request gate: its token is its credential.
    func registerCourier(on router: Router<CloudRequestContext>) {
        router.get("device/1/:container/:environment/courier/:courierID", use: courier)
    }

    @Sendable func create(_ request: Request, context: CloudRequestContext) async throws -> Response {
        let call = context.authenticated
        let user = try call.pushUser()
        let body = call.body.isEmpty ? PushTokenCreateRequest() : try call.decode(PushTokenCreateRequest.self)
        let token = Self.newToken()
        _ = try await services.storage.registerPushToken(
            digest: Self.storedDigest(ofToken: token), user: user, container: call.container, environment: call.environment)
        context.logger.info("push token created", metadata: ["user": "\(user)"])
        return try answer(token, apnsEnvironment: body.apnsEnvironment ?? call.environment.rawValue, request, call)
    }

    @Sendable func register(_ request: Request, context: CloudRequestContext) async throws -> Response {
        let call = context.authenticated
        let user = try call.pushUser()
        let body = try call.decode(PushTokenRegisterRequest.self)
        guard Self.isAcceptableToken(body.apnsToken) else {
            throw APIError(
                .badRequest,
                "apnsToken must be 32 to 256 characters of A-Z a-z 0-9 + / = _ -: register a token tokens/create answered, or a device's push token")
        }
        guard
            try await services.storage.registerPushToken(
                digest: Self.storedDigest(ofToken: body.apnsToken), user: user, container: call.container, environment: call.environment)
        else {
            throw APIError(.badRequest, "this apnsToken is registered to another user: create a token with tokens/create")
        }
        return try answer(body.apnsToken, apnsEnvironment: body.apnsEnvironment ?? call.environment.rawValue, request, call)
    }

    private func answer(_ token: String, apnsEnvironment: String, _ request: Request, _ call: AuthenticatedCall) throws -> Response {
        let origin = RequestOrigin.of(request) ?? ""
        let path = Self.courierPath(container: call.container, environment: call.environment, token: token)
        return try JSONResponse.make(
            PushTokenResponse(apnsEnvironment: apnsEnvironment, apnsToken: token, webcourierURL: origin + path))
    }

    @Sendable func courier(_ request: Request, context: CloudRequestContext) async throws -> Response {
        let (container, environment, _) = try RequestGate.route(of: context.parameters)
        let courierID = context.parameters.get("courierID") ?? ""
        guard services.containers.contains(container), courierID.utf8.count == 64 else {
            throw APIError(.notFound, "this web courier URL is not known: create a token with tokens/create")
        }
        let timeout = try NotificationsController.timeout(
            request.uri.queryParameters["timeout"].map(String.init), limit: services.limits.maxLongPollSeconds)
        let deadline = ContinuousClock.now + .milliseconds(Int64(timeout * 1000))
        let digest = Self.hexDigest(courierID)
        var watched: [ChangeBroker.Subscription] = []
        defer { watched.forEach(services.broker.unsubscribe) }
        while true {
            guard
                let delivery = try await services.storage.takeNotification(
                    tokenDigest: digest, container: container, environment: environment)
            else { throw APIError(.notFound, "this web courier URL is not known: create a token with tokens/create") }
            if let notification = delivery.notification {
                context.logger.info(
                    "notification delivered",
                    metadata: ["user": "\(delivery.user)", "subscription": "\(notification.subscriptionID ?? "")"])
                return try JSONResponse.make(notification)
            }
            let remaining = deadline - ContinuousClock.now
            if remaining <= .zero || Task.isShuttingDownGracefully || Task.isCancelled {
                return Response(status: .ok)
            }
            if watched.isEmpty {
                // Subscribe, then read again: a notification written in between is not missed.
                let user = delivery.user
                let publicDatabase = DatabasePartition(
                    container: container, environment: environment, scope: .public, owner: DatabasePartition.publicOwner)
                watched = [publicDatabase, publicDatabase.privateDatabase(of: user), publicDatabase.sharedDatabase(of: user)]
                    .map { services.broker.subscribe($0.key) }
                continue
            }
            let broker = services.broker
            let waiting = watched
            await services.metrics.waitingLongPoll {
                await cancelWhenGracefulShutdown { await broker.wait(anyOf: waiting, timeout: remaining) }
            }
            watched.forEach(services.broker.unsubscribe)
            watched = []
        }
    }

    static func newToken() -> String {
        SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) }.map { String(format: "%02x", $0) }.joined()
    }

    static func hexDigest(_ text: String) -> String {
        SHA256.hash(data: Data(text.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    /// What the storage keeps of a token: the digest of its courier URL's last segment.
    static func storedDigest(ofToken token: String) -> String { hexDigest(hexDigest(token)) }

    static func isAcceptableToken(_ token: String) -> Bool {
        (32...256).contains(token.utf8.count)
            && token.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "+/=_-".unicodeScalars.contains($0)) }
    }
}

extension AuthenticatedCall {
    /// The user a push token delivers to; 421 without one.
    func pushUser() throws(APIError) -> String {
        guard case .user(let user) = caller else {
            throw APIError(
                .authenticationRequired,
                "push tokens deliver a signed-in user's notifications: send the user's ckWebAuthToken (or a bearer token)")
        }
        return user
    }
}
