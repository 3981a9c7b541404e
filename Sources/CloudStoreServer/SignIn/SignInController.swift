import CloudStoreWire
import Crypto
import Foundation
import Hummingbird

/// The sign-in page, whose URL every 421 `AUTHENTICATION_REQUIRED` carries as `redirectURL` when
/// the server has sign-in users (``SignInUsers``), as CloudKit's does for Apple's sign-in.
///
/// | request | answers |
/// |---|---|
/// | `GET /signin/{container}/{environment}[?redirect=URL]` | the form: login, password, a form token, the return URL |
/// | `POST` of the form, right login and password, a return URL | 303 to the return URL with `ckWebAuthToken=<token>` added to its query |
/// | the same without a return URL | a page that shows the token and posts it to the window that opened it (`{ckSession, ckWebAuthToken}`, to allowed origins only) |
/// | a wrong login or password | 401, the form again with the error |
/// | a form token that does not go with the browser's cookie | 403, the form again (a form another site posted, or one older than the cookie) |
/// | a return URL whose origin is not in `allowedRedirects` | 400, a page saying so, before and after the form |
/// | a container not served, a bad environment, no sign-in users | 404, 400, 404 pages |
/// | more attempts from one address than `--rate-limit` allows | 429 (attempts count as failed sign-ins of the address) |
///
/// The form token is HMAC-SHA256, under a key of the secret, of a random value kept in the
/// cookie `cloudstore_signin` (`HttpOnly`, `SameSite=Strict`, path `/signin`): no other site can
/// read the cookie or make a browser send it, so no other site can post the form. Pages are never
/// cached or framed, and name no referrer.
struct SignInController: Sendable {
    static let cookieName = "cloudstore_signin"

    let services: CloudServices

    /// The sign-in page of a container and environment, as a path.
    static func path(container: String, environment: CloudEnvironment) -> String {
        "/signin/\(container)/\(environment.rawValue)"
    }

    func register(on router: Router<CloudRequestContext>) {
        router.get("signin/:container/:environment", use: page)
        router.post("signin/:container/:environment", use: signIn)
    }

    /// `GET`: the form, with a new cookie and form token.
    @Sendable func page(_ request: Request, context: CloudRequestContext) async throws -> Response {
        let place: Place
        do {
            place = try self.place(context: context, redirect: request.uri.queryParameters["redirect"].map(String.init))
        } catch {
            return Self.refusal(error)
        }
        return form(place, request: request, status: .ok, login: "", message: nil)
    }

    /// `POST` of the form: checks it, then redirects with a token or shows it.
    @Sendable func signIn(_ request: Request, context: CloudRequestContext) async throws -> Response {
        var request = request
        let body = try await request.collectBody(upTo: 16 * 1024)
        let posted = (try? URLEncodedFormDecoder().decode(PostedForm.self, from: String(buffer: body))) ?? PostedForm()
        let place: Place
        do {
            place = try self.place(context: context, redirect: posted.redirect)
        } catch {
            return Self.refusal(error)
        }
        let login = posted.login ?? ""
        guard let nonce = request.cookies[Self.cookieName].flatMap({ Base64URL.decode($0.value) }),
            services.signIn.isValidFormToken(
                posted.csrf ?? "", nonce: nonce, container: place.container, environment: place.environment)
        else {
            return form(
                place, request: request, status: .forbidden, login: login,
                message: "This form was not sent from this page, or is older than your browser's sign-in cookie: sign in again here.")
        }
        if let wait = services.throttleFailedSignIn(from: context.clientAddress) {
            return Self.refusal(ConsoleFailure(.tooManyRequests, "Too many sign-ins from this address: wait \(wait) s and try again."))
        }
        guard let user = try await services.signIn.user(login: login, password: posted.password ?? ""),
            let (token, expires) = services.signIn.token(
                for: user, container: place.container, now: services.clock.now(), lifetime: services.limits.webAuthTokenLifetime)
        else {
            context.logger.notice(
                "sign-in refused", metadata: ["container": "\(place.container)", "client": "\(context.clientAddress ?? "unknown")"])
            return form(place, request: request, status: .unauthorized, login: login, message: "That login and password do not match: try again.")
        }
        context.logger.notice(
            "signed in",
            metadata: [
                "user": "\(user.userRecordName)", "container": "\(place.container)", "client": "\(context.clientAddress ?? "unknown")",
            ])
        if let redirect = place.redirect, let location = RedirectOrigin.adding("ckWebAuthToken", token, to: redirect) {
            return Response(status: .seeOther, headers: Self.headers(location: location))
        }
        let view = TokenView(
            container: place.container, user: user.userRecordName, token: token, expires: ConsoleFormat.time(expires),
            origins: services.signIn.allowedOrigins.map { OriginView(origin: $0) })
        return Self.render("token", title: "Signed in", page: view, headers: Self.headers(script: true))
    }

    // MARK: - Where a sign-in happens

    /// The container, environment and return URL of a sign-in, checked.
    private struct Place {
        var container: String
        var environment: CloudEnvironment
        var redirect: String?
        /// The return URL's origin, which the form may be sent on to.
        var redirectOrigin: String?
    }

