import Foundation
import Hummingbird
import HummingbirdCore
import Logging

/// The web console under `/console` (on when ``ServerConfiguration/console`` is): read-only pages
/// of what CloudKit Console shows, for the operator.
///
/// | page | shows |
/// |---|---|
/// | `/console` | the containers served, uptime, the totals in words |
/// | `/console/container?container=` | per environment, the users' databases with their zone counts |
/// | `/console/database?container=&environment=&scope=&owner=` | a database's zones: records, sequence, sync token |
/// | `/console/zone?…&zone=[&after=&limit=]` | a zone's records by name, paged, with fields and change tags |
/// | `/console/record?…&zone=&record=` | one record: every field with its type, its stamps |
/// | `/console/schema?container=&environment=` | the record types and their fields |
/// | `/console/operations`, `/console/errors` | the recent requests, the recent failures |
///
/// Every page needs the operator token: `Authorization: Bearer <operator token>`, or the cookie
/// of a sign-in (`POST /console/sign-in` with the form's `token`, or the link
/// `GET /console/sign-in?token=…&next=/console/…`, which answers 303 to `next`). Without it a page
/// answers 401 with the sign-in form and nothing else; a user's token is not the operator's.
struct ConsoleController: Sendable {
    let services: CloudServices
    /// The operator token check of `/metrics`, used here for bearer tokens and sign-ins.
    let operating: OperatingController
    let session: ConsoleSession

    init(services: CloudServices, operatorToken: String) {
        self.services = services
        self.operating = OperatingController(services: services, operatorToken: operatorToken)
        self.session = ConsoleSession(operatorToken: operatorToken)
    }

    func register(on router: Router<CloudRequestContext>) {
        let console = router.group("console")
        console.get("sign-in", use: signInPage)
        console.post("sign-in", use: signIn)
        console.post("sign-out", use: signOut)
        console.get(use: page(overview))
        console.get("container", use: page(container))
        console.get("database", use: page(database))
        console.get("zone", use: page(zone))
        console.get("record", use: page(record))
        console.get("schema", use: page(schema))
        console.get("operations", use: page(operations))
        console.get("errors", use: page(errors))
        console.get("**", use: page { _ in throw ConsoleFailure(.notFound, "There is no such page in the console.") })
    }

    // MARK: - Signing in

    /// Whether the request carries the operator's credential: the bearer token or the sign-in cookie.
    func isSignedIn(_ request: Request) -> Bool {
        if request.headers[.authorization] != nil {
            return (try? operating.checkOperator(request)) != nil
        }
        guard let cookie = request.cookies[ConsoleSession.cookieName] else { return false }
        return session.isValid(cookie: cookie.value)
    }

    /// `GET /console/sign-in`: the form, or with `token` (a sign-in link) the cookie and a 303 to `next`.
    @Sendable func signInPage(_ request: Request, context: CloudRequestContext) async throws -> Response {
        let next = request.uri.queryParameters["next"].map(String.init)
        guard let token = request.uri.queryParameters["token"].map(String.init) else {
            return signInForm(status: .ok, next: next, message: nil)
        }
        return signIn(token: token, next: next, context: context)
    }

    /// `POST /console/sign-in` with the form's `token` and `next`.
    @Sendable func signIn(_ request: Request, context: CloudRequestContext) async throws -> Response {
        var request = request
        let body = try await request.collectBody(upTo: 16 * 1024)
        let form = (try? URLEncodedFormDecoder().decode(SignInForm.self, from: String(buffer: body)))
            ?? SignInForm(token: nil, next: nil)
        return signIn(token: form.token ?? "", next: form.next, context: context)
    }

    private struct SignInForm: Decodable {
        var token: String?
        var next: String?
    }

    private func signIn(token: String, next: String?, context: CloudRequestContext) -> Response {
        guard operating.isOperator(token) else {
            if let wait = services.throttleFailedSignIn(from: context.clientAddress) {
                return ConsoleView.failure(
                    status: .tooManyRequests, signedIn: false,
                    message: "Too many failed sign-ins from this address: wait \(wait) s and try again.")
            }
            context.logger.notice("console sign-in refused", metadata: ["client": "\(context.clientAddress ?? "unknown")"])
            return signInForm(status: .unauthorized, next: next, message: "That is not the operator token.")
        }
        context.logger.notice("console signed in", metadata: ["client": "\(context.clientAddress ?? "unknown")"])
        var response = Response(status: .seeOther, headers: ConsoleView.headers(location: ConsoleSession.destination(next)))
        response.setCookie(session.signedInCookie)
        return response
    }

    /// `POST /console/sign-out`: drops the cookie and answers 303 to the sign-in form.
    @Sendable func signOut(_ request: Request, context: CloudRequestContext) async throws -> Response {
        var response = Response(status: .seeOther, headers: ConsoleView.headers(location: "/console/sign-in"))
        response.setCookie(ConsoleSession.signedOutCookie)
        return response
    }

    private func signInForm(status: HTTPResponse.Status, next: String?, message: String?) -> Response {
        ConsoleView.render(
            "sign-in", status: status, title: "Sign in", signedIn: false,
            page: SignInView(next: ConsoleSession.destination(next), message: message ?? "", hasMessage: message != nil))
    }

    // MARK: - Pages

    /// A page's handler: the request's query in, the rendered page out.
    typealias Page = @Sendable (ConsoleQuery) async throws -> Response

    /// Wraps a page: the sign-in form (401) unless the operator signed in; failures as pages.
    private func page(_ render: @escaping Page) -> @Sendable (Request, CloudRequestContext) async throws -> Response {
        { request, context in
            guard isSignedIn(request) else {
                return signInForm(
                    status: .unauthorized, next: request.uri.description,
                    message: request.headers[.authorization] == nil ? nil : "That bearer token is not the operator token.")
            }
            do {
                return try await render(ConsoleQuery(request.uri.queryParameters))
            } catch let failure as ConsoleFailure {
                return ConsoleView.failure(status: failure.status, signedIn: true, message: failure.message)
            } catch {
                services.metrics.storageFailed()
                let reason = StorageFailure.describe(error, doing: "showing the console page \(request.uri.path)")
                context.logger.error("console page failed", metadata: ["error": "\(reason)"])
                return ConsoleView.failure(
                    status: .internalServerError, signedIn: true,
                    message: "The storage failed to answer: \(reason). Try again; the server's log has the details.")
            }
        }
    }
}

/// A page that cannot be shown: a bad or unknown address, something that does not exist.
struct ConsoleFailure: Error {
    var status: HTTPResponse.Status
    var message: String

    init(_ status: HTTPResponse.Status, _ message: String) {
        self.status = status
        self.message = message
    }
}

/// The query parameters of a console address, percent-decoded.
struct ConsoleQuery: Sendable {
    private let values: [String: String]

    init(_ parameters: FlatDictionary<Substring, Substring>) {
        var values: [String: String] = [:]
        for (key, value) in parameters where values[String(key)] == nil { values[String(key)] = String(value) }
        self.values = values
    }

    subscript(_ name: String) -> String? { values[name] }

    /// A parameter the page cannot do without; 400 when it is missing or empty.
    func required(_ name: String) throws(ConsoleFailure) -> String {
        guard let value = values[name], !value.isEmpty else {
            throw ConsoleFailure(.badRequest, "The address lacks \(name)=…: follow the console's links rather than typing addresses.")
        }
        return value
    }
}
