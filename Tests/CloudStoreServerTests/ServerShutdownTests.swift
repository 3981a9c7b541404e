import CloudStoreServer
import CloudStoreTesting
import CloudStoreWire
import Foundation
import Testing

// A hang guard, not a speed check: under a loaded CI run, starting a PostgreSQL-backed server
// alone has taken most of a minute.
@Suite("graceful shutdown in process", .timeLimit(.minutes(ReliabilityRun.hangLimitMinutes)))
struct ServerShutdownTests {
    @Test(arguments: Backend.all)
    func shutdown_answersAWaitingLongPollAndStops(_ backend: Backend) async throws {
        try await backend.withFreshStorage { storage in
            let recorder = LogRecorder()
            let server = try await TestServer.start(storage: storage, logger: recorder.logger())
            let client = CloudClient(baseURL: server.baseURL)
            let start = try await client.databaseChanges(token: nil)
            let poll = Task {
                defer { recorder.logger().notice("test: the poll returned") }
                return try await client.send(
                    .GET, client.path(.private, .notifications) + "?timeout=50&since=\(start.syncToken)")
            }
            // The poll must be waiting before the shutdown; if it answered at once, say so rather than wait forever.
            let waiting = await recorder.waitFor(anyOf: ["long poll waiting", "test: the poll returned"]) == "long poll waiting"
            guard waiting else {
                Issue.record("the long poll answered before the shutdown: \(String(describing: try? await poll.value.text))")
                try await server.shutdown()
                return
            }
            let clock = ContinuousClock()
            let started = clock.now
            try await server.shutdown()
            let answer = try await poll.value
            #expect(answer.status == 200)
            #expect(try answer.decode(NotificationsResponse.self).changed == false)
            // Answered by the shutdown, not by the poll's own 50 s timeout (a loaded machine may take a while to stop).
            #expect(clock.now - started < .seconds(40))
            #expect(throws: RawConnection.Failure.self, "the server no longer accepts connections") {
                try RawConnection(port: server.port)
            }
        }
    }

    @Test func restart_onTheSameDirectoryKeepsTheData() async throws {
        let temporary = try TemporaryDirectory(prefix: "cloudstore-restart")
        defer { withExtendedLifetime(temporary) {} }
        let directory = temporary.url
        let first = try await TestServer.start(storage: .sqlite(directory: directory))
        var client = CloudClient(baseURL: first.baseURL)
        try await client.createZone("Notes")
        let saved = try await client.save([note("N-1")])
        let changes = try await client.allZoneChanges()
        try await first.shutdown()

        let second = try await TestServer.start(storage: .sqlite(directory: directory))
        client.baseURL = second.baseURL
        #expect(try await client.lookup(["N-1"]).first?.value == saved[0])
        let again = try await client.allZoneChanges(token: changes.token)
        #expect(again.records.isEmpty && again.token == changes.token, "tokens survive a restart")
        try await second.shutdown()
    }
}