    /// The page of a failure that ends a sign-in before the form.
    private static func refusal(_ failure: ConsoleFailure) -> Response {
        let title =
            switch failure.status.code {
            case 404: "No sign-in here"
            case 429: "Too many sign-ins"
            default: "Cannot sign in"
            }
        return render("refusal", title: title, page: FailureView(message: failure.message), status: failure.status)
    }

    /// The sign-in's place, from the path's container and environment and the return URL. Refuses
    /// a bad path (400), a server without sign-in users or a container it does not serve (404), and
    /// a return URL of an origin it does not allow (400).
    private func place(context: CloudRequestContext, redirect: String?) throws(ConsoleFailure) -> Place {
        let container: String
        let environment: CloudEnvironment
        do {
            (container, environment, _) = try RequestGate.route(of: context.parameters)
        } catch {
            throw ConsoleFailure(.badRequest, "This address is not a sign-in page: \(error.error.reason ?? "its container or environment is invalid").")
        }
        guard services.signIn.isConfigured else {
            throw ConsoleFailure(.notFound, "This server has no sign-in page: its operator has given it no sign-in users.")
        }
        guard services.containers.contains(container) else {
            throw ConsoleFailure(.notFound, "This server does not serve container \(container), so nobody signs in to it here.")
        }
        guard let redirect, !redirect.isEmpty else { return Place(container: container, environment: environment) }
        guard let origin = RedirectOrigin.of(redirect), services.signIn.allowedOrigins.contains(origin) else {
            throw ConsoleFailure(
                .badRequest,
                "The app asked to return to \(redirect.prefix(300)), which this server does not allow: its operator lists the origins it may return to in allowedRedirects of the sign-in users file.")
        }
        return Place(container: container, environment: environment, redirect: redirect, redirectOrigin: origin)
    }

    // MARK: - Pages

    private struct PostedForm: Decodable {
        var login: String?
        var password: String?
        var csrf: String?
        var redirect: String?
    }

    /// The form with a new cookie and its form token.
    private func form(
        _ place: Place, request: Request, status: HTTPResponse.Status, login: String, message: String?
    ) -> Response {
        let nonce = Data(SymmetricKey(size: .bits128).withUnsafeBytes { Array($0) })
        let view = FormView(
            container: place.container, environment: place.environment.rawValue,
            action: Self.path(container: place.container, environment: place.environment), login: login,
            csrf: services.signIn.formToken(nonce: nonce, container: place.container, environment: place.environment) ?? "",
            redirect: place.redirect ?? "", returnOrigin: place.redirectOrigin ?? "", hasReturnOrigin: place.redirectOrigin != nil,
            message: message ?? "", hasMessage: message != nil)
        var response = Self.render(
            "form", title: "Sign in", page: view, status: status, headers: Self.headers(formAction: place.redirectOrigin))
        let isHTTPS = RequestOrigin.of(request)?.hasPrefix("https://") == true
        response.setCookie(
            Cookie(
                name: Self.cookieName, value: Base64URL.encode(nonce), path: "/signin", secure: isHTTPS, httpOnly: true,
                sameSite: .strict))
        return response
    }

    /// The console's headers (HTML, never stored, never framed, no referrer), with this page's
    /// policy: forms go to the server itself (and on to `formAction`, the return URL's origin, which
    /// the answer redirects to), and the token page's one script runs.
    private static func headers(location: String? = nil, formAction: String? = nil, script: Bool = false) -> HTTPFields {
        var headers = ConsoleView.headers(location: location)
        let formSources = ["'self'"] + (formAction.map { [$0] } ?? [])
        headers[.contentSecurityPolicy] =
            "default-src 'none'; style-src 'unsafe-inline'; form-action \(formSources.joined(separator: " ")); "
            + "frame-ancestors 'none'; base-uri 'none'" + (script ? "; script-src \(SignInTemplates.scriptSource)" : "")
        return headers
    }

    private static func render<Content: Sendable>(
        _ template: String, title: String, page: Content, status: HTTPResponse.Status = .ok,
        headers: HTTPFields = SignInController.headers()
    ) -> Response {
        guard let html = SignInTemplates.library.render(SignInPage(title: title, page: page), withTemplate: template) else {
            preconditionFailure("no sign-in template \(template)")
        }
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: html)))
    }
}

/// What every sign-in template renders: the layout's title and the page's own view.
struct SignInPage<Content>: Sendable where Content: Sendable {
    var title: String
    var page: Content
}

extension SignInController {
    struct FormView: Sendable {
        var container: String
        var environment: String
        var action: String
        var login: String
        var csrf: String
        var redirect: String
        var returnOrigin: String
        var hasReturnOrigin: Bool
        var message: String
        var hasMessage: Bool
    }

    struct TokenView: Sendable {
        var container: String
        var user: String
        var token: String
        var expires: String
        var origins: [OriginView]
    }

    struct OriginView: Sendable {
        var origin: String
    }
}
