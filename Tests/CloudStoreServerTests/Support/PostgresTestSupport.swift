@testable import CloudStoreServer
import CloudStoreTesting
import CloudStoreWire
import Foundation
import Logging
import PostgresNIO
import Synchronization
import Testing

/// Writers that save one new note per request into alice's zone "Notes", each going round the
/// instances in turn (a load balancer's round robin) and moving on when one fails: every write
/// acknowledged (200 with the record) is remembered, and reported on ``acknowledgements`` with the
/// instance that acknowledged it.
final class Writers: Sendable {
    struct Acknowledgement: Sendable {
        var instance: Int
        var name: String
    }

    let instances: [URL]
    let acknowledgements: AsyncStream<Acknowledgement>
    private let continuation: AsyncStream<Acknowledgement>.Continuation
    private let state = Mutex(State())
    private let stopping = Flag()

    private struct State {
        var acknowledged = Set<String>()
        var failed = 0
        var tasks: [Task<Void, Never>] = []
    }

    /// Starts `count` writers; names are `<prefix><writer>-<n>`.
    init(_ count: Int, through instances: [URL], prefix: String = "W") {
        self.instances = instances
        (acknowledgements, continuation) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
        let tasks = (0..<count).map { writer in
            Task { [self] in await write(as: "\(prefix)\(writer)", startingAt: writer) }
        }
        state.withLock { $0.tasks = tasks }
    }

    var acknowledged: Set<String> { state.withLock { $0.acknowledged } }
    /// Requests that failed or were refused (an instance down answers none).
    var failed: Int { state.withLock { $0.failed } }

    /// Stops the writers and returns once each finished its request in flight.
    func stop() async {
        stopping.set()
        for task in state.withLock({ $0.tasks }) { await task.value }
        continuation.finish()
    }

    private func write(as writer: String, startingAt first: Int) async {
        var count = 0
        while !stopping.isSet {
            count += 1
            let instance = (first + count) % instances.count
            var client = CloudClient(baseURL: instances[instance])
            client.requestTimeout = .seconds(10)
            let name = "\(writer)-\(count)"
            let request = RecordsModifyRequest(zoneID: ZoneID(zoneName: "Notes"), operations: [.init(.create, note(name))])
            let answer = try? await client.call(.private, .recordsModify, request)
            if let answer, answer.status == 200,
                let response = try? WireCoding.decode(RecordsResponse.self, from: answer.body),
                response.records.first?.value != nil
            {
                state.withLock { _ = $0.acknowledged.insert(name) }
                continuation.yield(Acknowledgement(instance: instance, name: name))
            } else {
                state.withLock { $0.failed += 1 }
            }
        }
    }
}

extension AsyncStream<Writers.Acknowledgement>.Iterator {
    /// Returns once `count` more writes were acknowledged, by `instance` when given.
    mutating func waitFor(_ count: Int, by instance: Int? = nil) async throws {
        var seen = 0
        while seen < count {
            guard let acknowledgement = await next() else { throw WritersStopped() }
            if instance == nil || acknowledgement.instance == instance { seen += 1 }
        }
    }
}

struct WritersStopped: Error {}

/// A reader that follows the zone's changes with its sync token, asking the instances in turn
/// (another one whenever one fails), until ``Writers`` stopped and a last page said nothing more
/// is coming (or it is cancelled): what a device syncing through a load balancer sees.
func followChanges(through instances: [URL], until writersStopped: Flag) async -> Set<String> {
    var token: String?
    var seen = Set<String>()
    var turn = 0
    while !Task.isCancelled {
        let finalPass = writersStopped.isSet
        turn += 1
        var client = CloudClient(baseURL: instances[turn % instances.count])
        client.requestTimeout = .seconds(10)
        guard let answer = try? await client.zoneChanges(token: token, limit: 50), answer.status == 200,
            let response = try? WireCoding.decode(ZoneChangesResponse.self, from: answer.body),
            case .value(let page)? = response.zones.first
        else { continue }
        seen.formUnion(page.records.map(\.recordName))
        token = page.syncToken
        if finalPass && !page.moreComing { return seen }
    }
    return seen
}

