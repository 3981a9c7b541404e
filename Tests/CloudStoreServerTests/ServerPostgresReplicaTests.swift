import CloudStoreServer
import CloudStoreTesting
import CloudStoreWire
import Foundation
import Testing

/// Reads from a real streaming replica (`--postgres-replica`): served there only when it has
/// caught up with the primary, by the primary when it is behind or down, with no token going back
/// and no change missed.
@Suite(
    "PostgreSQL: reads from a streaming replica", .serialized, .timeLimit(.minutes(ReliabilityRun.hangLimitMinutes)),
    .enabled(
        if: Backend.postgresURL != nil && (StandbyPostgres.binaries != nil || Chromium.isCI),
        "needs PostgreSQL (CLOUDSTORE_TEST_POSTGRES_URL) and its programs; bash .ci/run has both"))
struct ServerPostgresReplicaTests {
    /// `cloudstore_replica_reads_total` of one outcome, from `GET /metrics` (as the operator: a
    /// server with an operator token answers the metrics to it only).
    func replicaReads(_ client: CloudClient, _ outcome: String) async throws -> Int {
        let scrape = try await client.asUser(TestServer.operatorToken).send(.GET, "/metrics")
        try #require(scrape.status == 200, "GET /metrics answered \(scrape.status)")
        let text = scrape.text
        return text.split(separator: "\n").filter { $0.hasPrefix("cloudstore_replica_reads_total{") && $0.contains("outcome=\"\(outcome)\"") }
            .compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }.reduce(0) { $0 + Int($1) }
    }

    /// `GET /readyz`'s status, its replicas' `available`, and how many reads each has failed.
    ///
    /// Whether a replica that failed is still `available: false` depends on the time since (it
    /// rests a second, then is tried again), so the tests of failures read `failed`, which only
    /// grows.
    func readiness(_ client: CloudClient) async throws -> (status: Int, available: [Bool], failed: [Int], names: [String]) {
        let answer = try await client.send(.GET, "/readyz")
        let object = try JSONSerialization.jsonObject(with: Data(answer.text.utf8)) as? [String: Any]
        let replicas = object?["replicas"] as? [[String: Any]] ?? []
        return (
            answer.status, replicas.compactMap { $0["available"] as? Bool }, replicas.compactMap { $0["failed"] as? Int },
            replicas.compactMap { $0["replica"] as? String }
        )
    }

    @Test func reads_goToTheReplicaWhenItHasCaughtUp_andToThePrimaryWhenItIsBehindOrDown() async throws {
        try await Backend.withFreshSchema { url in
            let root = try TemporaryDirectory(prefix: "cloudstore-replica")
            defer { withExtendedLifetime(root) {} }
            let tokens = root.file("tokens.json")
            try WireCoding.encode(TestServer.defaultUsers).write(to: tokens)
            // The server first, so that the standby copies a prepared layout.
            let bootstrap = try await ServerProcess.launch(["--postgres", url, "--tokens", tokens.path] + ServerProcess.containerArguments())
            #expect(await bootstrap.terminate() == 0)
            let standby = try await StandbyPostgres.start(from: url, in: root)
            defer { standby.stop() }
            let server = try await ServerProcess.launch(
                ["--postgres", url, "--postgres-replica", standby.url(like: url), "--tokens", tokens.path]
                    + ServerProcess.containerArguments())
            let client = CloudClient(baseURL: server.baseURL)

            try await client.createZone("Notes")
            try await client.save((1...10).map { note("N-\($0)") })
            try await standby.waitUntilCaughtUp(with: url)

            // Caught up: pages of changes and lookups are the replica's.
            let first = try await client.allZoneChanges()
            #expect(first.records.count == 10)
            #expect(try await client.lookup(["N-1"]).first?.value?.recordName == "N-1")
            #expect(try await replicaReads(client, "served") >= 2)
            let ready = try await readiness(client)
            #expect(ready.status == 200 && ready.available == [true])

            // Behind: what the primary has and the replica does not is answered by the primary;
            // the token moves on from where it was, and nothing is missed.
            try await standby.pauseReplay(url)
            try await client.save((11...15).map { note("N-\($0)") })
            let behindBefore = try await replicaReads(client, "behind")
            let next = try await client.allZoneChanges(token: first.token)
            #expect(next.records.map(\.recordName).sorted() == (11...15).map { "N-\($0)" }.sorted())
            #expect(try await client.lookup(["N-15"]).first?.value?.recordName == "N-15", "the client reads its own write")
            #expect(try await replicaReads(client, "behind") >= behindBefore + 2)
            let unchanged = try await client.allZoneChanges(token: next.token)
            #expect(unchanged.records.isEmpty, "the token never goes back to a replica's older state")

            // Caught up again: the replica serves again.
            try await standby.resumeReplay(url)
            try await standby.waitUntilCaughtUp(with: url)
            let servedBefore = try await replicaReads(client, "served")
            #expect(try await client.allZoneChanges(token: first.token).records.count == 5)
            #expect(try await replicaReads(client, "served") > servedBefore)

            // Down: reads still answer (the primary), the replica rests, and the server is ready.
            standby.stop()
            #expect(try await client.allZoneChanges().records.count == 15)
            #expect(try await client.lookup(["N-3"]).first?.value?.recordName == "N-3")
            #expect(try await replicaReads(client, "failed") >= 1)
            let afterFailure = try await readiness(client)
            #expect(afterFailure.status == 200 && afterFailure.failed.count == 1 && afterFailure.failed[0] >= 1)

            #expect(await server.terminate() == 0)
        }
    }

    /// A replica URL that reaches a primary (here the primary itself) answers no read: its data
    /// need not be the primary's. The primary answers every read, the replica's reads count as
    /// failed and it rests; the console's overview lists the replica with its reads.
    @Test func aReplicaURLThatIsNoStandby_answersNoRead() async throws {
        try await Backend.withFreshSchema { url in
            let root = try TemporaryDirectory(prefix: "cloudstore-replica")
            defer { withExtendedLifetime(root) {} }
            let tokens = root.file("tokens.json")
            try WireCoding.encode(TestServer.defaultUsers).write(to: tokens)
            let operatorToken = root.file("operator-token")
            try Data("\(TestServer.operatorToken)\n".utf8).write(to: operatorToken)
            let server = try await ServerProcess.launch(
                ["--postgres", url, "--postgres-replica", url, "--tokens", tokens.path, "--console", "--operator-token-file", operatorToken.path]
                    + ServerProcess.containerArguments())
            let client = CloudClient(baseURL: server.baseURL)
            try await client.createZone("Notes")
            try await client.save([note("N-1")])
            #expect(try await client.allZoneChanges().records.count == 1)
            #expect(try await client.lookup(["N-1"]).first?.value?.recordName == "N-1")
            #expect(try await replicaReads(client, "served") == 0)
            #expect(try await replicaReads(client, "failed") >= 1)
            let afterFailure = try await readiness(client)
            #expect(afterFailure.status == 200 && afterFailure.failed.count == 1 && afterFailure.failed[0] >= 1)
            let overview = try await PageClient(baseURL: server.baseURL).get("/console")
            #expect(overview.status == 200)
            #expect(overview.text.contains("Read replicas") && overview.text.contains("Failed"))
            #expect(afterFailure.names.count == 1 && afterFailure.names.allSatisfy { overview.text.contains($0) }, "\(afterFailure.names)")
            #expect(!overview.text.contains(url), "the replica's URL, with what it may hold, is not shown whole")
            #expect(await server.terminate() == 0)
        }
    }
}
