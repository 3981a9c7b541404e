import CloudStoreServer
import CloudStoreTesting
import CloudStoreWire
import Foundation
import Testing

/// What an operator's tools call: health, readiness and Prometheus metrics.
@Suite("health, readiness and metrics")
struct ServerOperatingTests {
    @Test(arguments: Backend.all)
    func healthAndReadiness_needNoTokenAndAnswerWhileStorageAnswers(_ backend: Backend) async throws {
        try await withServer(backend) { _, alice in
            let anonymous = alice.asUser(nil)
            let health = try await anonymous.send(.GET, "/healthz")
            #expect(health.status == 200 && health.json["status"] as? String == "ok", "\(health.text)")
            let ready = try await anonymous.send(.GET, "/readyz")
            #expect(ready.status == 200 && ready.json["status"] as? String == "ready", "\(ready.text)")
        }
    }

    @Test func readiness_isA503WhenTheDataDirectoryIsGone() async throws {
        try await withServer(.sqlite) { server, alice in
            let directory = try #require(server.dataDirectory)
            try FileManager.default.removeItem(at: directory)
            let ready = try await alice.asUser(nil).send(.GET, "/readyz")
            #expect(ready.status == 503, "\(ready.text)")
            #expect(ready.error?.serverErrorCode == .tryAgainLater)
            #expect(ready.error?.reason?.contains(directory.path) == true)
            #expect(try await alice.asUser(nil).send(.GET, "/healthz").status == 200, "the process is still up")
        }
    }

    @Test(arguments: Backend.all)
    func metrics_needTheOperatorTokenAndCountWhatHappened(_ backend: Backend) async throws {
        try await withServer(backend) { _, alice in
            try await alice.createZone("Notes")
            try await alice.save([note("N-1"), note("N-2")])
            _ = try await alice.lookup(["N-1", "N-2", "missing"])
            _ = try await alice.asUser("wrong-token").send(.GET, alice.path(.private, .zonesList))

            #expect(try await alice.send(.GET, "/metrics").status == 401, "a user's token is not the operator's")
            #expect(try await alice.asUser(nil).send(.GET, "/metrics").status == 401)
            let scrape = try await alice.asUser(TestServer.operatorToken).send(.GET, "/metrics")
            #expect(scrape.status == 200)
            #expect(scrape.headers.first(name: "Content-Type")?.hasPrefix("text/plain") == true)
            let lines = scrape.text.split(separator: "\n").map(String.init)
            #expect(lines.contains("cloudstore_records_written_total 2"), "\(scrape.text)")
            #expect(lines.contains("cloudstore_records_served_total 2"))
            #expect(lines.contains { $0.hasPrefix("cloudstore_requests_total{") && $0.contains("records/modify") && $0.contains(#"status="200""#) })
            #expect(lines.contains { $0.hasPrefix("cloudstore_requests_total{") && $0.contains(#"status="401""#) })
            #expect(lines.contains { $0.hasPrefix("cloudstore_request_duration_seconds_bucket{") && $0.contains("records/lookup") })
            #expect(lines.contains("cloudstore_long_polls_waiting 0.0"))
            #expect(!scrape.text.contains("alice-token") && !scrape.text.contains("wrong-token"))
        }
    }
}

