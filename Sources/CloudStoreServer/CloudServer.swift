import CloudStoreLogging
import CloudStoreWire
import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization
import UnixSignals

/// Builds the CloudStore server as a Hummingbird application: the routes of WireProtocol.md §3 over
/// the configured storage. Run it with `runService()` (graceful shutdown on SIGTERM and SIGINT)
/// or inside your own `ServiceGroup`.
///
/// ```swift
/// let app = try await buildApplication(
///     configuration: ServerConfiguration(
///         storage: .sqlite(directory: "data"), containers: ["iCloud.com.example.notes"], users: ["t0k3n": "_alice"]),
///     onListening: { port in print("listening on \(port)") })
/// try await app.runService()
/// ```
///
/// - Parameters:
///   - configuration: where the server listens and stores, its containers, users, keys and limits.
///   - onListening: called once the server accepts connections, with the bound port (the real
///     one when the configuration asks for port 0).
public func buildApplication(
    configuration: ServerConfiguration, onListening: @escaping @Sendable (Int) async -> Void = { _ in }
) async throws -> some ApplicationProtocol {
    try await buildApplicationAndTokens(configuration: configuration, onListening: onListening).app
}

/// ``buildApplication(configuration:onListening:)``, the bearer tokens it authenticates with,
/// which ``CloudServer/replaceUsers(_:)`` replaces, and the services its routes share.
private func buildApplicationAndTokens(
    configuration: ServerConfiguration, onListening: @escaping @Sendable (Int) async -> Void
) async throws -> (app: some ApplicationProtocol, tokens: BearerTokens, services: CloudServices) {
    try configuration.validate()
    let assetLifetime = AssetLifetime(tombstoneHorizon: configuration.limits.tombstoneHorizon)
    let metrics = ServerMetrics(activity: configuration.activity)
    let storage: any ServerStorage =
        switch configuration.storage {
        case .sqlite(let directory):
            SQLiteStorage(
                directory: URL(fileURLWithPath: directory), logger: configuration.logger, assetLifetime: assetLifetime,
                clock: configuration.clock)
        case .postgres(let url):
            try PostgresStorage(
                url: url, logger: configuration.logger, assetLifetime: assetLifetime, clock: configuration.clock,
                notifications: configuration.changeNotifications, replicaURLs: configuration.postgresReplicas,
                onReplicaRead: { metrics.replicaRead($0, $1) }, layoutSteps: configuration.postgresLayoutSteps)
        }
    let bearerTokens = BearerTokens(
        configuration.users, operatorToken: configuration.operatorToken, apiTokens: configuration.apiTokens)
    let services = CloudServices(
        storage: storage, broker: ChangeBroker(), limits: configuration.limits, clock: configuration.clock,
        containers: configuration.containers,
        bearerTokens: bearerTokens, serverKeys: try ServerKeys(configuration.serverKeys),
        signIn: SignInAuthority(configuration.signInUsers),
        rateLimiter: configuration.limits.requestsPerSecondPerUser.map { RateLimiter(requestsPerSecond: $0) },
        metrics: metrics, logger: configuration.logger,
        assetChunkObserver: configuration.assetChunkObserver)
    if services.bearerTokens.hasNoUsers, configuration.signInUsers?.users.isEmpty ?? true {
        configuration.logger.warning(
            "no users: private and shared databases answer 421 or 401; pass a tokens file or a sign-in users file to add users")
    }

    let router = Router(context: CloudRequestContext.self)
    router.add(middleware: CrossOriginMiddleware())
    router.add(middleware: ErrorMiddleware(metrics: services.metrics, logger: configuration.logger))
    OperatingController(services: services, operatorToken: configuration.operatorToken).register(on: router)
    SignInController(services: services).register(on: router)
    if configuration.console, let operatorToken = configuration.operatorToken {
        ConsoleController(services: services, operatorToken: operatorToken).register(on: router)
    }
    let database = router.group("database/1/:container/:environment").add(middleware: RequestGate(services: services))
    ZonesController(services: services).register(on: database)
    RecordsController(services: services).register(on: database)
    SharesController(services: services).register(on: database)
    ChangesController(services: services).register(on: database)
    NotificationsController(services: services).register(on: database)
    SchemaController(services: services).register(on: database)
    UsersController(services: services).register(on: database)
    SubscriptionsController(services: services).register(on: database)
    let push = PushController(services: services)
    push.register(
        database: database, device: router.group("device/1/:container/:environment").add(middleware: RequestGate(services: services)))
    push.registerCourier(on: router)
    UnsupportedOperations.register(on: database)
    let assets = AssetsController(services: services)
    assets.register(on: database)
    assets.registerTransfers(
        on: router.group("database/1/:container/:environment").add(
            middleware: RequestGate(services: services, readsBody: false)))

    let port = configuration.port
    let descriptorLimit = ConnectionLimit.descriptorLimit
    let reserved = ConnectionLimit.reservedDescriptors(for: configuration.storage, containers: configuration.containers.count)
    let connections = ConnectionLimit(
        capacity: ConnectionLimit.capacity(
            maxConnections: configuration.limits.maxConnections, descriptorLimit: descriptorLimit,
            reservedDescriptors: reserved))
    configuration.logger.log(
        level: connections.capacity < 64 ? .warning : .notice,
        connections.capacity < configuration.limits.maxConnections
            ? "connections limited below maxConnections by the descriptor limit: raise `ulimit -n` to serve more"
            : "connections limited",
        metadata: [
            "capacity": "\(connections.capacity)", "maxConnections": "\(configuration.limits.maxConnections)",
            "descriptorLimit": "\(descriptorLimit.map(String.init) ?? "none")", "reservedForStorage": "\(reserved)",
        ])
    let idleTimeout = TimeAmount.nanoseconds(Int64(configuration.limits.idleTimeoutSeconds * 1_000_000_000))
    var app = Application(
        router: router,
        server: .http1(
            configuration: HTTP1Channel.Configuration(
                additionalChannelHandlers: [connections.handler()], idleTimeout: idleTimeout)),
        configuration: ApplicationConfiguration(address: .hostname(configuration.host, port: port), serverName: nil),
        services: [StorageService(storage: storage, broker: services.broker)]
            + (configuration.assetSweepInterval.map { [AssetSweeper(services: services, interval: $0)] } ?? []),
        onServerRunning: { channel in await onListening(channel.localAddress?.port ?? port) },
        // Hummingbird's own lines (its services starting and stopping) only at level 4; requests
        // log through the server's logger, which ErrorMiddleware puts in each request's context.
        logger: configuration.logger.forLibrary("hummingbird"))
    app.beforeServerStarts {
        try await storage.prepare()
        configuration.logger.notice("storage ready", metadata: ["storage": "\(configuration.storage)"])
    }
    return (app, bearerTokens, services)
}

