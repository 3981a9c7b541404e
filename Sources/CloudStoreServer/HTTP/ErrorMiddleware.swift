import CloudStoreLogging
import CloudStoreWire
import Foundation
import Hummingbird
import Logging

/// The outermost middleware but for ``CrossOriginMiddleware``: turns every failure into the JSON error body of WireProtocol.md §4
/// (unknown routes and wrong methods included; storage without room for a write is a retryable 503
/// `TRY_AGAIN_LATER` with `retryAfter`), and logs each request at `.info`.
struct ErrorMiddleware: RouterMiddleware {
    typealias Context = CloudRequestContext

    let metrics: ServerMetrics
    /// The server's logger; each request logs through it, with Hummingbird's request ID.
    let logger: Logger

    func handle(
        _ request: Request, context: CloudRequestContext,
        next: (Request, CloudRequestContext) async throws -> Response
    ) async throws -> Response {
        var context = context
        var requestLogger = logger
        requestLogger[metadataKey: "hb.request.id"] = context.logger[metadataKey: "hb.request.id"]
        context.logger = requestLogger
        let started = ContinuousClock.now
        var response: Response
        var failure: ServerError?
        do {
            response = try await next(request, context)
        } catch let error as APIError {
            failure = error.error
            response = try error.response(from: request, context: context)
        } catch let error as AtomicFailure {
            failure = error.results.compactMap(\.error).first { $0.serverErrorCode != .atomicError }
            response = try error.response(from: request, context: context)
        } catch let error as HTTPError {
            let translated = Self.translate(error, request: request)
            failure = translated.error
            response = try translated.response(from: request, context: context)
        } catch where StorageFailure(error) == .outOfSpace {
            metrics.storageFailed()
            context.logger.error(
                "storage full or failing: answering 503 until writes succeed again",
                metadata: ["error": "\(StorageFailure.describe(error, doing: "answering \(request.method) \(request.uri.path)"))"])
            let seconds = StorageFailure.retryAfterSeconds
            var refusal = APIError(
                .tryAgainLater, "the server's storage cannot take the write now; nothing was saved: retry in \(Int(seconds)) s",
                retryAfter: seconds)
            refusal.headers[named: WireHeader.retryAfter] = String(Int(seconds))
            failure = refusal.error
            response = try refusal.response(from: request, context: context)
        } catch {
            metrics.storageFailed()
            context.logger.error(
                "request failed",
                metadata: ["error": "\(StorageFailure.describe(error, doing: "answering \(request.method) \(request.uri.path)"))"])
            let failed = APIError(.internalError, "the server failed; retry later")
            failure = failed.error
            response = try failed.response(from: request, context: context)
        }
        let elapsed = ContinuousClock.now - started
        let answered = ServerActivity.Request(
            time: Date(), method: request.method.rawValue, route: context.endpointPath ?? "unknown route",
            container: context.parameters.get("container"), status: Int(response.status.code), duration: elapsed,
            caller: context.trace.caller, errorCode: failure?.serverErrorCode.rawValue, reason: failure?.reason)
        metrics.answered(answered)
        var metadata: Logger.Metadata = [
            "method": "\(request.method)", "path": "\(request.uri.path)", "status": "\(response.status.code)",
            "duration": "\(LogFormat.duration(elapsed))",
        ]
        if let failure {
            metadata["error"] = "\(failure.serverErrorCode.rawValue)"
            metadata["reason"] = "\(failure.reason ?? "")"
        }
        context.logger.info("request", metadata: metadata)
        response.logBody(path: request.uri.path, to: context.logger)
        return response
    }

    /// Hummingbird's own errors (no route, body too large) as protocol errors.
    static func translate(_ error: HTTPError, request: Request) -> APIError {
        switch error.status {
        case .notFound: return notFound(request)
        case .contentTooLarge: return APIError(.limitExceeded, "the request body is too large: split the request")
        default:
            // Apple's codes keep Apple's statuses: a failure of the server's own is 500
            // `INTERNAL_ERROR`, anything else about the request 400 `BAD_REQUEST`.
            if error.status.code >= 500 {
                return APIError(.internalError, error.body ?? "the server failed; retry later")
            }
            return APIError(.badRequest, error.body ?? "the request is not valid (HTTP \(error.status.code))")
        }
    }

    /// Says what is wrong with a path that matched no route: a bad container, environment or
    /// database is 400, the wrong method 405, an unknown operation 404.
    static func notFound(_ request: Request) -> APIError {
        let segments = request.uri.path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map(String.init)
        guard segments.count >= 2, segments[0] == "database" else {
            return APIError(.notFound, "no route \(request.uri.path): database calls start with /database/1/")
        }
        guard segments[1] == "1" else {
            return APIError(.notFound, "protocol version \(segments[1].prefix(16)) is unknown: use /database/1/")
        }
        if segments.count > 2, !DatabaseRoute.isValidContainer(segments[2]) {
            return APIError(
                .badRequest, "container \"\(segments[2].prefix(140))\" is invalid: use 1 to 128 of A-Z a-z 0-9 . _ -")
        }
        if segments.count > 3, CloudEnvironment(rawValue: segments[3]) == nil {
            return APIError(
                .badRequest, "environment \"\(segments[3].prefix(64))\" is unknown: use development or production")
        }
        if segments.count > 4, segments[4] != "schema", DatabaseScope(rawValue: segments[4]) == nil {
            return APIError(
                .badRequest, "database \"\(segments[4].prefix(64))\" is unknown: use public, private or shared")
        }
        let operation = segments.dropFirst(5).joined(separator: "/")
        if segments.count > 4, segments[4] == "schema" {
            let method: HTTPRequest.Method = segments.count == 5 ? .get : .post
            if segments.count <= 6, segments.count == 5 || segments[5] == "modify" {
                return methodNotAllowed(request, allowed: method)
            }
        } else if let known = DatabaseOperation(rawValue: operation) {
            return methodNotAllowed(request, allowed: known.method == "GET" ? .get : .post)
        }
        return APIError(.notFound, "no operation \"\(operation.prefix(64))\" in \(request.uri.path)")
    }

    private static func methodNotAllowed(_ request: Request, allowed: HTTPRequest.Method) -> APIError {
        var error = APIError(
            .badRequest, "\(request.uri.path) takes \(allowed.rawValue), not \(request.method.rawValue)",
            status: .methodNotAllowed)
        error.headers[.allow] = allowed.rawValue
        return error
    }
}