/// `cloudstore serve` run as an operator runs it: a child process configured by a config file and
/// its environment only, scraped, its tokens, API tokens and sign-in users reloaded with SIGHUP,
/// stopped with SIGTERM.
@Suite("cloudstore serve operated as a process", .timeLimit(.minutes(ReliabilityRun.hangLimitMinutes)))
struct ServerOperatedProcessTests {
    @Test func configFileAndEnvironmentOnly_metricsSIGHUPReloadAndSIGTERM() async throws {
        let directory = try TemporaryDirectory(prefix: "cloudstore-operated")
        let tokens = directory.file("tokens.json")
        try WireCoding.encode(["alice-token": "_alice"]).write(to: tokens)
        let apiTokens = directory.file("api-tokens.json")
        try WireCoding.encode(["iCloud.test": ["website": "api-secret-1"]]).write(to: apiTokens)
        let signInUsers = directory.file("sign-in-users.json")
        let signInFile = try ServerSignInTests.users()
        try JSONEncoder().encode(signInFile).write(to: signInUsers)
        let config = directory.file("serve.json")
        let settings: [String: Any] = [
            "host": "127.0.0.1", "port": 0, "data": directory.file("data").path, "tokens": tokens.path,
            "apiTokens": apiTokens.path, "signInUsers": signInUsers.path, "containers": ["iCloud.test"],
        ]
        try JSONSerialization.data(withJSONObject: settings).write(to: config)
        let child = try await ServerProcess.launch(
            ["--config", config.path],
            environment: ["CLOUDSTORE_OPERATOR_TOKEN": "the-operator", "CLOUDSTORE_DEBUG": "3"], port: nil)

        let alice = CloudClient(baseURL: child.baseURL)
        try await alice.createZone("Notes")
        try await alice.save([note("N-1"), note("N-2")])
        let synced = try await alice.allZoneChanges("Notes")
        #expect(synced.records.count == 2)
        let scrape = try await alice.asUser("the-operator").send(.GET, "/metrics")
        #expect(scrape.status == 200)
        #expect(scrape.text.contains("cloudstore_records_written_total 2"), "\(scrape.text.prefix(2000))")
        #expect(scrape.text.contains("cloudstore_records_served_total 2"))

        let start = try await alice.databaseChanges(token: nil)
        async let poll = alice.send(.GET, alice.path(.private, .notifications) + "?timeout=50&since=\(start.syncToken)")
        await child.waitForOutput("long poll waiting")

        let publicQuery = alice.path(.public, .recordsQuery)
        let queryBody = Data(#"{"query":{"recordType":"Note"}}"#.utf8)
        let anonymous = alice.asUser(nil)
        #expect(try await anonymous.send(.POST, publicQuery + "?ckAPIToken=api-secret-1", body: queryBody).status == 200)
        let carolsToken = try await SignInForm.token(SignInForm.client(child.baseURL), login: "carol")
        let asCarol = alice.path(.private, .zonesList) + "?ckWebAuthToken=\(carolsToken)"
        #expect(try await anonymous.send(.GET, asCarol).status == 200)

        try WireCoding.encode(["new-alice-token": "_alice"]).write(to: tokens)
        try WireCoding.encode(["iCloud.test": ["website-2": "api-secret-2"]]).write(to: apiTokens)
        var withoutCarol = signInFile
        withoutCarol.users.removeAll { $0.login == "carol" }
        try JSONEncoder().encode(withoutCarol).write(to: signInUsers)
        child.signal(SIGHUP)
        await child.waitForOutput("sign-in users reloaded")
        #expect(try await anonymous.send(.GET, asCarol).status == 401, "a user removed from the sign-in users file")
        #expect(try await alice.send(.GET, alice.path(.private, .zonesList)).status == 401, "the old token is refused")
        #expect(
            try await anonymous.send(.POST, publicQuery + "?ckAPIToken=api-secret-1", body: queryBody).status == 401,
            "a revoked API token is refused")
        #expect(try await anonymous.send(.POST, publicQuery + "?ckAPIToken=api-secret-2", body: queryBody).status == 200)
        let renewed = alice.asUser("new-alice-token")
        try await renewed.save([note("N-3")])
        let answer = try await poll
        #expect(answer.status == 200, "the long poll in flight is undisturbed: \(answer.text)")
        #expect(try answer.decode(NotificationsResponse.self).changed, "and it sees the write made with the new token")

        child.signal(SIGTERM)
        #expect(await child.waitForExit() == 0, "\(child.output)")
        #expect(child.output.contains("shutting down gracefully"))
        #expect(!child.output.contains("the-operator"), "the operator token is never logged")
        #expect(!child.output.contains("api-secret"), "nor are API tokens")
        #expect(!child.output.contains(ServerSignInTests.secret) && !child.output.contains(carolsToken), "nor the sign-in secret and tokens")
    }
}
