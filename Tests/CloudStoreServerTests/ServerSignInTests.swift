import CloudStoreTesting
import CloudStoreWire
import Crypto
import Foundation
import Logging
import Testing

@testable import CloudStoreServer

/// The sign-in page (`--sign-in-users`): 421s carry its URL only when the server has sign-in
/// users; a browser signs in with a login and password and comes back with a `ckWebAuthToken`
/// that acts as its user; wrong passwords, forged, expired, foreign and outdated tokens, posted
/// forms without the page's cookie and return URLs the operator did not allow are refused; a token
/// of one instance works on another with the same file; and a real headless browser renders the
/// form with every value escaped.
@Suite("Server sign-in", .timeLimit(.minutes(ReliabilityRun.hangLimitMinutes)))
struct ServerSignInTests {
    static let app = "https://notes.example.com"
    static let apiToken = "api-token-of-the-website"

    // MARK: - 421

    @Test(arguments: Backend.all)
    func redirectURL_onlyWhenTheServerHasSignInUsers(_ backend: Backend) async throws {
        try await withSignIn(backend) { server, _, client in
            let anonymous = client.asUser(nil)
            let required = try await anonymous.send(.GET, client.path(.private, .zonesList))
            #expect(required.status == 421)
            #expect(required.error?.serverErrorCode == .authenticationRequired)
            #expect(required.error?.redirectURL == "\(server.baseURL.absoluteString)/signin/iCloud.test/development")

            let apiTokenAlone = try await anonymous.send(
                .GET, client.inEnvironment(.production).path(.private, .zonesList) + "?ckAPIToken=\(Self.apiToken)")
            #expect(apiTokenAlone.status == 421)
            #expect(apiTokenAlone.error?.redirectURL == "\(server.baseURL.absoluteString)/signin/iCloud.test/production")

            let proxied = try await anonymous.send(
                .GET, client.path(.private, .zonesList),
                headers: [("X-Forwarded-Proto", "https"), ("X-Forwarded-Host", "cloud.example.com")])
            #expect(proxied.error?.redirectURL == "https://cloud.example.com/signin/iCloud.test/development")

            var unserved = anonymous
            unserved.container = "iCloud.not.served"
            let elsewhere = try await unserved.send(.GET, unserved.path(.private, .zonesList))
            #expect(elsewhere.status == 421)
            #expect(elsewhere.error?.redirectURL == nil, "no sign-in page for a container the server does not serve")
        }
        try await withServer(backend) { _, client in
            let required = try await client.asUser(nil).send(.GET, client.path(.private, .zonesList))
            #expect(required.status == 421)
            #expect(required.json["redirectURL"] == nil, "no sign-in users, no redirectURL: \(required.text)")
        }
    }

    // MARK: - Signing in

    @Test(arguments: Backend.all)
    func signIn_redirectsWithATokenThatActsAsTheUser(_ backend: Backend) async throws {
        try await withSignIn(backend) { _, pages, client in
            let returnURL = "\(Self.app)/signed-in?state=a%20b#top"
            let page = try await SignInForm.open(pages, "/signin/iCloud.test/development?redirect=\(ConsoleFormat.percentEncoded(returnURL))")
            #expect(page.answer.status == 200)
            #expect(page.answer.headers.first(name: "Content-Type") == "text/html; charset=utf-8")
            #expect(page.answer.headers.first(name: "Cache-Control") == "no-store")
            let csp = try #require(page.answer.headers.first(name: "Content-Security-Policy"))
            #expect(csp.contains("form-action 'self' \(Self.app);") && csp.contains("frame-ancestors 'none'") && !csp.contains("script-src"))
            let setCookie = try #require(page.answer.headers.first(name: "Set-Cookie"))
            #expect(setCookie.contains("HttpOnly") && setCookie.contains("SameSite=Strict") && setCookie.contains("Path=/signin"))
            for text in ["iCloud.test", "name=\"login\"", "type=\"password\"", "You will return to \(Self.app)"] {
                #expect(page.answer.text.contains(text), "the form lacks \(text)")
            }

            let signedIn = try await page.post(login: "carol", password: "carol's password", redirect: returnURL)
            #expect(signedIn.status == 303, "\(signedIn.text)")
            let location = try #require(signedIn.headers.first(name: "Location"))
            #expect(location.hasPrefix("\(Self.app)/signed-in?state=a%20b&ckWebAuthToken="))
            #expect(location.hasSuffix("#top"))
            let token = try #require(URLComponents(string: location)?.queryItems?.first { $0.name == "ckWebAuthToken" }?.value)

            let asCarol = client.asUser(nil)
            let query = "?ckAPIToken=\(Self.apiToken)&ckWebAuthToken=\(token)"
            let zones = try await asCarol.send(.GET, client.path(.private, .zonesList) + query)
            #expect(zones.status == 200, "\(zones.text)")
            let caller = try await asCarol.send(.GET, client.path(.public, .usersCaller) + query)
            #expect(try caller.decode(CallerResponse.self).userRecordName == "_carol")
            let created = try await asCarol.send(
                .POST, client.path(.private, .zonesModify) + query,
                body: try WireCoding.encode(ZonesModifyRequest(operations: [.init(.create, ZoneID(zoneName: "Notes"))])))
            #expect(try created.decode(ZonesResponse.self).zones.first?.value?.zoneID.ownerRecordName == "_carol")
        }
    }

