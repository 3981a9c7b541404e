import AsyncHTTPClient
import CloudStoreServer
import CloudStoreTesting
import CloudStoreWire
import Foundation
import NIOCore
import NIOHTTP1
import Testing

/// A storage backend the conformance suite runs against: SQLite always, PostgreSQL when
/// `CLOUDSTORE_TEST_POSTGRES_URL` is set.
enum Backend: Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres(String)

    static let postgresURL = ProcessInfo.processInfo.environment["CLOUDSTORE_TEST_POSTGRES_URL"]

    static var all: [Backend] {
        [.sqlite] + (postgresURL.map { [.postgres($0)] } ?? [])
    }

    var testDescription: String {
        switch self {
        case .sqlite: "SQLite"
        case .postgres: "PostgreSQL"
        }
    }

    /// Runs `body` with a storage for one test: a fresh SQLite directory, or a fresh PostgreSQL
    /// schema, dropped afterwards (``TestPostgresSchema``). Servers on it must be shut down by the
    /// end of `body`.
    func withFreshStorage<T>(_ body: (TestServer.Storage) async throws -> T) async throws -> T {
        switch self {
        case .sqlite: try await body(.temporarySQLite)
        case .postgres(let url): try await TestPostgresSchema.with(in: url) { url in try await body(.postgres(url: url)) }
        }
    }

    /// Runs `body` with the URL of a fresh schema in the test database, dropped afterwards.
    static func withFreshSchema<T>(_ body: (String) async throws -> T) async throws -> T {
        try await TestPostgresSchema.with(in: try #require(postgresURL), body)
    }

    /// ``withFreshStorage(_:)`` as a server configuration's storage, for a server started without
    /// ``TestServer``.
    func withFreshServerStorage<T>(_ body: (ServerConfiguration.Storage) async throws -> T) async throws -> T {
        switch self {
        case .sqlite:
            let directory = try TemporaryDirectory(prefix: "cloudstore-data")
            defer { withExtendedLifetime(directory) {} }
            return try await body(.sqlite(directory: directory.url.path))
        case .postgres(let url):
            return try await TestPostgresSchema.with(in: url) { url in try await body(.postgres(url: url)) }
        }
    }
}

/// Runs a test body against a fresh server of `backend` and a client of it (``TestServer/with``),
/// and shuts the server down afterwards, even when the body throws.
func withServer(
    _ backend: Backend, users: [String: String] = TestServer.defaultUsers, serverKeys: [String: String] = [:],
    limits: ServerLimits = ServerLimits(), clock: ManualClock? = nil,
    _ body: (TestServer, CloudClient) async throws -> Void
) async throws {
    try await backend.withFreshStorage { storage in
        try await TestServer.with(users: users, storage: storage, serverKeys: serverKeys, limits: limits, clock: clock) { server in
            try await body(server, CloudClient(baseURL: server.baseURL))
        }
    }
}

/// An HTTP answer: status, headers and body, with helpers to read the wire types.
struct Answer: Sendable {
    var status: Int
    var headers: HTTPHeaders
    var body: Data

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        do {
            return try WireCoding.decode(type, from: body)
        } catch {
            Issue.record("cannot decode \(T.self) from HTTP \(status): \(String(decoding: body, as: UTF8.self))")
            throw error
        }
    }

    /// The request-level error body.
    var error: ServerError? { try? WireCoding.decode(ServerError.self, from: body) }

    var text: String { String(decoding: body, as: UTF8.self) }

    /// The body as a JSON tree.
    var json: [String: Any] { (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:] }
}

/// A client of one container, acting as one user on one device.
struct CloudClient: Sendable {
    var baseURL: URL
    var container = "iCloud.test"
    var environment: CloudEnvironment = .development
    var token: String? = "alice-token"
    var device: String? = "device-A"
    /// How long one request may take.
    var requestTimeout: TimeAmount = .seconds(90)

    func asUser(_ token: String?, device: String? = nil) -> CloudClient {
        var copy = self
        copy.token = token
        copy.device = device ?? self.device
        return copy
    }

    func inEnvironment(_ environment: CloudEnvironment) -> CloudClient {
        var copy = self
        copy.environment = environment
        return copy
    }

    var basePath: String { DatabaseRoute(container: container, environment: environment).basePath }

    func path(_ database: DatabaseScope, _ operation: DatabaseOperation) -> String {
        DatabaseRoute(container: container, environment: environment).path(database, operation)
    }

    /// Sends raw bytes to a path (which may carry a query), or to an absolute URL the server
    /// handed out.
    func send(
        _ method: HTTPMethod, _ path: String, body: Data? = nil, headers: [(String, String)] = [],
        timeout: TimeAmount? = nil, chunked: Bool = false
    ) async throws -> Answer {
        var request = HTTPClientRequest(url: path.hasPrefix("http") ? path : baseURL.absoluteString + path)
        request.method = method
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        if let device { request.headers.add(name: WireHeader.device, value: device) }
        request.headers.add(name: "Content-Type", value: "application/json")
        for (name, value) in headers { request.headers.replaceOrAdd(name: name, value: value) }
        if let body {
            if chunked {
                let chunks = stride(from: 0, to: body.count, by: 16 * 1024).map {
                    ByteBuffer(bytes: body[$0..<min($0 + 16 * 1024, body.count)])
                }
                let stream = AsyncStream<ByteBuffer> { continuation in
                    for chunk in chunks { continuation.yield(chunk) }
                    continuation.finish()
                }
                request.body = .stream(stream, length: .unknown)
            } else {
                request.body = .bytes(ByteBuffer(bytes: body))
            }
        }
        let response = try await HTTPClient.shared.execute(request, timeout: timeout ?? requestTimeout)
        let collected = try await response.body.collect(upTo: 64 << 20)
        return Answer(status: Int(response.status.code), headers: response.headers, body: Data(buffer: collected))
    }

