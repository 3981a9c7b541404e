import CloudStoreWire
import Foundation
import Hummingbird
import Logging

/// The middleware in front of every `/database/1/{container}/{environment}/...` route.
///
/// In order: checks the container, environment and database of the path (400), reads the body up
/// to the limit (413), authenticates the caller by bearer token or server-to-server signature
/// (421 without credentials, 401 with bad ones), applies the per-caller rate limit (429), and puts
/// the result in the context as an ``AuthenticatedCall``.
struct RequestGate: RouterMiddleware {
    typealias Context = CloudRequestContext

    let services: CloudServices

    func handle(
        _ request: Request, context: CloudRequestContext,
        next: (Request, CloudRequestContext) async throws -> Response
    ) async throws -> Response {
        let (container, environment, scope) = try Self.route(of: context.parameters)
        let body = try await readBody(of: request)
        let caller = try authenticate(request, body: body)
        try throttle(caller)

        var context = context
        context.call = AuthenticatedCall(
            caller: caller, container: container, environment: environment, scope: scope, body: body,
            deviceID: request.headers[named: WireHeader.device])
        context.logger[metadataKey: "caller"] = "\(caller)"
        context.logger.trace("request body", metadata: ["body": "\(String(decoding: body.prefix(1 << 16), as: UTF8.self))"])
        return try await next(request, context)
    }

    /// The container, environment and database of a path, or 400 naming the bad segment.
    static func route(of parameters: Parameters) throws(APIError) -> (String, CloudEnvironment, DatabaseScope?) {
        let container = parameters.get("container") ?? ""
        guard DatabaseRoute.isValidContainer(container) else {
            throw APIError(
                .badRequest,
                "container \"\(container.prefix(140))\" is invalid: use 1 to 128 of A-Z a-z 0-9 . _ -")
        }
        let environmentName = parameters.get("environment") ?? ""
        guard let environment = CloudEnvironment(rawValue: environmentName) else {
            throw APIError(
                .badRequest, "environment \"\(environmentName.prefix(64))\" is unknown: use development or production")
        }
        guard let databaseName = parameters.get("database") else { return (container, environment, nil) }
        guard let scope = DatabaseScope(rawValue: databaseName) else {
            throw APIError(
                .badRequest, "database \"\(databaseName.prefix(64))\" is unknown: use public, private or shared")
        }
        return (container, environment, scope)
    }

    /// Reads the body, never more than the limit: a larger one answers 413 without being kept.
    private func readBody(of request: Request) async throws -> [UInt8] {
        let limit = services.limits.maxBodyBytes
        let tooLarge = APIError(
            .limitExceeded, "the request body is larger than \(limit) bytes: split the request")
        if let length = request.headers[.contentLength].flatMap(Int.init), length > limit {
            throw tooLarge
        }
        var body: [UInt8] = []
        for try await chunk in request.body {
            guard body.count + chunk.readableBytes <= limit else { throw tooLarge }
            body += chunk.readableBytesView
        }
        return body
    }

    private func authenticate(_ request: Request, body: [UInt8]) throws(APIError) -> Caller {
        let headers = request.headers
        if let keyID = headers[named: WireHeader.keyID] {
            let signature = ServerKeys.Signature(
                keyID: keyID, date: headers[named: WireHeader.date],
                signature: headers[named: WireHeader.signature])
            let verified = try services.serverKeys.verify(
                signature, body: body, path: request.uri.path, now: services.clock.now())
            return .serverKey(verified)
        }
        if headers[named: WireHeader.signature] != nil {
            throw APIError(.authenticationFailed, "a signed request needs the \(WireHeader.keyID) header")
        }
        let token: String
        if let authorization = headers[.authorization] {
            guard authorization.lowercased().hasPrefix("bearer ") else {
                throw APIError(.authenticationFailed, "use an Authorization header of the form \"Bearer <token>\"")
            }
            token = String(authorization.dropFirst(7)).trimmingCharacters(in: .whitespaces)
        } else if let queryToken = request.uri.queryParameters["ckWebAuthToken"] {
            token = String(queryToken)
        } else {
            throw APIError(
                .authenticationRequired,
                "this request needs a user: send Authorization: Bearer <token>, or sign it with a server-to-server key for the public database")
        }
        guard let user = services.bearerTokens.user(for: token) else {
            throw APIError(.authenticationFailed, "the bearer token is not known to this server")
        }
        return .user(user)
    }

    private func throttle(_ caller: Caller) throws(APIError) {
        guard let limiter = services.rateLimiter,
            let wait = limiter.take(for: caller.description, now: services.clock.now())
        else { return }
        let seconds = max(1, wait.rounded(.up))
        var error = APIError(
            .throttled, "too many requests from this caller: wait \(Int(seconds)) s", retryAfter: seconds)
        error.headers[named: WireHeader.retryAfter] = String(Int(seconds))
        throw error
    }
}

extension HTTPFields {
    /// A header by its name as text, for the protocol's own headers.
    subscript(named name: String) -> String? {
        get { self[.init(name)!] }
        set { self[.init(name)!] = newValue }
    }
}
