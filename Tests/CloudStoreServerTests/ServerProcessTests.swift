import CloudStoreServer
import CloudStoreTesting
import CloudStoreWire
import Foundation
import Testing

/// `cloudstore serve` as a real process: startup, SIGTERM, kill -9 in the middle of a batch.
@Suite("cloudstore serve process", .serialized, .timeLimit(.minutes(ReliabilityRun.hangLimitMinutes)))
struct ServerProcessTests {
    /// A temporary directory (removed when the first value goes away) with a tokens file for the
    /// default users.
    static func makeDirectory() throws -> (root: TemporaryDirectory, data: URL, tokens: URL) {
        let root = try TemporaryDirectory(prefix: "cloudstore-process")
        let tokens = root.file("tokens.json")
        try WireCoding.encode(TestServer.defaultUsers).write(to: tokens)
        return (root, root.file("data"), tokens)
    }

    @Test func serve_printsWhereItListensServesAndStopsOnSIGTERM() async throws {
        let (root, data, tokens) = try Self.makeDirectory()
        defer { withExtendedLifetime(root) {} }
        let child = try await ServerProcess.launch(["--data", data.path, "--tokens", tokens.path] + ServerProcess.containerArguments())
        #expect(child.output.contains("listening on http://127.0.0.1:\(child.port) (storage: SQLite in \(data.path))"))
        let client = CloudClient(baseURL: child.baseURL)
        try await client.createZone("Notes")
        try await client.save([note("N-1")])
        #expect(FileManager.default.fileExists(atPath: data.appendingPathComponent("\(client.container).sqlite").path))
        #expect(await child.terminate() == 0, "\(child.output)")
    }

    @Test func serve_refusesABadTokensFileWithAClearMessage() async throws {
        let (root, data, tokens) = try Self.makeDirectory()
        defer { withExtendedLifetime(root) {} }
        try Data("[1, 2]".utf8).write(to: tokens)
        await #expect(throws: ServerProcess.LaunchError.self) {
            try await ServerProcess.launch(["--data", data.path, "--tokens", tokens.path] + ServerProcess.containerArguments())
        }
    }

    @Test func sigterm_finishesAnInFlightLongPoll() async throws {
        let (root, data, tokens) = try Self.makeDirectory()
        defer { withExtendedLifetime(root) {} }
        let child = try await ServerProcess.launch(["--data", data.path, "--tokens", tokens.path, "--debug", "3"] + ServerProcess.containerArguments())
        let client = CloudClient(baseURL: child.baseURL)
        let start = try await client.databaseChanges(token: nil)
        let clock = ContinuousClock()
        let started = clock.now
        async let poll = client.send(.GET, client.path(.private, .notifications) + "?timeout=50&since=\(start.syncToken)")
        await child.waitForOutput("long poll waiting")
        child.signal(SIGTERM)
        let answer = try await poll
        #expect(answer.status == 200, "the in-flight poll gets its answer: \(answer.text)")
        #expect(try answer.decode(NotificationsResponse.self).changed == false)
        #expect(clock.now - started < .seconds(30), "shutdown does not wait for the poll's timeout")
        #expect(await child.waitForExit() == 0)
    }

    @Test func kill9_duringALargeAtomicBatchLeavesAllOrNothing() async throws {
        let (root, data, tokens) = try Self.makeDirectory()
        defer { withExtendedLifetime(root) {} }
        let names = (0..<200).map { "R-\($0)" }
        let payload = String(repeating: "p", count: 16 * 1024)
        func batch(_ zone: String) throws -> Data {
            try WireCoding.encode(
                RecordsModifyRequest(
                    zoneID: ZoneID(zoneName: zone), operations: names.map { .init(.create, note($0, title: payload)) }))
        }

        // How long one batch takes here, so the crashes land before, during and after its commit.
        let calibration = try await ServerProcess.launch(["--data", data.path, "--tokens", tokens.path] + ServerProcess.containerArguments())
        let client = CloudClient(baseURL: calibration.baseURL, container: "iCloud.test")
        try await client.createZone("Calibration")
        let clock = ContinuousClock()
        let started = clock.now
        let answer = try await client.send(.POST, client.path(.private, .recordsModify), body: try batch("Calibration"))
        let duration = clock.now - started
        #expect(answer.status == 200)
        await calibration.terminate()

        var outcomes: [Int] = []
        for (round, fraction) in [0.1, 0.3, 0.5, 0.7, 0.8, 0.9, 1.0, 1.3].enumerated() {
            let child = try await ServerProcess.launch(["--data", data.path, "--tokens", tokens.path] + ServerProcess.containerArguments())
            let client = CloudClient(baseURL: child.baseURL, container: "iCloud.test")
            try await client.createZone("Round\(round)")
            let body = try batch("Round\(round)")
            let send = Task { try await client.send(.POST, client.path(.private, .recordsModify), body: body) }
            // The delay chooses the instant of the crash; it does not synchronise anything.
            try await Task.sleep(for: duration * fraction)
            await child.kill()
            send.cancel()
            _ = try? await send.value

            let restarted = try await ServerProcess.launch(["--data", data.path, "--tokens", tokens.path] + ServerProcess.containerArguments())
            let after = CloudClient(baseURL: restarted.baseURL, container: "iCloud.test")
            let found = try await after.lookup("Round\(round)", names).filter { $0.value != nil }.count
            #expect(found == 0 || found == names.count, "round \(round): \(found) of \(names.count) records survived")
            outcomes.append(found)
            #expect(await restarted.terminate() == 0)
        }
        print("kill -9 during a batch of \(duration): records found after restart per round: \(outcomes)")
    }
}
