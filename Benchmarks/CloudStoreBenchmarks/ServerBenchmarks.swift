import CloudStore
import CloudStoreSync
import Foundation

/// Item 8: `records/modify` throughput of a server child process with concurrent clients, each a
/// different user writing full batches (200 new Notes per request, the server's limit) into its own
/// zone. Also seeds zones for item 7.
struct ServerBenchmarks {
    let server: BenchServer

    func database(user: Int) -> HTTPCloudDatabase {
        HTTPCloudDatabase(
            baseURL: server.url, container: server.containerIdentifier, token: "user\(user)-token",
            deviceID: "bench-client-\(user)", requestTimeout: .seconds(120))
    }

    /// `clients` users each create a zone, then send `requests` batches of `batchSize` new notes.
    func modifyThroughput(clients: Int, requests: Int, batchSize: Int = 200) async throws -> [Figure] {
        let zoneID = ZoneID(zoneName: "Load\(UUID().uuidString.prefix(6))")
        let batches = try (0..<clients).map { _ in try (0..<requests).map { _ in try Self.batch(batchSize, in: zoneID) } }
        for client in 0..<clients {
            _ = try await database(user: client).modifyZones(ZonesModifyRequest(operations: [.init(.create, zoneID)]))
        }
        let (serverCPU, clientCPU) = (server.cpuSeconds, processCPUSeconds())
        let start = ContinuousClock.now
        let latencies = try await withThrowingTaskGroup(of: [Double].self) { group in
            for client in 0..<clients {
                let (clientDatabase, clientBatches) = (database(user: client), batches[client])
                group.addTask { try await Self.send(clientBatches, zoneID: zoneID, through: clientDatabase) }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        let seconds = start.duration(to: .now).inSeconds
        let serverSeconds = server.cpuSeconds - serverCPU
        let clientSeconds = processCPUSeconds() - clientCPU
        let sorted = latencies.sorted()
        let records = clients * requests * batchSize
        let backend = server.backend.rawValue
        return [
            Figure(item: 8, "server records/modify, \(clients) clients, \(backend)", Double(records) / seconds, "records/s",
                String(format: "%d requests of %d new records in %.2f s; server CPU %.1f s, clients CPU %.1f s",
                       clients * requests, batchSize, seconds, serverSeconds, clientSeconds)),
            Figure(item: 8, "server records/modify requests/s, \(backend)", Double(clients * requests) / seconds, "requests/s",
                String(format: "request p50 %.1f ms, p99 %.1f ms", percentile(sorted, 0.5), percentile(sorted, 0.99))),
        ]
    }

    /// Where the writers of ``hotZone(writers:requests:batchSize:)`` write.
    enum Spread: String, CaseIterable {
        /// One user's one zone: every write waits for the partition's row before it.
        case oneZone = "1 zone of 1 user"
        /// One zone each, all of one user: still one partition, one row to wait for.
        case zonesOfOneUser = "8 zones of 1 user"
        /// One user each: eight partitions, nothing shared.
        case users = "8 users"
    }

    /// Item 8, contention: `writers` concurrent writers sending `requests` small batches
    /// (`batchSize` new notes, the size of an app's save) each, spread as `spread` says. Writes to
    /// one database (partition) are serialized on its row, which is how changes get their order,
    /// so the first two spreads measure that queue and the third the server without it; the
    /// request latencies show the wait.
    func hotZone(_ spread: Spread, writers: Int = 8, requests: Int, batchSize: Int = 10) async throws -> Figure {
        let run = UUID().uuidString.prefix(6)
        let targets: [(user: Int, zone: ZoneID)] = (0..<writers).map { writer in
            switch spread {
            case .oneZone: (0, ZoneID(zoneName: "Hot\(run)"))
            case .zonesOfOneUser: (0, ZoneID(zoneName: "Hot\(run)-\(writer)"))
            case .users: (writer, ZoneID(zoneName: "Hot\(run)"))
            }
        }
        for (user, zone) in Set(targets.map { "\($0.user)|\($0.zone.zoneName)" }).sorted().map({ key in
            let parts = key.split(separator: "|")
            return (Int(parts[0])!, ZoneID(zoneName: String(parts[1])))
        }) {
            _ = try await database(user: user).modifyZones(ZonesModifyRequest(operations: [.init(.create, zone)]))
        }
        let batches = try targets.map { target in try (0..<requests).map { _ in try Self.batch(batchSize, in: target.zone) } }
        let serverCPU = server.cpuSeconds
        let start = ContinuousClock.now
        let latencies = try await withThrowingTaskGroup(of: [Double].self) { group in
            for (writer, target) in targets.enumerated() {
                let (writerDatabase, writerBatches) = (database(user: target.user), batches[writer])
                group.addTask { try await Self.send(writerBatches, zoneID: target.zone, through: writerDatabase) }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        let seconds = start.duration(to: .now).inSeconds
        let sorted = latencies.sorted()
        return Figure(
            item: 8, "hot zone: \(writers) writers to \(spread.rawValue), \(server.backend.rawValue)",
            Double(writers * requests) / seconds, "requests/s",
            String(
                format: "%d requests of %d new notes in %.2f s; request p50 %.1f ms, p99 %.1f ms; server CPU %.1f s",
                writers * requests, batchSize, seconds, percentile(sorted, 0.5), percentile(sorted, 0.99),
                server.cpuSeconds - serverCPU))
    }

    /// Sends each batch in turn; answers each request's time in ms. A refused record fails the run.
    static func send(_ batches: [RecordsModifyRequest], zoneID: ZoneID, through database: HTTPCloudDatabase) async throws -> [Double] {
        var latencies: [Double] = []
        for batch in batches {
            let start = ContinuousClock.now
            let response = try await database.modifyRecords(batch)
            latencies.append(start.duration(to: .now).inSeconds * 1000)
            if let error = response.records.lazy.compactMap(\.error).first {
                throw BenchError("the server refused a benchmark record: \(error)")
            }
        }
        return latencies
    }

    /// A `records/modify` request creating `count` new notes, encoded as the mirror encodes them.
    static func batch(_ count: Int, in zoneID: ZoneID) throws -> RecordsModifyRequest {
        let base = Date(timeIntervalSince1970: 1_763_700_000)
        let operations = try (0..<count).map { index in
            RecordsModifyRequest.Operation(
                .create, try BenchNote.schema.record(for: BenchNote.note(index, base: base).snapshot, in: zoneID))
        }
        return RecordsModifyRequest(zoneID: zoneID, operations: operations)
    }

    /// Puts `count` notes into a new zone of `user0`, four requests at a time, for bootstrap runs.
    func seed(zoneName: String, count: Int) async throws {
        let zoneID = ZoneID(zoneName: zoneName)
        let database = database(user: 0)
        _ = try await database.modifyZones(ZonesModifyRequest(operations: [.init(.create, zoneID)]))
        let batchSize = 200
        let lanes = 4
        try await withThrowingTaskGroup(of: [Double].self) { group in
            for lane in 0..<lanes {
                group.addTask {
                    let batches = try stride(from: lane * batchSize, to: count, by: lanes * batchSize).map { first in
                        try Self.batch(min(batchSize, count - first), in: zoneID)
                    }
                    return try await Self.send(batches, zoneID: zoneID, through: database)
                }
            }
            try await group.waitForAll()
        }
    }
}