/// Polls `GET /readyz` until it answers 200; answers how long that took, or throws after `deadline`.
@discardableResult
func waitUntilReady(_ baseURL: URL, within deadline: Duration = .seconds(30)) async throws -> Duration {
    let clock = ContinuousClock()
    let start = clock.now
    var client = CloudClient(baseURL: baseURL)
    client.requestTimeout = .seconds(5)
    while clock.now - start < deadline {
        if let answer = try? await client.send(.GET, "/readyz"), answer.status == 200 { return clock.now - start }
        try await Task.sleep(for: .milliseconds(20))
    }
    throw ReadinessTimeout(description: "\(baseURL) did not answer /readyz with 200 within \(deadline)")
}

struct ReadinessTimeout: Error, CustomStringConvertible {
    var description: String
}

/// Whether `task` finishes within `deadline`; answers at the deadline at the latest, while the
/// task goes on (a task group would wait for it).
func finishes<T: Sendable, Failure: Error>(_ task: Task<T, Failure>, within deadline: Duration) async -> Bool {
    let answered = Flag()
    return await withCheckedContinuation { continuation in
        let answer = { @Sendable (finished: Bool) in
            if answered.setIfUnset() { continuation.resume(returning: finished) }
        }
        Task {
            _ = await task.result
            answer(true)
        }
        Task {
            try? await Task.sleep(for: deadline)
            answer(false)
        }
    }
}

/// Runs `body` on a connection to the schema `url` names, as the URL's user (the test
/// database's owner), with ``PostgresStorage``'s table names.
func withPostgres<T: Sendable>(
    _ url: String, _ body: @escaping @Sendable (PostgresStorage, PostgresConnection) async throws -> T
) async throws -> T {
    let storage = try PostgresStorage(url: url, logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
    return try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { await storage.client.run(); return nil }
        defer { group.cancelAll() }
        return try await storage.client.withConnection { connection in try await body(storage, connection) }
    }
}

extension PostgresStorage {
    /// The recorded layout version; nil when none is.
    func recordedLayoutVersion(_ connection: PostgresConnection) async throws -> Int? {
        let rows = try await run(
            "SELECT version FROM \(unescaped: table("layout")) WHERE id = 1", on: connection)
        for try await version in rows.decode(Int.self) { return version }
        return nil
    }

    /// Whether an index of the schema exists and is valid.
    func hasValidIndex(_ name: String, _ connection: PostgresConnection) async throws -> Bool {
        let rows = try await run(
            """
            SELECT i.indisvalid FROM pg_catalog.pg_index AS i JOIN pg_catalog.pg_class AS c ON c.oid = i.indexrelid
            JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace WHERE n.nspname = \(schemaName) AND c.relname = \(name)
            """, on: connection)
        for try await valid in rows.decode(Bool.self) { return valid }
        return false
    }
}

/// `writers` writers saving `batches` batches of `size` notes each into zone "Notes" (`W<writer>-B<batch>-<n>`),
/// each through one of `clients` in turn, while `reader` follows the zone's changes with its token,
/// a page of 7 at a time, until a pass after the writers finished: answers the record names the
/// reader saw.
func writeWhileFollowing(
    through clients: [CloudClient], reader: CloudClient, writers: Int, batches: Int, size: Int
) async throws -> Set<String> {
    let writersDone = Flag()
    let following = Task {
        var token: String?
        var seen = Set<String>()
        var finalPass = false
        while !finalPass {
            finalPass = writersDone.isSet
            let page = try await reader.allZoneChanges(token: token, limit: 7)
            seen.formUnion(page.records.map(\.recordName))
            token = page.token
        }
        return seen
    }
    do {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<writers {
                let client = clients[writer % clients.count]
                group.addTask {
                    for batch in 0..<batches {
                        try await client.save((0..<size).map { note("W\(writer)-B\(batch)-\($0)") })
                    }
                }
            }
            try await group.waitForAll()
        }
    } catch {
        writersDone.set()
        _ = try? await following.value
        throw error
    }
    writersDone.set()
    return try await following.value
}
