import CloudStoreServer
import CloudStoreTesting
import CloudStoreWire
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What one caller controls stays bounded, through a real `cloudstore serve` child process started
/// under resource limits: container names, idle connections, slow or oversized requests, a full
/// disk. Each test answers a question an attacker, or an unlucky deployment, would ask first.
@Suite("cloudstore serve under resource limits", .serialized, .timeLimit(.minutes(ReliabilityRun.hangLimitMinutes)))
struct ServerResourceTests {
    /// A directory with a tokens file for the default users; the data goes in its `data` folder.
    static func serveArguments(in directory: TemporaryDirectory, _ extra: [String] = []) throws -> [String] {
        let tokens = directory.file("tokens.json")
        try WireCoding.encode(TestServer.defaultUsers).write(to: tokens)
        return ["--data", directory.file("data").path, "--tokens", tokens.path] + ServerProcess.containerArguments() + extra
    }

    /// The issue's own attack, with 256 descriptors: one user names 300 containers, one client
    /// holds 300 idle connections; another user is still answered within a second, the server's
    /// descriptors stay under the limit, and no file was created for a container it does not serve.
    @Test func lowDescriptorLimit_manyContainersAndIdleConnectionsLeaveOthersServed() async throws {
        let directory = try TemporaryDirectory(prefix: "cloudstore-limits")
        let child = try await ServerProcess.launch(try Self.serveArguments(in: directory), shellSetup: "ulimit -n 256")
        let alice = CloudClient(baseURL: child.baseURL)
        try await alice.createZone("Notes")

        var bob = alice.asUser("bob-token")
        var notServed = 0
        for index in 0..<300 {
            bob.container = "iCloud.evil.\(index)"
            if try await bob.send(.GET, bob.path(.private, .zonesList)).status == 404 { notServed += 1 }
        }
        #expect(notServed == 300, "every container the server does not declare is 404")

        let held = try (0..<300).map { _ in try RawConnection(port: child.port) }
        // On a connection of its own: the server closes the connections idle longest to take it,
        // and the shared HTTP client's pooled connection may be one of them (a request sent on it
        // as it closes is reset, which a client retries; a raw connection never races that way).
        let clock = ContinuousClock()
        let started = clock.now
        let request = try RawConnection(port: child.port)
        try request.send(
            "GET \(alice.path(.private, .zonesList)) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer alice-token\r\n"
                + "Connection: close\r\n\r\n")
        let (answer, closed) = request.readUntilClosed(timeout: .seconds(10))
        let elapsed = clock.now - started
        #expect(answer.hasPrefix("HTTP/1.1 200") && closed, "\(answer.prefix(500))")
        #expect(elapsed < .seconds(1), "answered in \(elapsed) with 300 idle connections held")
        let descriptors = openDescriptors(of: child.processID)
        #expect(descriptors > 0 && descriptors < 256, "the server holds \(descriptors) descriptors")
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.file("data").path)
        #expect(files.allSatisfy { $0.hasPrefix("iCloud.test.sqlite") }, "\(files)")
        withExtendedLifetime(held) {}
        #expect(await child.terminate() == 0, "\(child.output)")
    }

    /// Idle connections and request heads that never finish are closed after the idle timeout; a
    /// long poll is not idle and gets its answer.
    @Test func idleTimeout_closesIdleAndHalfSentRequestsButNotALongPoll() async throws {
        let directory = try TemporaryDirectory(prefix: "cloudstore-idle")
        let child = try await ServerProcess.launch(try Self.serveArguments(in: directory, ["--idle-timeout", "1"]))
        let idle = try RawConnection(port: child.port)
        let halfSent = try RawConnection(port: child.port)
        try halfSent.send("GET /database/1/iCloud.test/development/private/zones/list HTTP/1.1\r\nHost: 127.0.0.1\r\n")

        let alice = CloudClient(baseURL: child.baseURL)
        let start = try await alice.databaseChanges(token: nil)
        let poll = try await alice.send(
            .GET, alice.path(.private, .notifications) + "?timeout=3&since=\(start.syncToken)")
        #expect(poll.status == 200, "a long poll longer than the idle timeout is answered: \(poll.text)")
        #expect(try poll.decode(NotificationsResponse.self).changed == false)

        #expect(idle.readUntilClosed(timeout: .seconds(20)).closed, "an idle connection is closed")
        #expect(halfSent.readUntilClosed(timeout: .seconds(20)).closed, "a head that never ends is closed")
        #expect(await child.terminate() == 0, "\(child.output)")
    }

    /// A client that writes its whole oversized body before reading (Python's `urllib` does) still
    /// gets the 413, and a following request on a new connection is served.
    @Test func oversizedBody_sentWholeBeforeReading_gets413() async throws {
        let directory = try TemporaryDirectory(prefix: "cloudstore-413")
        let child = try await ServerProcess.launch(try Self.serveArguments(in: directory))
        let body = [UInt8](repeating: UInt8(ascii: "x"), count: 20 << 20)
        let connection = try RawConnection(port: child.port)
        try connection.send(
            "POST /database/1/iCloud.test/development/private/records/modify HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                + "Authorization: Bearer alice-token\r\nContent-Type: application/json\r\n"
                + "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n")
        try connection.send(body)
        let (text, closed) = connection.readUntilClosed(timeout: .seconds(30))
        #expect(text.hasPrefix("HTTP/1.1 413"), "\(text.prefix(300))")
        #expect(text.contains("LIMIT_EXCEEDED"))
        #expect(closed, "the connection ends after the answer")
        #expect(try await CloudClient(baseURL: child.baseURL).send(.GET, "/database/1/iCloud.test/development/private/zones/list").status == 200)
        #expect(await child.terminate() == 0, "\(child.output)")
    }

    /// A full disk (here: a file-size limit on the server process) answers a retryable 503
    /// `TRY_AGAIN_LATER` with `retryAfter`, loses nothing stored before, and the server writes
    /// again once space returns, without a restart.
    @Test func fullDisk_answers503WithRetryAfterAndRecoversWhenSpaceReturns() async throws {
        let directory = try TemporaryDirectory(prefix: "cloudstore-full")
        let child = try await ServerProcess.launch(
            try Self.serveArguments(in: directory), shellSetup: "trap '' XFSZ; ulimit -S -f 4096")
        let alice = CloudClient(baseURL: child.baseURL)
        try await alice.createZone("Notes")
        let payload = String(repeating: "p", count: 200_000)
        var saved: [String] = []
        var refusal: Answer?
        for index in 0..<200 where refusal == nil {
            let name = "N-\(index)"
            let answer = try await alice.send(
                .POST, alice.path(.private, .recordsModify),
                body: try WireCoding.encode(
                    RecordsModifyRequest(zoneID: ZoneID(zoneName: "Notes"), operations: [.init(.create, note(name, title: payload))])))
            if answer.status == 200 { saved.append(name) } else { refusal = answer }
        }
        let full = try #require(refusal, "4 MiB of file size must run out within 200 records of 200 kB")
        #expect(full.status == 503, "\(full.text)")
        #expect(full.error?.serverErrorCode == .tryAgainLater)
        #expect(full.error?.retryAfter == 30)
        #expect(full.headers.first(name: "Retry-After") == "30")
        #expect(!saved.isEmpty)
        let stored = try await alice.lookup(saved)
        #expect(stored.allSatisfy { $0.value != nil }, "nothing stored before is lost")

        #expect(Self.liftFileSizeLimit(of: child.processID), "prlimit failed: errno \(errno)")
        let again = try await alice.save([note("after", title: payload)])
        #expect(again.count == 1, "the server writes again once space returns")
        #expect(try await alice.lookup(saved + ["after"]).allSatisfy { $0.value != nil })
        #expect(await child.terminate() == 0, "\(child.output)")
    }

    /// Lifts a process's soft limit on file size (glibc's `prlimit`, which Swift's Glibc module
    /// does not declare, looked up at run time).
    static func liftFileSizeLimit(of processID: Int32) -> Bool {
        typealias Prlimit = @convention(c) (pid_t, Int32, UnsafePointer<rlimit>?, UnsafeMutablePointer<rlimit>?) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "prlimit") else { return false }
        var unlimited = rlimit(rlim_cur: rlim_t.max, rlim_max: rlim_t.max)
        return unsafeBitCast(symbol, to: Prlimit.self)(processID, Int32(RLIMIT_FSIZE.rawValue), &unlimited, nil) == 0
    }
}
