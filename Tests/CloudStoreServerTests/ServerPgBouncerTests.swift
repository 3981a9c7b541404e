import CloudStoreServer
import CloudStoreTesting
import CloudStoreWire
import Foundation
import Testing

/// `cloudstore serve` behind a real PgBouncer in transaction pooling mode (`pool_mode=transaction`
/// in the URL): instances that keep nothing in a connection between transactions, hearing each
/// other's commits by `LISTEN` past the pooler or by polling.
@Suite(
    "PostgreSQL: instances behind PgBouncer's transaction pooling", .serialized,
    .timeLimit(.minutes(ReliabilityRun.hangLimitMinutes)),
    .enabled(if: PgBouncer.shouldRun, "needs PostgreSQL (CLOUDSTORE_TEST_POSTGRES_URL) and Debian's pgbouncer; bash .ci/run has both"))
struct ServerPgBouncerTests {
    /// Runs `body` with a fresh schema's URL, a PgBouncer in front of its PostgreSQL, and the
    /// arguments every `cloudstore serve` of the test takes (the default users, the containers).
    func withBouncer(_ body: (_ url: String, PgBouncer, _ serve: [String]) async throws -> Void) async throws {
        try await Backend.withFreshSchema { url in
            let root = try TemporaryDirectory(prefix: "cloudstore-pgbouncer")
            defer { withExtendedLifetime(root) {} }
            let bouncer = try await PgBouncer.start(in: root, postgres: url)
            defer { bouncer.stop() }
            let tokens = root.file("tokens.json")
            try WireCoding.encode(TestServer.defaultUsers).write(to: tokens)
            try await body(url, bouncer, ["--tokens", tokens.path] + ServerProcess.containerArguments())
        }
    }

    /// Instance A reaches PostgreSQL through the pooler and listens past it (`direct_host`,
    /// `direct_port`); B only through the pooler, polling every 50 ms. Both log at level 3 ("long
    /// poll waiting" tells when a poll waits).
    @Test func twoInstancesThroughThePooler_writeReadAndWakeEachOthersLongPolls() async throws {
        try await withBouncer { url, bouncer, serve in
            let common = serve + ["--debug", "3"]
            let a = try await ServerProcess.launch(["--postgres", bouncer.pooledURL(url, direct: true)] + common)
            let b = try await ServerProcess.launch(
                ["--postgres", bouncer.pooledURL(url, direct: false), "--notifications", "poll", "--notifications-poll-interval", "0.05"]
                    + common)
            let throughA = CloudClient(baseURL: a.baseURL)
            var throughB = throughA
            throughB.baseURL = b.baseURL

            // Every statement, prepared ones included, works where each transaction may get
            // another server connection: a zone, a batch, a page of changes, a lookup.
            try await throughA.createZone("Notes")
            let saved = try await throughA.save([note("N-1", title: "written through A")])
            #expect(try await throughB.lookup(["N-1"]).first?.value == saved[0])
            #expect(try await throughB.allZoneChanges().records.map(\.recordName) == ["N-1"])

            // B polls: A's write wakes B's long poll within the interval.
            let startB = try await throughB.databaseChanges(token: nil)
            async let pollB = throughB.send(.GET, throughB.path(.private, .notifications) + "?timeout=50&since=\(startB.syncToken)")
            await b.waitForOutput("long poll waiting")
            try await throughA.save([note("N-2")])
            let answerB = try await pollB.decode(NotificationsResponse.self)
            #expect(answerB.changed, "B's long poll wakes when its poll sees A's commit")
            #expect(answerB.zones.map(\.zoneID.zoneName) == ["Notes"])

            // A listens past the pooler: B's write wakes A's long poll.
            let startA = try await throughA.databaseChanges(token: nil)
            async let pollA = throughA.send(.GET, throughA.path(.private, .notifications) + "?timeout=50&since=\(startA.syncToken)")
            await a.waitForOutput("long poll waiting")
            try await throughB.save([note("N-3")])
            let answerA = try await pollA.decode(NotificationsResponse.self)
            #expect(answerA.changed, "A's long poll wakes when B commits (LISTEN past the pooler)")

            // Writers on both instances and a reader following the feed: nothing skipped.
            let seen = try await writeWhileFollowing(through: [throughA, throughB], reader: throughB, writers: 8, batches: 5, size: 4)
            #expect(seen.count == 8 * 5 * 4 + 3, "the incremental reader saw every record")
            let all = try await throughA.allZoneChanges()
            #expect(all.records.count == 8 * 5 * 4 + 3)
            #expect(Set(all.records.map(\.recordName)).count == all.records.count)

            #expect(await a.terminate() == 0)
            #expect(await b.terminate() == 0)
            #expect(!bouncer.log.contains("prepared statement"), "no statement named on one server connection was used on another")
        }
    }

    /// Through the pooler only, an instance cannot take the upgrade's session lock: on a schema
    /// whose layout is not current it refuses to start and says what to add; LISTEN without a way
    /// past the pooler is refused too, and so is a URL that does not say the pooler is there.
    @Test func throughThePoolerOnly_whatNeedsASessionIsRefusedWithWhatToDo() async throws {
        try await withBouncer { url, bouncer, common in
            func refusal(_ arguments: [String]) async throws -> String {
                do {
                    let server = try await ServerProcess.launch(common + arguments)
                    await server.terminate()
                    Issue.record("cloudstore serve started with \(arguments)")
                    return ""
                } catch let error as ServerProcess.LaunchError {
                    return error.description
                }
            }

            let pooled = bouncer.pooledURL(url, direct: false)
            let upgrade = try await refusal(["--postgres", pooled, "--notifications", "poll"])
            #expect(upgrade.contains("needs an upgrade"), "\(upgrade)")
            #expect(upgrade.contains("add direct_host= and direct_port="), "\(upgrade)")

            let listen = try await refusal(["--postgres", pooled])
            #expect(listen.contains("LISTEN needs a connection"), "\(listen)")
            #expect(listen.contains("--notifications poll"), "\(listen)")

            // A URL that does not say pool_mode: each connection sets search_path, which this
            // PgBouncer refuses; the start says what to add.
            let unsaid = try await refusal(["--postgres", bouncer.pooledURL(url, direct: false, saying: false)])
            #expect(unsaid.contains("unsupported startup parameter: search_path"), "\(unsaid)")
            #expect(unsaid.contains("add pool_mode=transaction to the URL"), "\(unsaid)")
        }
    }
}