    @Test func signIn_withoutAReturnURLShowsTheTokenToItsOpener() async throws {
        try await withSignIn { _, pages, client in
            let page = try await SignInForm.open(pages, "/signin/iCloud.test/development")
            let signedIn = try await page.post(login: "carol", password: "carol's password")
            #expect(signedIn.status == 200)
            #expect(signedIn.headers.first(name: "Location") == nil)
            #expect(signedIn.text.contains("signed in to iCloud.test as _carol"))
            #expect(signedIn.text.contains("<li>\(Self.app)</li>"), "the token goes only to the allowed origins")
            let token = try #require(signedIn.text.firstMatch(of: #/<code id="token">([^<]+)</code>/#).map { String($0.output.1) })
            let script = try #require(signedIn.text.firstMatch(of: #/<script>([\s\S]*)</script>/#).map { String($0.output.1) })
            let hash = Data(SHA256.hash(data: Data(script.utf8))).base64EncodedString()
            let csp = try #require(signedIn.headers.first(name: "Content-Security-Policy"))
            #expect(csp.contains("script-src 'sha256-\(hash)'"), "the policy admits the page's one script, and no other")

            let answer = try await client.asUser(token).send(.GET, client.path(.private, .zonesList))
            #expect(answer.status == 200, "a web auth token works as Authorization: Bearer too")
        }
    }

    @Test func signIn_wrongPasswordOrLoginIs401WithTheFormAgain() async throws {
        try await withSignIn { _, pages, _ in
            let page = try await SignInForm.open(pages, "/signin/iCloud.test/development")
            for (login, password) in [("carol", "not carol's password"), ("dave", "carol's password"), ("carol", "")] {
                let refused = try await page.post(login: login, password: password, redirect: "\(Self.app)/cb")
                #expect(refused.status == 401, "\(login)")
                #expect(refused.headers.first(name: "Location") == nil)
                #expect(refused.text.contains("That login and password do not match"))
                #expect(refused.text.contains("value=\"\(login)\""), "the login stays filled in")
                #expect(!refused.text.contains("carol&#39;s password") && !refused.text.contains("carol's password"))
            }
        }
    }