    /// Calls a database operation with a Codable body (GET operations send none).
    func call(_ database: DatabaseScope, _ operation: DatabaseOperation, _ body: some Encodable) async throws -> Answer {
        let method: HTTPMethod = operation.method == "GET" ? .GET : .POST
        return try await send(method, path(database, operation), body: method == .GET ? nil : try WireCoding.encode(body))
    }

    /// Calls a database operation with a JSON literal body.
    func call(_ database: DatabaseScope, _ operation: DatabaseOperation, json: String) async throws -> Answer {
        try await send(.POST, path(database, operation), body: Data(json.utf8))
    }

    // MARK: - Shortcuts that expect success

    @discardableResult
    func createZone(_ name: String, in database: DatabaseScope = .private) async throws -> Zone {
        let answer = try await call(
            database, .zonesModify, ZonesModifyRequest(operations: [.init(.create, ZoneID(zoneName: name))]))
        try #require(answer.status == 200, "create zone \(name): \(answer.text)")
        return try #require(try answer.decode(ZonesResponse.self).zones.first?.value)
    }

    /// Runs records/modify in the Notes zone.
    func modify(
        _ operations: [RecordsModifyRequest.Operation], atomic: Bool? = nil, in database: DatabaseScope = .private
    ) async throws -> (status: Int, results: [RecordResult]) {
        try await modify("Notes", operations, atomic: atomic, in: database)
    }

    /// Runs records/modify and answers the HTTP status and the results.
    func modify(
        _ zone: String, _ operations: [RecordsModifyRequest.Operation], atomic: Bool? = nil,
        in database: DatabaseScope = .private
    ) async throws -> (status: Int, results: [RecordResult]) {
        let answer = try await call(
            database, .recordsModify,
            RecordsModifyRequest(zoneID: ZoneID(zoneName: zone), atomic: atomic, operations: operations))
        guard answer.status == 200 || answer.status == 400, let response = try? answer.decode(RecordsResponse.self) else {
            Issue.record("records/modify answered \(answer.status): \(answer.text)")
            throw answer.error ?? ServerError(.internalError)
        }
        return (answer.status, response.records)
    }

    /// Saves records in the Notes zone.
    @discardableResult
    func save(_ records: [Record], _ type: RecordsModifyRequest.OperationType = .create) async throws -> [Record] {
        try await save("Notes", records, type)
    }

    /// Saves records that must succeed; answers them as the server stored them.
    @discardableResult
    func save(_ zone: String, _ records: [Record], _ type: RecordsModifyRequest.OperationType = .create)
        async throws -> [Record]
    {
        let (status, results) = try await modify(zone, records.map { .init(type, $0) })
        try #require(status == 200, "save answered \(status): \(results)")
        return try results.map { try #require($0.value, "save failed: \($0)") }
    }

    func lookup(_ names: [String]) async throws -> [RecordResult] {
        try await lookup("Notes", names)
    }

    func lookup(_ zone: String, _ names: [String], in database: DatabaseScope = .private) async throws
        -> [RecordResult]
    {
        let answer = try await call(
            database, .recordsLookup, RecordsLookupRequest(zoneID: ZoneID(zoneName: zone), recordNames: names))
        try #require(answer.status == 200, "lookup answered \(answer.status): \(answer.text)")
        return try answer.decode(RecordsResponse.self).records
    }

    /// One page of changes/zone.
    func zoneChanges(_ zone: String = "Notes", token: String?, limit: Int? = nil) async throws -> Answer {
        try await call(
            .private, .changesZone,
            ZoneChangesRequest(zones: [.init(zoneID: ZoneID(zoneName: zone), syncToken: token, resultsLimit: limit)]))
    }

    /// Every change of a zone since a token, page by page; answers the records and the final token.
    func allZoneChanges(_ zone: String = "Notes", token: String? = nil, limit: Int? = nil) async throws
        -> (records: [Record], token: String, pages: Int)
    {
        var records: [Record] = []
        var token = token
        var pages = 0
        while true {
            let answer = try await zoneChanges(zone, token: token, limit: limit)
            try #require(answer.status == 200, "changes/zone answered \(answer.status): \(answer.text)")
            guard case .value(let page)? = try answer.decode(ZoneChangesResponse.self).zones.first else {
                throw try #require(try answer.decode(ZoneChangesResponse.self).zones.first.flatMap {
                    if case .error(let error) = $0 { error } else { nil }
                })
            }
            pages += 1
            records += page.records
            token = page.syncToken
            if !page.moreComing { return (records, page.syncToken, pages) }
            try #require(pages < 10_000, "changes/zone never ends")
        }
    }

    func databaseChanges(token: String?, limit: Int? = nil) async throws -> DatabaseChangesResponse {
        let answer = try await call(.private, .changesDatabase, DatabaseChangesRequest(syncToken: token, resultsLimit: limit))
        try #require(answer.status == 200, "changes/database answered \(answer.status): \(answer.text)")
        return try answer.decode(DatabaseChangesResponse.self)
    }
}

/// A record literal for tests.
func note(_ name: String, title: String = "Hi", tag: String? = nil, extra: [String: FieldValue] = [:]) -> Record {
    var record = Record(recordName: name, recordType: "Note", recordChangeTag: tag, fields: ["title": .string(title)])
    record.fields.merge(extra) { $1 }
    return record
}

extension RecordResult {
    var code: ServerErrorCode? { error?.serverErrorCode }
}
