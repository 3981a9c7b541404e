import CloudStoreWire
import Foundation
import Hummingbird
import Logging

/// The middleware in front of every `/database/1/{container}/{environment}/...` route.
///
/// In order: checks the container, environment and database of the path (400), reads the body up
/// to the limit and within the body timeout (413, 400), authenticates the caller by bearer token or
/// server-to-server signature (421 without credentials, 401 with bad ones; when rate limiting is on,
/// failures are limited per client address and answer 429 beyond it; a bearer token is one of the
/// tokens file or a web auth token of the sign-in page), applies the per-caller rate
/// limit (429), checks that the server serves the container (404), and puts the result in the
/// context as an ``AuthenticatedCall``.
///
/// The routes of asset bytes (uploads and downloads, WireProtocol.md §7) stream their bodies
/// themselves: their gate has `readsBody` false and leaves the body unread (a signed request there
/// must be a `GET`, whose empty body is what the signature covers). An upload without credentials
/// acts as the caller its upload URL was issued to.
///
/// Every 421 `AUTHENTICATION_REQUIRED` it or the routes behind it answer carries the sign-in
/// page's URL as `redirectURL` when the server has sign-in users (``SignInAuthority``).
struct RequestGate: RouterMiddleware {
    typealias Context = CloudRequestContext

    let services: CloudServices
    var readsBody = true

    func handle(
        _ request: Request, context: CloudRequestContext,
        next: (Request, CloudRequestContext) async throws -> Response
    ) async throws -> Response {
        do {
            return try await pass(request, context: context, next: next)
        } catch var error as APIError where error.error.serverErrorCode == .authenticationRequired {
            if let url = signInURL(for: request, context: context) {
                error.error.redirectURL = url
                error.error.reason = (error.error.reason ?? "this request needs a user")
                    + "; or sign the user in at redirectURL and send the ckWebAuthToken it gives"
            }
            throw error
        }
    }

    /// The sign-in page's absolute URL for the request's container and environment
    /// (``SignInController/path(container:environment:)``, on the origin the client reached:
    /// ``RequestOrigin``), when the server has sign-in users and serves the container; else nil.
    private func signInURL(for request: Request, context: CloudRequestContext) -> String? {
        guard services.signIn.isConfigured, let (container, environment, _) = try? Self.route(of: context.parameters),
            services.containers.contains(container)
        else { return nil }
        return (RequestOrigin.of(request) ?? "") + SignInController.path(container: container, environment: environment)
    }