    @Test func signIn_formWithoutThePagesCookieIs403() async throws {
        try await withSignIn { _, pages, _ in
            let page = try await SignInForm.open(pages, "/signin/iCloud.test/development")
            var stranger = page
            stranger.cookie = nil
            #expect(try await stranger.post(login: "carol", password: "carol's password").status == 403)
            var otherCookie = page
            otherCookie.cookie = try await SignInForm.open(pages, "/signin/iCloud.test/development").cookie
            #expect(try await otherCookie.post(login: "carol", password: "carol's password").status == 403)
            var otherPage = page
            otherPage.path = "/signin/iCloud.test/production"
            #expect(
                try await otherPage.post(login: "carol", password: "carol's password").status == 403,
                "a form token is bound to its page's container and environment")
            #expect(try await page.post(login: "carol", password: "carol's password").status == 200)
        }
    }

    @Test func signIn_refusesReturnURLsTheOperatorDidNotAllow() async throws {
        try await withSignIn { _, pages, _ in
            for redirect in [
                "https://evil.example/cb", "https://notes.example.com:8443/cb", "http://notes.example.com/cb",
                "javascript:alert(1)", "//evil.example/cb", "https://notes.example.com@evil.example/cb",
            ] {
                let page = try await pages.get(
                    "/signin/iCloud.test/development?redirect=\(ConsoleFormat.percentEncoded(redirect))", token: nil)
                #expect(page.status == 400, "\(redirect)")
                #expect(page.text.contains("which this server does not allow"), "\(redirect): \(page.text)")
                #expect(page.headers.first(name: "Set-Cookie") == nil)
            }
            let form = try await SignInForm.open(pages, "/signin/iCloud.test/development")
            let posted = try await form.post(login: "carol", password: "carol's password", redirect: "https://evil.example/cb")
            #expect(posted.status == 400)
            #expect(posted.headers.first(name: "Location") == nil)
            #expect(!posted.text.contains("<code"), "no token on the refusal")
            let allowed = try await form.post(login: "carol", password: "carol's password", redirect: "HTTPS://Notes.Example.com:443/cb")
            #expect(allowed.status == 303, "the same origin written otherwise")
        }
    }

    @Test func signIn_pagesOfContainersNotServedOrWithoutUsersAre404() async throws {
        try await withSignIn { _, pages, _ in
            let unserved = try await pages.get("/signin/iCloud.not.served/development", token: nil)
            #expect(unserved.status == 404)
            let staging = try await pages.get("/signin/iCloud.test/staging", token: nil)
            #expect(staging.status == 400)
        }
        try await withServer(.sqlite) { server, _ in
            let page = try await PageClient(baseURL: server.baseURL).get("/signin/iCloud.test/development", token: nil)
            #expect(page.status == 404)
            #expect(page.text.contains("no sign-in page"))
        }
    }

    // MARK: - Web auth tokens

    @Test func webAuthToken_forgedExpiredForeignOrOutdatedIs401() async throws {
        let clock = ManualClock()
        try await withSignIn(clock: clock) { server, pages, client in
            let token = try await SignInForm.token(pages, login: "carol")
            let otherContainersToken = try await SignInForm.token(pages, login: "carol", container: "iCloud.test.sync")
            let use = { (token: String) in
                try await client.asUser(nil).send(.GET, client.path(.private, .zonesList) + "?ckWebAuthToken=\(token)")
            }
            #expect(try await use(token).status == 200)

            var forged = Array(token)
            forged[forged.count - 2] = forged[forged.count - 2] == "A" ? "B" : "A"
            let payload = String(token.prefix { $0 != "." })
            let altered = Base64URL.encode(
                Data(String(decoding: try #require(Base64URL.decode(payload)), as: UTF8.self)
                    .replacingOccurrences(of: "_carol", with: "_alice").utf8))
            let mintedElsewhere = WebAuthToken(container: "iCloud.test", userRecordName: "_carol", expires: Int64.max / 2, credential: "")
                .signed(with: SymmetricKey(size: .bits256))
            for (name, bad) in [
                ("forged MAC", String(forged)), ("altered payload", altered + token.drop { $0 != "." }),
                ("another secret", mintedElsewhere), ("another container", otherContainersToken),
            ] {
                let refused = try await use(bad)
                #expect(refused.status == 401, "\(name)")
                #expect(refused.error?.serverErrorCode == .authenticationFailed)
                #expect(refused.error?.reason?.contains("sign in again") == true, "\(name): \(refused.text)")
            }

            clock.advance(by: ServerLimits().webAuthTokenLifetime - 1)
            #expect(try await use(token).status == 200, "a token lasts 24 hours")
            clock.advance(by: 1)
            let expired = try await use(token)
            #expect(expired.status == 401)
            #expect(expired.error?.reason?.contains("expired") == true, "\(expired.text)")

            clock.advance(by: -10)
            try server.replaceSignInUsers(try Self.users(carolPassword: "carol's new password"))
            let outdated = try await use(token)
            #expect(outdated.status == 401, "a new password ends the old password's tokens")
            #expect(outdated.error?.reason?.contains("password changed") == true)
            try server.replaceSignInUsers(SignInUsers(secret: Self.secret, allowedRedirects: [Self.app], users: []))
            let removed = try await use(token)
            #expect(removed.status == 401, "a user removed from the file signs in no more")
            #expect(removed.error?.reason?.contains("may no longer sign in") == true)
            let form = try await SignInForm.open(pages, "/signin/iCloud.test/development")
            #expect(try await form.post(login: "carol", password: "carol's new password").status == 401)
        }
    }

    @Test func webAuthToken_ofAUserWithTwoLoginsEndsWhenEitherPasswordChanges() async throws {
        func file(workPassword: String) throws -> SignInUsers {
            var users = try Self.users()
            users.users.append(
                SignInUsers.User(
                    userRecordName: "_carol", login: "carol.work",
                    password: try SignInUsers.PasswordHash(password: workPassword, iterations: 1_000)))
            return users
        }
        let before = try file(workPassword: "carol.work's password")
        try await withSignIn(users: before) { server, pages, client in
            let token = try await SignInForm.token(pages, login: "carol")
            let path = client.path(.private, .zonesList) + "?ckWebAuthToken=\(token)"
            let valid = try await client.asUser(nil).send(.GET, path)
            #expect(valid.status == 200)
            var after = before
            after.users[2].password = try SignInUsers.PasswordHash(password: "a new work password", iterations: 1_000)
            try server.replaceSignInUsers(after)
            let refused = try await client.asUser(nil).send(.GET, path)
            #expect(refused.status == 401, "the other login's new password ends the token too")
        }
    }

    @Test func webAuthToken_ofOneInstanceWorksOnAnotherWithTheSameFile() async throws {
        let file = try Self.users()
        try await withSignIn(users: file) { _, firstPages, _ in
            let token = try await SignInForm.token(firstPages, login: "carol")
            try await withSignIn(users: file) { _, _, second in
                let answer = try await second.asUser(nil).send(.GET, second.path(.public, .usersCaller) + "?ckWebAuthToken=\(token)")
                #expect(answer.status == 200, "\(answer.text)")
                #expect(try answer.decode(CallerResponse.self).userRecordName == "_carol")
            }
            let otherSecret = SignInUsers(secret: String(repeating: "z", count: 40), users: file.users)
            try await withSignIn(users: otherSecret) { _, _, third in
                let answer = try await third.asUser(nil).send(.GET, third.path(.public, .usersCaller) + "?ckWebAuthToken=\(token)")
                #expect(answer.status == 401, "a server with another secret refuses the token")
            }
        }
    }

    @Test func configuration_refusesAShortSecretAndBadEntries() async throws {
        let carol = try #require(try Self.users().users.first)
        var twice = carol
        twice.userRecordName = "_dave"
        var weak = carol
        weak.password.iterations = 10
        let cases: [(SignInUsers, String)] = [
            (SignInUsers(secret: "short", users: [carol]), "shorter than 32 characters"),
            (SignInUsers(secret: Self.secret, allowedRedirects: ["https://notes.example.com/cb"], users: [carol]), "not an origin"),
            (SignInUsers(secret: Self.secret, users: [carol, twice]), "given twice"),
            (SignInUsers(secret: Self.secret, users: [weak]), "cloudstore hash-password"),
        ]
        for (users, message) in cases {
            let problem = users.problem
            #expect(problem?.contains(message) == true, "\(String(describing: problem))")
        }
        let decoded = try JSONDecoder().decode(SignInUsers.self, from: Data(#"{"users": []}"#.utf8))
        #expect(decoded.problem?.contains("openssl rand -base64 32") == true)
    }

    // MARK: - In a browser

    @Test(.enabled(if: Chromium.shouldRun, "no chromium: apt-get install -y chromium to run the sign-in page's browser test"))
    func browser_rendersTheFormWithEveryValueEscaped() async throws {
        let container = "iCloud.com.example.odd-name_1"
        try await withSignIn(containers: [container]) { server, _, _ in
            let redirect = "\(Self.app)/cb?next=\"><b id=\"injected\">bold</b>&x='1'"
            let url = "\(server.baseURL.absoluteString)/signin/\(container)/production?redirect=\(ConsoleFormat.percentEncoded(redirect))"
            let page = try await Chromium.load(
                url, screenshot: try Chromium.artifactsDirectory("sign-in").appendingPathComponent("form.png"))
            #expect(page.text.contains("Sign in to use \(container) (production). You will return to \(Self.app)."), "\(page.text)")
            #expect(page.dom.contains(#"<input id="login" type="text" name="login""#))
            #expect(page.dom.contains(#"<input id="password" type="password" name="password""#))
            let csrf = try #require(page.dom.firstMatch(of: #/name="csrf" value="([A-Za-z0-9_-]+)"/#)?.output.1)
            #expect(csrf.count == 43, "an HMAC-SHA256 in base64url")
            #expect(!page.dom.contains("<b id=\"injected\""), "the return URL is text, never markup")
            let shown = try #require(page.dom.firstMatch(of: #/name="redirect" value="([^"]*)"/#).map { String($0.output.1) })
            let decoded = [("&quot;", "\""), ("&#39;", "'"), ("&lt;", "<"), ("&gt;", ">"), ("&amp;", "&")]
                .reduce(shown) { $0.replacingOccurrences(of: $1.0, with: $1.1) }
            #expect(decoded == redirect, "the form sends the return URL back as it came")
            #expect(page.dom.contains(#"action="/signin/iCloud.com.example.odd-name_1/production""#))
        }
    }

    /// The whole flow of a CloudKit JS app in a browser: its page (on an origin of its own) asks
    /// `users/caller` with its API token, gets 421 with a `redirectURL`, opens that URL in a window
    /// as CloudKit JS does, the person signs in there, and the window hands the page the session
    /// as `ckSession`, the key CloudKit JS reads; with it the page is the user. An app whose origin
    /// the operator did not allow receives nothing.
    ///
    /// The person's part (typing into the other origin's window) is done by the page, which the
    /// browser allows only with `--disable-web-security`; the message's origin check is the
    /// browser's own and holds regardless, as the second load shows.
    @Test(.enabled(if: Chromium.shouldRun, "no chromium: apt-get install -y chromium to run the sign-in flow in a browser"))
    func browser_signInWindowHandsItsOpenerTheSessionAsCloudKitJSReadsIt() async throws {
        let artifacts = try Chromium.artifactsDirectory("sign-in")
        let arguments = ["--disable-web-security", "--disable-popup-blocking", "--virtual-time-budget=20000"]
        try await AppPage.serving(Self.cloudKitJSPage) { origin in
            var allowed = try Self.users()
            allowed.allowedRedirects.append(origin)
            try await withSignIn(users: allowed) { server, _, _ in
                let url = "\(origin)/app?server=\(ConsoleFormat.percentEncoded(server.baseURL.absoluteString))&apiToken=\(Self.apiToken)"
                let page = try await Chromium.load(
                    url, screenshot: artifacts.appendingPathComponent("cloudkit-js-flow.png"), arguments: arguments)
                let steps = try #require(page.dom.firstMatch(of: #/<p id="steps">([^<]*)</p>/#).map { String($0.output.1) })
                #expect(
                    steps
                        == "caller 421 AUTHENTICATION_REQUIRED | message from \(server.baseURL.absoluteString) with ckSession | signed in as _carol",
                    "\(page.text)")
            }
            try await withSignIn { server, _, _ in
                let url = "\(origin)/app?server=\(ConsoleFormat.percentEncoded(server.baseURL.absoluteString))&apiToken=\(Self.apiToken)"
                let page = try await Chromium.load(
                    url, screenshot: artifacts.appendingPathComponent("cloudkit-js-flow-refused.png"), arguments: arguments)
                let steps = try #require(page.dom.firstMatch(of: #/<p id="steps">([^<]*)</p>/#).map { String($0.output.1) })
                #expect(steps == "caller 421 AUTHENTICATION_REQUIRED | form sent", "an origin not allowed hears nothing: \(page.text)")
            }
        }
    }

    /// A page of any origin may call the database API from a browser (CloudKit JS runs in the
    /// app's origin): preflights are answered, and every answer, a 421 included, is readable
    /// (`Access-Control-Allow-Origin: *`); the sign-in pages are not cross-origin.
    @Test func crossOrigin_pagesOfAnyOriginReadTheAPIsAnswers() async throws {
        try await withSignIn { _, _, client in
            let anonymous = client.asUser(nil)
            let caller = client.path(.public, .usersCaller)
            let origin = ("Origin", "https://notes.example.com")
            let preflight = try await anonymous.send(
                .OPTIONS, caller,
                headers: [origin, ("Access-Control-Request-Method", "POST"), ("Access-Control-Request-Headers", "authorization,x-apple-cloudkit-request-signaturev1")])
            #expect(preflight.status == 204)
            #expect(preflight.headers.first(name: "Access-Control-Allow-Origin") == "*")
            let allowed = preflight.headers.first(name: "Access-Control-Allow-Headers")?.lowercased() ?? ""
            for header in ["authorization", "content-type", "range", "x-apple-cloudkit-request-signaturev1", "x-cloudstore-device"] {
                #expect(allowed.contains(header), "\(header) in \(allowed)")
            }
            #expect(preflight.headers.first(name: "Access-Control-Allow-Methods")?.contains("POST") == true)

            let refused = try await anonymous.send(.GET, caller + "?ckAPIToken=\(Self.apiToken)", headers: [origin])
            #expect(refused.status == 421)
            #expect(refused.headers.first(name: "Access-Control-Allow-Origin") == "*", "the page reads the redirectURL")
            let answered = try await client.send(.GET, caller, headers: [origin])
            #expect(answered.status == 200)
            #expect(answered.headers.first(name: "Access-Control-Allow-Origin") == "*")
            #expect(answered.headers.first(name: "Access-Control-Allow-Credentials") == nil, "no cookie ever authenticates the API")

            let signIn = try await anonymous.send(.GET, "/signin/iCloud.test/development", headers: [origin])
            #expect(signIn.status == 200)
            #expect(signIn.headers.first(name: "Access-Control-Allow-Origin") == nil, "the sign-in pages are not cross-origin")
        }
    }

    /// A page that signs in as CloudKit JS 2.6 does (`setUpAuth`, `whenUserSignsIn`): the 421's
    /// `redirectURL` opened with `window.open(url, "", "width=640, height=525")`, the first message
    /// whose data is an object taken, its `ckSession` sent as `ckWebAuthToken` from then on.
    static let cloudKitJSPage = #"""
        <!doctype html><html><head><title>App</title></head><body><p id="steps"></p><script>
        var query = new URLSearchParams(location.search);
        var api = query.get("server") + "/database/1/iCloud.test/development/public/users/caller?ckAPIToken=" + query.get("apiToken");
        var steps = [];
        function step(text) { steps.push(text); document.getElementById("steps").textContent = steps.join(" | "); }
        var done = false;
        window.addEventListener("message", function (event) {
          if (done || !event.data || typeof event.data !== "object") return;
          done = true;
          var session = event.data.ckSession;
          steps.pop();
          step("message from " + event.origin + (session ? " with ckSession" : " without ckSession"));
          fetch(api + "&ckWebAuthToken=" + encodeURIComponent(session))
            .then(function (r) { return r.json(); })
            .then(function (caller) { step("signed in as " + caller.userRecordName); });
        }, false);
        fetch(api).then(function (r) { return r.json().then(function (body) { return [r.status, body]; }); }).then(function (answer) {
          step("caller " + answer[0] + " " + answer[1].serverErrorCode);
          var popup = window.open(answer[1].redirectURL, "", "width=640, height=525");
          var person = setInterval(function () {
            try {
              var form = popup.document.querySelector("form"), login = popup.document.getElementById("login");
              if (!form || !login) return;
              clearInterval(person);
              login.value = "carol";
              popup.document.getElementById("password").value = "carol's password";
              form.submit();
              step("form sent");
            } catch (e) {}
          }, 100);
        });
        </script></body></html>
        """#

    // MARK: - Support

    static let secret = "a secret of the tests, 32 characters or more"

    /// `_carol` (login `carol`), who has no bearer token, and `_alice` (login `alice`); hashed with
    /// 1,000 iterations so that the tests sign in quickly.
    static func users(carolPassword: String = "carol's password") throws -> SignInUsers {
        SignInUsers(
            secret: secret, allowedRedirects: [app, "http://localhost:3000"],
            users: [
                SignInUsers.User(
                    userRecordName: "_carol", login: "carol",
                    password: try SignInUsers.PasswordHash(password: carolPassword, iterations: 1_000)),
                SignInUsers.User(
                    userRecordName: "_alice", login: "alice",
                    password: try SignInUsers.PasswordHash(password: "alice's password", iterations: 1_000)),
            ])
    }

    /// Runs `body` with an in-process server of `backend` that has sign-in users and an API token
    /// for `iCloud.test`, a client of its pages, and Alice's client of its database API.
    func withSignIn(
        _ backend: Backend = .sqlite, users: SignInUsers? = nil, containers: Set<String> = TestServer.defaultContainers,
        clock: ManualClock? = nil, _ body: (CloudServer, PageClient, CloudClient) async throws -> Void
    ) async throws {
        let users = try users ?? Self.users()
        try await backend.withFreshServerStorage { storage in
            let server = try await CloudServer.start(
                configuration: ServerConfiguration(
                    port: 0, storage: storage, containers: containers, users: TestServer.defaultUsers,
                    apiTokens: containers.contains("iCloud.test") ? ["iCloud.test": ["website": Self.apiToken]] : [:],
                    signInUsers: users, clock: clock?.serverClock ?? .system,
                    logger: Logger(label: "cloudstore.test-server", factory: { _ in SwiftLogNoOpLogHandler() })))
            do {
                try await body(server, SignInForm.client(server.baseURL), CloudClient(baseURL: server.baseURL))
            } catch {
                try? await server.shutdown()
                throw error
            }
            try await server.shutdown()
        }
    }
}

/// A sign-in form as a browser holds it: the page's path, its cookie and its form token.
struct SignInForm {
    var pages: PageClient
    var path: String
    var cookie: String?
    var csrf: String
    var answer: Answer

    /// A client of the sign-in pages of the server at `baseURL`, which sends their cookie.
    static func client(_ baseURL: URL) -> PageClient {
        PageClient(baseURL: baseURL, cookieName: SignInController.cookieName)
    }

    /// GETs the page at `path` (which may carry `?redirect=`).
    static func open(_ pages: PageClient, _ path: String) async throws -> SignInForm {
        let answer = try await pages.get(path, token: nil)
        try #require(answer.status == 200, "\(path): \(answer.text)")
        let cookie = answer.headers.first(name: "Set-Cookie")?.firstMatch(of: #/cloudstore_signin=([^;]+)/#).map { String($0.output.1) }
        let csrf = try #require(answer.text.firstMatch(of: #/name="csrf" value="([^"]+)"/#).map { String($0.output.1) })
        return SignInForm(pages: pages, path: String(path.prefix { $0 != "?" }), cookie: cookie, csrf: csrf, answer: answer)
    }

    /// POSTs the form as the browser would, with its cookie.
    func post(login: String, password: String, redirect: String? = nil) async throws -> Answer {
        let fields = [("login", login), ("password", password), ("csrf", csrf), ("redirect", redirect ?? "")]
        let form = fields.map { "\($0.0)=\(ConsoleFormat.percentEncoded($0.1))" }.joined(separator: "&")
        return try await pages.post(path, form: form, cookie: cookie)
    }

    /// Signs in without a return URL and answers the token the page shows.
    static func token(_ pages: PageClient, login: String, container: String = "iCloud.test") async throws -> String {
        let form = try await open(pages, "/signin/\(container)/development")
        let answer = try await form.post(login: login, password: "\(login)'s password")
        try #require(answer.status == 200, "\(answer.text)")
        return try #require(answer.text.firstMatch(of: #/<code id="token">([^<]+)</code>/#).map { String($0.output.1) })
    }
}