/// Runs the storage's background work (the PostgreSQL pool and change listener) beside the server,
/// and feeds changes other servers commit to the broker.
struct StorageService: Service {
    let storage: any ServerStorage
    let broker: ChangeBroker

    func run() async throws {
        try await storage.run(changes: broker)
    }
}

/// Removes unreferenced asset bytes (WireProtocol.md §7) every ``ServerConfiguration/assetSweepInterval``,
/// by the rules of ``AssetLifetime`` on the server's clock.
struct AssetSweeper: Service {
    static let defaultInterval: Duration = .seconds(60)
    let services: CloudServices
    let interval: Duration

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    try await Task.sleep(for: interval)
                    try await services.sweepAssets()
                } catch is CancellationError {
                    return
                } catch {
                    services.logger.warning(
                        "asset sweep failed; retrying later",
                        metadata: ["error": "\(StorageFailure.describe(error, doing: "removing asset bytes no record needs"))"])
                }
            }
        }
    }
}

/// A CloudStore server running in this process, for tests, demos and embedding.
///
/// ```swift
/// let server = try await CloudServer.start(
///     configuration: ServerConfiguration(
///         port: 0, storage: .sqlite(directory: dir), containers: ["iCloud.test"], users: ["t": "_alice"]))
/// // ... talk to server.baseURL ...
/// try await server.shutdown()   // finishes in-flight requests, then stops
/// ```
public final class CloudServer: Sendable {
    /// The port the server listens on.
    public let port: Int
    /// `http://<host>:<port>`.
    public let baseURL: URL
    private let group: ServiceGroup
    private let task: Task<Void, any Error>
    private let bearerTokens: BearerTokens
    private let services: CloudServices

    private init(
        port: Int, host: String, group: ServiceGroup, task: Task<Void, any Error>, bearerTokens: BearerTokens,
        services: CloudServices
    ) {
        self.port = port
        var components = URLComponents()
        components.scheme = "http"
        components.host = host.contains(":") ? "[\(host)]" : host
        components.port = port
        self.baseURL = components.url ?? URL(string: "http://127.0.0.1:\(port)")!
        self.group = group
        self.task = task
        self.bearerTokens = bearerTokens
        self.services = services
    }

