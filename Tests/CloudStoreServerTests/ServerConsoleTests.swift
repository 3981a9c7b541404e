import AsyncHTTPClient
import CloudStoreTesting
import CloudStoreWire
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import Testing

@testable import CloudStoreServer

/// The web console (`serve --console`): every page answers the operator only, shows what is
/// stored, one user's zone never shows another's data, values are escaped, zones page by name;
/// and in a real headless browser against a `cloudstore serve` child, each page reads as it should
/// and leaves a screenshot.
@Suite("Server console", .timeLimit(.minutes(ReliabilityRun.hangLimitMinutes)))
struct ServerConsoleTests {
    static let aliceSecret = "Alice keeps the spare key under the blue pot"
    static let bobSecret = "Bob hides the cake in the oven"

    // MARK: - Over HTTP

    @Test(arguments: Backend.all)
    func pages_showTheOperatorWhatIsStored(_ backend: Backend) async throws {
        try await withConsole(backend) { console, client in
            try await Self.seed(client)
            _ = try await client.asUser("unknown-token").send(.GET, client.path(.private, .zonesList))
            let zoneToken = try await client.allZoneChanges().token
            let pages = Self.pages(owner: "_alice")

            let expected: [String: [String]] = [
                "overview": ["Overview", "requests since", "records written", "refused by rate limit", "iCloud.test"],
                "container": ["development", "private", "_alice", "_bob", "Schema of development"],
                "database": ["development private database of _alice", "Notes", "_defaultZone", zoneToken],
                "zone": ["Zone Notes", "n1", "Buy milk", "secret", Self.aliceSecret, "Change tag", "by _alice on device-A"],
                "record": ["Record secret", "STRING", Self.aliceSecret, "History of versions", "not kept by this server"],
                "schema": ["Schema of development", "Note", "title", "STRING"],
                "operations": ["Recent operations", "records/modify", "user _alice"],
                "errors": ["Recent errors", "401", "AUTHENTICATION_FAILED"],
            ]
            for (name, path) in pages {
                let answer = try await console.get(path)
                #expect(answer.status == 200, "\(name): \(answer.text)")
                #expect(answer.headers.first(name: "Content-Type") == "text/html; charset=utf-8")
                #expect(answer.headers.first(name: "Cache-Control") == "no-store")
                for text in expected[name] ?? [] {
                    #expect(answer.text.contains(text), "page \(name) lacks \(text)")
                }
            }
        }
    }

    @Test(arguments: Backend.all)
    func pages_answerTheSignInFormToAnyoneButTheOperator(_ backend: Backend) async throws {
        try await withConsole(backend) { console, client in
            try await Self.seed(client)
            for (name, path) in Self.pages(owner: "_alice") {
                for token in [nil, "alice-token", "bob-token", "not-a-token"] {
                    let answer = try await console.get(path, token: token)
                    #expect(answer.status == 401, "\(name) with \(token ?? "no token")")
                    #expect(answer.text.contains("Operator token"), "\(name) shows the sign-in form")
                    for secret in [Self.aliceSecret, Self.bobSecret, "Buy milk", "_defaultZone"] {
                        #expect(!answer.text.contains(secret), "\(name) with \(token ?? "no token") shows \(secret)")
                    }
                }
                let forged = try await console.get(path, token: nil, cookie: "JLPmnN02vmU1zoNIxGGdYDfMYfv0kZyev-6CRVNaj8I")
                #expect(forged.status == 401, "\(name) with a cookie not derived from the token")
            }
        }
    }

