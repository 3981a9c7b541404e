import CloudStoreServer
import CloudStoreWire
import Foundation
import Logging

/// A CloudStore server in this process on 127.0.0.1 and a free port, for tests.
///
/// By default it stores in a fresh temporary SQLite directory that ``shutdown()`` removes, serves
/// the containers of ``defaultContainers``, knows two users, `_alice` (token `alice-token`) and
/// `_bob` (token `bob-token`), and the operator (token ``operatorToken``).
///
/// ```swift
/// let server = try await TestServer.start()
/// defer { Task { try await server.shutdown() } }      // or call it at the end of the test
/// var request = URLRequest(url: server.url(container: "iCloud.test", .private, .zonesList))
/// request.setValue("Bearer \(server.token(for: "_alice")!)", forHTTPHeaderField: "Authorization")
/// ```
public final class TestServer: Sendable {
    /// Where a test server stores.
    public enum Storage: Sendable {
        /// A new temporary directory, removed by ``TestServer/shutdown()``.
        case temporarySQLite
        /// A directory the test owns (kept after shutdown, e.g. to restart a server on the same data).
        case sqlite(directory: URL)
        /// A PostgreSQL database, e.g. from `CLOUDSTORE_TEST_POSTGRES_URL`.
        case postgres(url: String)
    }

    /// Token → userRecordName of the default users.
    public static let defaultUsers = ["alice-token": "_alice", "bob-token": "_bob"]

    /// The containers a test server serves unless a test names others.
    public static let defaultContainers: Set<String> = [
        "iCloud.test", "iCloud.test.sync", "iCloud.com.example.notes", "iCloud.cli.test",
    ]

    /// The operator's bearer token of a test server.
    public static let operatorToken = "operator-token"

    public let server: CloudServer
    /// Token → userRecordName.
    public let users: [String: String]
    /// The SQLite directory, when the server stores in one.
    public let dataDirectory: URL?
    private let ownsDirectory: Bool

    private init(server: CloudServer, users: [String: String], dataDirectory: URL?, ownsDirectory: Bool) {
        self.server = server
        self.users = users
        self.dataDirectory = dataDirectory
        self.ownsDirectory = ownsDirectory
    }

    /// `http://127.0.0.1:<port>`.
    public var baseURL: URL { server.baseURL }
    public var port: Int { server.port }

    /// Starts a server and returns once it accepts connections.
    ///
    /// - Parameters:
    ///   - users: bearer token → userRecordName.
    ///   - containers: the containers served; any other answers 404.
    ///   - storage: where the server stores; a temporary SQLite directory by default.
    ///   - serverKeys: server-to-server key ID → P-256 public key PEM.
    ///   - clock: the server's clock; pass a ``ManualClock`` to move time. The server then removes
    ///     unreferenced asset bytes only when the test calls `server.sweepAssets()`.
    ///   - port: the port to listen on; 0 (the default) picks a free one.
    ///   - limits: the server's limits; the defaults of `ServerLimits`.
    ///   - changeNotifications: how the server hears other instances' commits on PostgreSQL.
    ///   - logger: the server's logger; by default it logs nothing.
    public static func start(
        users: [String: String] = defaultUsers, containers: Set<String> = defaultContainers,
        storage: Storage = .temporarySQLite, port: Int = 0, serverKeys: [String: String] = [:], limits: ServerLimits = ServerLimits(), clock: ManualClock? = nil,
        changeNotifications: ServerConfiguration.ChangeNotifications = .listen,
        logger: Logger = Logger(label: "cloudstore.test-server", factory: { _ in SwiftLogNoOpLogHandler() })
    ) async throws -> TestServer {
        let directory: URL?
        let owns: Bool
        let configured: ServerConfiguration.Storage
        switch storage {
        case .temporarySQLite:
            let temporary = FileManager.default.temporaryDirectory
                .appendingPathComponent("cloudstore-test-\(UUID().uuidString)", isDirectory: true)
            (directory, owns, configured) = (temporary, true, .sqlite(directory: temporary.path))
        case .sqlite(let url):
            (directory, owns, configured) = (url, false, .sqlite(directory: url.path))
        case .postgres(let url):
            (directory, owns, configured) = (nil, false, .postgres(url: url))
        }
        var configuration = ServerConfiguration(
            host: "127.0.0.1", port: port, storage: configured, containers: containers, users: users,
            serverKeys: serverKeys, operatorToken: Self.operatorToken, limits: limits,
            clock: clock?.serverClock ?? .system, logger: logger)
        configuration.changeNotifications = changeNotifications
        // A test that moves the clock sweeps when it means to, never behind its back.
        if clock != nil { configuration.assetSweepInterval = nil }
        do {
            let server = try await CloudServer.start(configuration: configuration)
            return TestServer(server: server, users: users, dataDirectory: directory, ownsDirectory: owns)
        } catch {
            if owns, let directory { try? FileManager.default.removeItem(at: directory) }
            throw error
        }
    }

    /// Runs `body` with a freshly started server and shuts the server down afterwards, also when
    /// `body` throws (then `body`'s error is the one thrown). The parameters are those of
    /// ``start(users:containers:storage:port:serverKeys:limits:clock:changeNotifications:logger:)``.
    ///
    /// ```swift
    /// try await TestServer.with { server in
    ///     let database = HTTPCloudDatabase(
    ///         baseURL: server.baseURL, container: "iCloud.test", token: "alice-token", deviceID: "A")
    ///     // ...
    /// }
    /// ```
    public static func with<T>(
        users: [String: String] = defaultUsers, containers: Set<String> = defaultContainers,
        storage: Storage = .temporarySQLite, serverKeys: [String: String] = [:], limits: ServerLimits = ServerLimits(),
        clock: ManualClock? = nil, _ body: (TestServer) async throws -> T
    ) async throws -> T {
        let server = try await start(
            users: users, containers: containers, storage: storage, serverKeys: serverKeys, limits: limits, clock: clock)
        return try await running { try await body(server) } finally: { try await server.shutdown() }
    }

    /// The token of a user.
    public func token(for userRecordName: String) -> String? {
        users.first { $0.value == userRecordName }?.key
    }

    /// The URL of a database operation, e.g. `url(container: "iCloud.test", .private, .recordsModify)`.
    public func url(
        container: String, environment: CloudEnvironment = .development, _ database: DatabaseScope,
        _ operation: DatabaseOperation
    ) -> URL {
        let route = DatabaseRoute(container: container, environment: environment)
        return URL(string: baseURL.absoluteString + route.path(database, operation))!
    }

    /// Shuts the server down gracefully (in-flight requests finish) and removes its temporary directory.
    public func shutdown() async throws {
        defer {
            if ownsDirectory, let dataDirectory { try? FileManager.default.removeItem(at: dataDirectory) }
        }
        try await server.shutdown()
    }
}
