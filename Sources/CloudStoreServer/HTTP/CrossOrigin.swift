import CloudStoreWire
import Hummingbird

/// Lets web pages of any origin call the database and device APIs from a browser, as CloudKit JS
/// does from the app's own origin (WireProtocol.md §1): answers a preflight (`OPTIONS` with
/// `Origin` and `Access-Control-Request-Method`) with what may be sent, and marks every answer to
/// a request with an `Origin`, errors included, `Access-Control-Allow-Origin: *`.
///
/// Any origin is safe here because the API never authenticates by cookie: a page must hold a token
/// to act as anyone, and browsers send no credentials with a request answered `*`. The sign-in
/// pages, the console and the operator's endpoints are not cross-origin: only paths under
/// `/database/` and `/device/` are.
///
/// The outermost middleware, so that the errors ``ErrorMiddleware`` answers carry the headers too:
/// CloudKit JS reads a 421's `redirectURL` to open the sign-in window.
struct CrossOriginMiddleware: RouterMiddleware {
    typealias Context = CloudRequestContext

    private let cors = CORSMiddleware<CloudRequestContext>(
        allowOrigin: .all,
        allowHeaders: [.authorization, .contentType, .range]
            + [WireHeader.device, WireHeader.keyID, WireHeader.date, WireHeader.signature].map { .init($0)! },
        allowMethods: [.get, .post, .options],
        exposedHeaders: ["Content-Range", "Accept-Ranges", "ETag", WireHeader.retryAfter],
        maxAge: .seconds(600))

    /// Whether a path is one of the APIs a browser page may call.
    static func isCrossOrigin(_ path: String) -> Bool {
        path.hasPrefix("/database/") || path.hasPrefix("/device/")
    }

    func handle(
        _ request: Request, context: CloudRequestContext,
        next: (Request, CloudRequestContext) async throws -> Response
    ) async throws -> Response {
        guard Self.isCrossOrigin(request.uri.path) else { return try await next(request, context) }
        return try await cors.handle(request, context: context, next: next)
    }
}