    @Test func signIn_setsACookieDerivedFromTheTokenThatOpensThePages() async throws {
        try await withConsole(.sqlite) { console, _ in
            let form = "token=\(ConsoleFormat.percentEncoded(TestServer.operatorToken))&next=%2Fconsole%2Foperations"
            let signedIn = try await console.post("/console/sign-in", form: form)
            #expect(signedIn.status == 303)
            #expect(signedIn.headers.first(name: "Location") == "/console/operations")
            let setCookie = try #require(signedIn.headers.first(name: "Set-Cookie"))
            #expect(setCookie.contains("HttpOnly") && setCookie.contains("SameSite=Strict") && setCookie.contains("Path=/console"))
            #expect(!setCookie.contains(TestServer.operatorToken), "the cookie never holds the token")
            let cookie = try #require(Self.cookieValue(setCookie))
            #expect(try await console.get("/console/operations", token: nil, cookie: cookie).status == 200)

            let link = try await console.get(
                "/console/sign-in?token=\(TestServer.operatorToken)&next=\(ConsoleFormat.percentEncoded("/console/errors"))",
                token: nil)
            #expect(link.status == 303)
            #expect(link.headers.first(name: "Location") == "/console/errors")
            #expect(link.headers.first(name: "Set-Cookie").flatMap(Self.cookieValue) == cookie)
            for elsewhere in ["https://example.com/", "//example.com/", "/console/../metrics", "/metrics"] {
                let answer = try await console.get(
                    "/console/sign-in?token=\(TestServer.operatorToken)&next=\(ConsoleFormat.percentEncoded(elsewhere))",
                    token: nil)
                #expect(answer.headers.first(name: "Location") == "/console", "next=\(elsewhere) stays in the console")
            }

            let refused = try await console.post("/console/sign-in", form: "token=alice-token&next=%2Fconsole")
            #expect(refused.status == 401)
            #expect(refused.headers.first(name: "Set-Cookie") == nil)
            #expect(refused.text.contains("That is not the operator token."))

            let signedOut = try await console.post("/console/sign-out", form: "", cookie: cookie)
            #expect(signedOut.status == 303)
            #expect(signedOut.headers.first(name: "Set-Cookie")?.contains("Max-Age=0") == true)
        }
    }