    /// Starts a server and returns once it accepts connections; throws if it cannot start (a port in
    /// use, storage that cannot be opened).
    ///
    /// - Parameters:
    ///   - configuration: where the server listens and stores, its containers, users, keys and limits.
    ///   - shutdownSignals: signals that shut the server down gracefully (in-flight requests finish,
    ///     long polls answer), e.g. `[.sigterm, .sigint]` for a server that is the process; none by
    ///     default, for servers inside tests and apps.
    public static func start(
        configuration: ServerConfiguration, shutdownSignals: [UnixSignal] = []
    ) async throws -> CloudServer {
        let listening = ListeningSignal()
        let (app, bearerTokens, services) = try await buildApplicationAndTokens(configuration: configuration) { port in
            listening.succeed(port)
        }
        let logger = configuration.logger
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [.init(service: app), .init(service: ShutdownNotice(logger: logger))],
                gracefulShutdownSignals: shutdownSignals, logger: logger.forLibrary("service-lifecycle")))
        let task = Task {
            do {
                try await group.run()
                listening.fail(ServerConfigurationError("the server stopped before it started listening"))
                logger.notice("server stopped")
            } catch {
                listening.fail(error)
                throw error
            }
        }
        let port: Int
        do {
            port = try await listening.port()
        } catch let error as IOError where error.errnoCode == EADDRINUSE || error.errnoCode == EACCES {
            let address = "\(configuration.host):\(configuration.port)"
            throw ServerConfigurationError(
                error.errnoCode == EADDRINUSE
                    ? "port \(configuration.port) is in use (\(address)): stop what listens there, or choose another port with --port (0 picks a free one)"
                    : "listening on \(address) is not permitted: use a port above 1023, or give the process the right to bind it")
        }
        return CloudServer(
            port: port, host: configuration.host, group: group, task: task, bearerTokens: bearerTokens, services: services)
    }

    /// Runs a server until SIGTERM or SIGINT, then shuts it down gracefully: in-flight requests
    /// finish, long polls answer.
    public static func run(
        configuration: ServerConfiguration, onListening: @escaping @Sendable (Int) async -> Void = { _ in }
    ) async throws {
        let app = try await buildApplication(configuration: configuration, onListening: onListening)
        try await app.runService()
    }

    /// Replaces the users (bearer token → userRecordName) while the server runs: later requests
    /// see only the new tokens; requests in flight (a waiting long poll) are not disturbed. Users
    /// the configuration would refuse (``ServerConfiguration/usersProblem(_:)``) are refused here
    /// too, and the previous users stay.
    public func replaceUsers(_ users: [String: String]) throws(ServerConfigurationError) {
        if let problem = ServerConfiguration.usersProblem(users) { throw ServerConfigurationError(problem) }
        bearerTokens.replaceUsers(users)
    }

    /// Replaces the API tokens (container → name → token) while the server runs: a removed token
    /// is refused from the next request on (``ServerConfiguration/apiTokens``).
    public func replaceAPITokens(_ tokens: [String: [String: String]]) {
        bearerTokens.replaceAPITokens(tokens)
    }

    /// Replaces the sign-in users, their secret and the allowed redirects while the server runs
    /// (``ServerConfiguration/signInUsers``): a removed user's web auth tokens, and every token of
    /// a replaced secret, are refused from the next request on. Sign-in users the configuration
    /// would refuse (``SignInUsers/problem``) are refused here too, and the previous ones stay.
    public func replaceSignInUsers(_ users: SignInUsers) throws(ServerConfigurationError) {
        if let problem = users.problem { throw ServerConfigurationError("sign-in users: \(problem)") }
        services.signIn.replace(users)
    }

    /// Removes the asset bytes no record needs any more, now (the server also does so every
    /// minute): uploads never saved whose receipt expired, replaced assets, and those of records
    /// deleted longer ago than the tombstone horizon. Answers how many assets went.
    @discardableResult
    public func sweepAssets() async throws -> Int {
        try await services.sweepAssets().assets
    }

    /// Returns when the server has stopped: after a shutdown signal of ``start(configuration:shutdownSignals:)``
    /// or a ``shutdown()``.
    public func waitUntilStopped() async throws {
        try await task.value
    }

    /// Stops accepting connections, lets in-flight requests finish, and returns when the server has stopped.
    public func shutdown() async throws {
        await group.triggerGracefulShutdown()
        try await task.value
    }
}

/// Says at level 1 when a graceful shutdown begins (a signal, or ``CloudServer/shutdown()``).
private struct ShutdownNotice: Service {
    let logger: Logger

    func run() async throws {
        try? await gracefulShutdown()
        logger.notice("shutting down gracefully: in-flight requests finish, waiting long polls answer")
    }
}

/// Hands the bound port from the server's startup to ``CloudServer/start(configuration:)``.
private final class ListeningSignal: Sendable {
    private enum State {
        case waiting(CheckedContinuation<Int, any Error>?)
        case done(Result<Int, any Error>)
    }

    private let state = Mutex(State.waiting(nil))

    func succeed(_ port: Int) { finish(.success(port)) }
    func fail(_ error: any Error) { finish(.failure(error)) }

    private func finish(_ result: Result<Int, any Error>) {
        let continuation = state.withLock { state -> CheckedContinuation<Int, any Error>? in
            guard case .waiting(let continuation) = state else { return nil }
            state = .done(result)
            return continuation
        }
        continuation?.resume(with: result)
    }

    func port() async throws -> Int {
        try await withCheckedThrowingContinuation { continuation in
            let result = state.withLock { state -> Result<Int, any Error>? in
                switch state {
                case .waiting: state = .waiting(continuation); return nil
                case .done(let result): return result
                }
            }
            if let result { continuation.resume(with: result) }
        }
    }
}