    /// The gate's checks, in the order the type's summary gives, then the route behind it.
    private func pass(
        _ request: Request, context: CloudRequestContext,
        next: (Request, CloudRequestContext) async throws -> Response
    ) async throws -> Response {
        let (container, environment, scope) = try Self.route(of: context.parameters)
        let body = readsBody ? try await readBody(of: request, context: context) : []
        let caller: Caller
        do {
            caller = try await authenticate(request, body: body, container: container, parameters: context.parameters)
        } catch {
            if let wait = services.throttleFailedSignIn(from: context.clientAddress) {
                throw Self.throttled(wait: wait, what: "failed sign-ins from this address")
            }
            throw error
        }
        context.trace.caller = caller.description
        if let wait = services.throttle(caller.description) {
            throw Self.throttled(wait: wait, what: "requests from this caller")
        }
        guard services.containers.contains(container) else {
            throw APIError(
                .notFound,
                "container \(container) is not served here: use one this server's configuration declares")
        }

        var context = context
        context.call = AuthenticatedCall(
            caller: caller, container: container, environment: environment, scope: scope, body: body,
            deviceID: request.headers[named: WireHeader.device],
            assetURLs: scope == nil
                ? nil
                : try await services.assetURLKeys.key(container, storage: services.storage).map { key in
                    AssetDownloadURLs(
                        origin: RequestOrigin.of(request), caller: caller.userRecordName, now: services.clock.now(), key: key)
                })
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

    /// Reads the body, never keeping more than the limit, within the body timeout.
    ///
    /// A body over the limit answers 413 once the rest of it has been read and dropped, so that a
    /// client that sends its whole body before reading the answer (Python's `urllib`, say) sees the
    /// 413. A body still arriving at the timeout answers at once and its connection closes shortly
    /// after the answer.
    private func readBody(of request: Request, context: CloudRequestContext) async throws -> [UInt8] {
        let limit = services.limits.maxBodyBytes
        let deadline = ContinuousClock.now + .seconds(services.limits.bodyTimeoutSeconds)
        var body: [UInt8] = []
        var chunks = request.body.makeAsyncIterator()
        while let chunk = try await chunks.next() {
            guard body.count + chunk.readableBytes <= limit else {
                throw await context.refusingBody(
                    APIError(.limitExceeded, "the request body is larger than \(limit) bytes: split the request"),
                    rest: &chunks, deadline: deadline)
            }
            guard ContinuousClock.now <= deadline else {
                throw context.closingAfterAnswer(
                    APIError(
                        .badRequest,
                        "the request body took longer than \(Int(services.limits.bodyTimeoutSeconds)) s to arrive: send it at once"))
            }
            body += chunk.readableBytesView
        }
        return body
    }

    private func authenticate(
        _ request: Request, body: [UInt8], container: String, parameters: Parameters
    ) async throws -> Caller {
        let apiToken = try apiTokenName(of: request, container: container)
        let headers = request.headers
        if let keyID = headers[named: WireHeader.keyID] {
            guard readsBody || request.method == .get else {
                throw APIError(
                    .authenticationFailed,
                    "asset uploads take a user's bearer token: a server-to-server signature cannot cover a streamed body")
            }
            let signature = ServerKeys.Signature(
                keyID: keyID, date: headers[named: WireHeader.date],
                signature: headers[named: WireHeader.signature])
            let verified = try services.serverKeys.verify(
                signature, body: body, path: request.uri.path, query: request.uri.query, now: services.clock.now())
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
        } else if !readsBody, request.method == .post, let uploadID = parameters.get("uploadID") {
            return try await uploadURLCaller(uploadID, container: container)
        } else if !readsBody, request.method == .get, parameters.get("assetID") != nil,
            let access = request.uri.queryParameters[Substring(AssetDownloadURLs.parameter)]
        {
            return try await downloadURLCaller(String(access), path: request.uri.path, container: container)
        } else if let name = apiToken {
            guard APITokenAccess.allows(request.method, path: request.uri.path) else {
                throw APIError(
                    .authenticationRequired,
                    "an API token alone reads the public database only: send a signed-in user's ckWebAuthToken (or a bearer token) to change anything or to reach a private or shared database")
            }
            return .apiToken(name)
        } else {
            throw APIError(
                .authenticationRequired,
                "this request needs a user: send Authorization: Bearer <token>, or sign it with a server-to-server key for the public database")
        }
        if let caller = services.bearerTokens.caller(for: token) { return caller }
        if let caller = try services.signIn.caller(forWebAuthToken: token, container: container, now: services.clock.now()) {
            return caller
        }
        throw APIError(.authenticationFailed, "the bearer token is not known to this server")
    }

    /// The name of the request's `ckAPIToken`, checked against the container's API tokens; nil
    /// without one, or when the container has none (then the token is not checked, as before API
    /// tokens existed). An unknown token is 401, whatever else the request carries.
    private func apiTokenName(of request: Request, container: String) throws(APIError) -> String? {
        guard let token = request.uri.queryParameters["ckAPIToken"], services.bearerTokens.hasAPITokens(for: container)
        else { return nil }
        guard let name = services.bearerTokens.apiTokenName(String(token), in: container) else {
            throw APIError(
                .authenticationFailed,
                "the API token is not one of container \(container)'s (it may have been revoked): use a current one")
        }
        return name
    }

    /// The caller an upload URL was issued to: the URL is its own authority, as Apple's are, so a
    /// client posts the bytes to it without credentials. Its identifier is 128 random bits, it
    /// lasts 15 minutes and is bound to one caller, zone, record and field (``AssetsController``
    /// checks the rest); a guessed one is a failed sign-in like a guessed token.
    private func uploadURLCaller(_ uploadID: String, container: String) async throws -> Caller {
        guard AssetLocation.isIdentifier(uploadID),
            let upload = try await services.storage.assetUpload(uploadID, container: container)
        else {
            throw APIError(.notFound, "this upload URL is unknown (or expired and forgotten): request one with assets/upload")
        }
        return Caller(userRecordName: upload.caller)
    }

    /// The caller a download URL was issued to (``AssetDownloadURLs``): its access is checked
    /// against this path and the container's key before anything is read; ``AssetsController``
    /// then checks that this caller may still read the asset. A forged access is a failed sign-in.
    private func downloadURLCaller(_ access: String, path: String, container: String) async throws -> Caller {
        guard let key = try await services.assetURLKeys.key(container, storage: services.storage) else {
            throw APIError(.authenticationRequired, "this server signs no download URLs yet: send credentials")
        }
        switch AssetDownloadURLs.caller(presenting: access, path: path, now: services.clock.now(), key: key) {
        case .success(let caller): return Caller(userRecordName: caller)
        case .failure(let refusal): throw APIError(.authenticationFailed, refusal.reason)
        }
    }

    /// 429 `THROTTLED` asking to wait `wait` seconds, in the body and in `Retry-After`.
    private static func throttled(wait: Int, what: String) -> APIError {
        var error = APIError(.throttled, "too many \(what): wait \(wait) s", retryAfter: Double(wait))
        error.headers[named: WireHeader.retryAfter] = String(wait)
        return error
    }
}

extension HTTPFields {
    /// A header by its name as text, for the protocol's own headers.
    subscript(named name: String) -> String? {
        get { self[.init(name)!] }
        set { self[.init(name)!] = newValue }
    }
}