    @Test(arguments: Backend.all)
    func zonePages_showOnlyTheirOwnersData(_ backend: Backend) async throws {
        try await withConsole(backend) { console, client in
            try await Self.seed(client)
            for (owner, own, other) in [("_alice", Self.aliceSecret, Self.bobSecret), ("_bob", Self.bobSecret, Self.aliceSecret)] {
                let pages = Self.pages(owner: owner)
                for name in ["database", "zone", "record"] {
                    let answer = try await console.get(try #require(pages[name]))
                    #expect(answer.status == 200)
                    #expect(!answer.text.contains(other), "\(owner)'s \(name) page shows the other user's title")
                    if name != "database" { #expect(answer.text.contains(own), "\(owner)'s \(name) page shows \(owner)'s title") }
                }
            }
            let bobsNote = try await console.get(Self.path("record", owner: "_bob", ["zone": "Notes", "record": "n1"]))
            #expect(bobsNote.status == 404, "Alice's n1 is not in Bob's zone")
            #expect(!bobsNote.text.contains("Buy milk"))
        }
    }

    @Test(arguments: Backend.all)
    func values_areEscaped(_ backend: Backend) async throws {
        try await withConsole(backend) { console, client in
            try await client.createZone("Notes")
            try await client.save([note("x\"><b>bold</b>", title: "<script>alert(1)</script>")])
            for page in ["zone", "record"] {
                let answer = try await console.get(
                    Self.path(page, owner: "_alice", ["zone": "Notes", "record": "x\"><b>bold</b>"]))
                #expect(answer.status == 200)
                #expect(answer.text.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "\(page): \(answer.text)")
                #expect(!answer.text.contains("<script>"))
                #expect(!answer.text.contains("<b>bold"))
            }
        }
    }

    @Test(arguments: Backend.all)
    func zonePages_pageByRecordName(_ backend: Backend) async throws {
        try await withConsole(backend) { console, client in
            try await client.createZone("Notes")
            let names = (1...25).map { String(format: "note-%02d", $0) }
            try await client.save(names.shuffled().map { note($0, title: "Title of \($0)") })
            var path = Self.path("zone", owner: "_alice", ["zone": "Notes", "limit": "10"])
            var pages: [[String]] = []
            while true {
                let answer = try await console.get(path)
                try #require(answer.status == 200, "\(answer.text)")
                pages.append(answer.text.matches(of: #/>(note-\d\d)</a>/#).map { String($0.output.1) })
                guard let next = answer.text.firstMatch(of: #/<a href="([^"]+)">Next page</a>/#) else { break }
                path = String(next.output.1).replacingOccurrences(of: "&amp;", with: "&")
                try #require(pages.count < 5, "the zone pages never end")
            }
            #expect(pages == [Array(names[0..<10]), Array(names[10..<20]), Array(names[20..<25])])
        }
    }

    @Test func activity_inWords() {
        var totals = ServerActivity.Totals()
        (totals.requests, totals.clientErrors, totals.serverErrors) = (312, 3, 1)
        (totals.recordsWritten, totals.recordsServed, totals.longPollsWaiting) = (1_200, 5_400, 2)
        (totals.storageErrors, totals.throttled) = (0, 3)
        let started = Date(timeIntervalSince1970: 1_767_649_200)  // 2026-01-05 21:40 UTC
        #expect(
            ConsoleFormat.activity(totals, started: started, now: started.addingTimeInterval(3_600))
                == "312 requests since 21:40 UTC, 4 failed; 1,200 records written, 5,400 served; 2 long polls waiting; 0 storage errors; 3 refused by rate limit.")
        #expect(
            ConsoleFormat.activity(ServerActivity.Totals(), started: started, now: started.addingTimeInterval(86_400))
                == "0 requests since 2026-01-05 21:40 UTC, 0 failed; 0 records written, 0 served; 0 long polls waiting; 0 storage errors; 0 refused by rate limit.")
    }

    @Test func serve_refusesTheConsoleWithoutAnOperatorToken() async throws {
        let error = await #expect(throws: ServerProcess.LaunchError.self) {
            _ = try await ServerProcess.launch(users: TestServer.defaultUsers, arguments: ["--console"])
        }
        #expect(error?.description.contains("the console needs the operator token") == true, "\(String(describing: error))")
    }

    // MARK: - In a browser

    @Test(.enabled(if: Chromium.shouldRun, "no chromium: apt-get install -y chromium to run the console's browser tests"))
    func browser_showsEachPageAndKeepsAScreenshot() async throws {
        let directory = try TemporaryDirectory(prefix: "cloudstore-console")
        let tokenFile = directory.file("operator-token")
        try Data("\(TestServer.operatorToken)\n".utf8).write(to: tokenFile)
        let server = try await ServerProcess.launch(
            users: TestServer.defaultUsers, arguments: ["--console", "--operator-token-file", tokenFile.path])
        do {
            let client = CloudClient(baseURL: server.baseURL)
            try await Self.seed(client)
            _ = try await client.asUser("unknown-token").send(.GET, client.path(.private, .zonesList))
            let artifacts = try Chromium.artifactsDirectory("console")
            let pages = Self.pages(owner: "_alice")
            let seen: [String: (shows: [String], hides: [String])] = [
                "overview": (["CloudStore console", "Overview", "requests since", "iCloud.test", "Containers served"], []),
                "container": (["iCloud.test", "development", "private", "_alice", "_bob", "Zones"], []),
                "database": (["development private database of _alice", "Notes", "Sync token"], [Self.bobSecret]),
                "zone": (["Zone Notes", "n1", "Buy milk", "secret", Self.aliceSecret, "Next page"], [Self.bobSecret]),
                "record": (["Record secret", Self.aliceSecret, "History of versions", "not kept by this server"], [Self.bobSecret]),
                "schema": (["Schema of development", "Note", "title", "STRING"], []),
                "operations": (["Recent operations", "records/modify", "user _alice"], []),
                "errors": (["Recent errors", "AUTHENTICATION_FAILED", "the bearer token is not known to this server"], []),
            ]
            for (name, path) in pages {
                let link = "\(server.baseURL.absoluteString)/console/sign-in?token=\(TestServer.operatorToken)&next=\(ConsoleFormat.percentEncoded(path))"
                let page = try await Chromium.load(link, screenshot: artifacts.appendingPathComponent("\(name).png"))
                for text in seen[name]?.shows ?? [] { #expect(page.text.contains(text), "\(name) shows \(text): \(page.text)") }
                for text in seen[name]?.hides ?? [] { #expect(!page.text.contains(text), "\(name) hides \(text)") }
                #expect(!page.text.contains("Operator token"), "\(name) is signed in")
            }
            let signIn = try await Chromium.load(
                server.baseURL.absoluteString + (pages["zone"] ?? ""), screenshot: artifacts.appendingPathComponent("sign-in.png"))
            #expect(signIn.text.contains("Sign in") && signIn.text.contains("Operator token"))
            #expect(!signIn.text.contains(Self.aliceSecret) && !signIn.text.contains("Buy milk"))

            for name in Array(pages.keys) + ["sign-in"] {
                let png = try Data(contentsOf: artifacts.appendingPathComponent("\(name).png"))
                #expect(png.count > 1_000 && png.starts(with: [0x89, 0x50, 0x4E, 0x47]), "\(name).png is a screenshot")
            }
        } catch {
            await server.terminate()
            throw error
        }
        await server.terminate()
    }

    // MARK: - Support

    /// Alice's and Bob's `Notes` zones, each with a record `secret` whose title only its owner
    /// should see, and Alice's `n1` and 60 notes more (`z-01`…, after the others by name), so
    /// that her zone has a second page.
    static func seed(_ client: CloudClient) async throws {
        let bob = client.asUser("bob-token", device: "device-B")
        try await client.createZone("Notes")
        try await bob.createZone("Notes")
        try await client.save([note("secret", title: aliceSecret), note("n1", title: "Buy milk", extra: ["count": 3])])
        try await client.save((1...60).map { note(String(format: "z-%02d", $0), title: "Filler \($0)") })
        try await bob.save([note("secret", title: bobSecret)])
    }

    /// The console's pages, by name, with a user's `Notes` zone and its `secret` record.
    static func pages(owner: String) -> [String: String] {
        [
            "overview": "/console",
            "container": path("container", owner: nil),
            "database": path("database", owner: owner),
            "zone": path("zone", owner: owner, ["zone": "Notes"]),
            "record": path("record", owner: owner, ["zone": "Notes", "record": "secret"]),
            "schema": path("schema", owner: nil),
            "operations": "/console/operations",
            "errors": "/console/errors",
        ]
    }

    /// `/console/<page>?container=iCloud.test&environment=development[&scope=private&owner=…]&…`.
    static func path(_ page: String, owner: String?, _ more: [String: String] = [:]) -> String {
        var parameters = [("container", "iCloud.test"), ("environment", "development")]
        if let owner { parameters += [("scope", "private"), ("owner", owner)] }
        parameters += more.sorted { $0.key < $1.key }
        let query = parameters.map { "\($0.0)=\(ConsoleFormat.percentEncoded($0.1))" }.joined(separator: "&")
        return "/console/\(page)?\(query)"
    }

    static func cookieValue(_ setCookie: String) -> String? {
        setCookie.firstMatch(of: #/cloudstore_console=([^;]+)/#).map { String($0.output.1) }
    }
}

/// Runs `body` with an in-process server of `backend` that serves the console, a client of the
/// console (acting as the operator unless told otherwise) and Alice's client of the database API.
func withConsole(_ backend: Backend, _ body: (PageClient, CloudClient) async throws -> Void) async throws {
    try await backend.withFreshServerStorage { storage in
        let server = try await CloudServer.start(
            configuration: ServerConfiguration(
                port: 0, storage: storage, containers: TestServer.defaultContainers, users: TestServer.defaultUsers,
                operatorToken: TestServer.operatorToken, console: true,
                logger: Logger(label: "cloudstore.test-server", factory: { _ in SwiftLogNoOpLogHandler() })))
        do {
            try await body(PageClient(baseURL: server.baseURL), CloudClient(baseURL: server.baseURL))
        } catch {
            try? await server.shutdown()
            throw error
        }
        try await server.shutdown()
    }
}
