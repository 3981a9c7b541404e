import CloudStoreWire
import Foundation
import Logging

/// Everything a CloudStore server needs to run: where it listens, where it stores, who may call it.
///
/// ```swift
/// let configuration = ServerConfiguration(
///     port: 0,                                            // any free port
///     storage: .sqlite(directory: "/var/lib/cloudstore"),
///     containers: ["iCloud.com.example.notes"],
///     users: ["secret-token-of-alice": "_alice"])
/// let server = try await CloudServer.start(configuration: configuration)
/// print(server.baseURL)                                   // http://127.0.0.1:54321
/// ```
public struct ServerConfiguration: Sendable {
    /// Where the server keeps its data.
    public enum Storage: Hashable, Sendable, CustomStringConvertible {
        /// One SQLite file per container in a directory, created when absent.
        case sqlite(directory: String)
        /// A PostgreSQL database, e.g. `postgres://user:password@127.0.0.1:5432/cloudstore`. The
        /// tables are created, or upgraded, at start; the database records their layout's
        /// version, and a server that finds it current runs no DDL and takes no lock (see
        /// <doc:RunningSeveralInstances>). Add `?schema=name` to keep them in a schema of their own.
        /// Several servers may share one database. Each connection keeps named prepared statements
        /// and sets the schema as its `search_path` when it starts, unless the URL says
        /// `pool_mode=transaction`: then nothing outlives a transaction on a connection, which is
        /// what a pooler in front needs (PgBouncer in transaction mode, and any PgBouncer before
        /// 1.20, which refuses `search_path`), and what needs a session connects past the pooler to
        /// `direct_host` and `direct_port` (see <doc:RunningSeveralInstances>).
        case postgres(url: String)

        public var description: String {
            switch self {
            case .sqlite(let directory): "SQLite in \(directory)"
            case .postgres(let url): "PostgreSQL at \(PostgresURL.redacted(url))"
            }
        }
    }

    public var host: String
    /// 0 picks a free port.
    public var port: Int
    public var storage: Storage
    /// The containers this server serves (WireProtocol.md §1: containers are the server's
    /// configuration, not the caller's choice). A request naming another container answers 404
    /// `NOT_FOUND`, so no caller can make the server open databases or files of its choosing.
    public var containers: Set<String>
    /// Bearer token → userRecordName. A request with an unknown token answers 401; without one,
    /// every database answers 421, except the public database for requests signed with a server key.
    public var users: [String: String]
    /// Server-to-server key ID → its P-256 public key in PEM. Signed requests reach the public
    /// database only.
    public var serverKeys: [String: String]
    /// Each container's API tokens, by name (container → name → token), as CloudKit's API tokens
    /// for web services: `?ckAPIToken=` alone reads that container's public database (records,
    /// zones, changes, asset downloads; 421 for anything else), and with a user's token the
    /// request acts as that user. Where a container has API tokens, a request that names an
    /// unknown one is 401 whatever else it carries; where it has none, `ckAPIToken` is ignored.
    public var apiTokens: [String: [String: String]]
    /// Who may sign in on the sign-in page (`/signin/{container}/{environment}`), with the secret
    /// that signs their web auth tokens and the origins the page may return to. With them, every
    /// 421 `AUTHENTICATION_REQUIRED` of a served container carries the page's URL as
    /// `redirectURL`, and `ckWebAuthToken` takes the page's tokens besides the bearer tokens. Nil:
    /// no sign-in page, and 421s carry no `redirectURL`.
    public var signInUsers: SignInUsers?
    /// The operator's bearer token: it may change the production schema, which no user's token
    /// may, and reaches the public database as a server-to-server key does. Nil: no operator.
    public var operatorToken: String?
    public var limits: ServerLimits
    /// The server's notion of now: signature windows, rate limits, record stamps, tombstone horizon.
    public var clock: ServerClock
    /// Where the server keeps its recent requests and failures (the console shows them); pass your
    /// own to read them in process.
    public var activity: ServerActivity
    /// Serves the read-only web console under `/console` (it needs ``operatorToken``).
    public var console: Bool
    public var logger: Logger
    /// How often the server removes asset bytes no record needs (WireProtocol.md §7): every
    /// minute by default. Nil: only when ``CloudServer/sweepAssets()`` is called, for a server
    /// whose ``clock`` its caller moves (a test decides when a sweep sees the time it set).
    public var assetSweepInterval: Duration? = AssetSweeper.defaultInterval
    /// Sees the size of every piece of asset bytes the server hands to or takes from its storage
    /// (tests check that transfers stream).
    var assetChunkObserver: (@Sendable (Int) -> Void)?
    /// How an instance hears that another instance on the same PostgreSQL database changed a
    /// database its long polls wait on (SQLite has one instance: unused).
    public enum ChangeNotifications: Hashable, Sendable {
        /// PostgreSQL's `LISTEN`/`NOTIFY`: at once. Behind a transaction pooler the listening
        /// connection goes past the pooler (`direct_host`, `direct_port` in the URL).
        case listen
        /// Reads, every `interval`, the database sequence of each database this instance's long
        /// polls wait on, one indexed query per round: for a pooler with no way past it, or an
        /// engine without `LISTEN` (CockroachDB). A change reaches a waiting poll within the interval.
        case poll(interval: Duration)

        /// The poll interval of `--notifications poll`.
        public static let defaultPollInterval: Duration = .milliseconds(100)
    }

    /// How this instance hears other instances' commits (PostgreSQL): `LISTEN` by default.
    public var changeNotifications: ChangeNotifications = .listen

    /// Streaming replicas of the PostgreSQL database (`postgres://user:password@replica:5432/cloudstore`)
    /// that serve record lookups, queries and pages of zone changes, each only when it holds every
    /// commit of the database the primary holds at that moment, else the primary answers (a device
    /// never sees its token go back or misses a change). A replica that stops or breaks is left out
    /// for a while and tried again; `GET /readyz` and the metrics show each one's reads. Writes, and
    /// everything a write decides from, stay on the primary. Empty: every read on the primary.
    public var postgresReplicas: [String] = []

    /// For tests that play an instance of an earlier release on PostgreSQL: its storage layout
    /// ends after this many steps (``PostgresLayout/prefix(_:)``); nil: this release's.
    var postgresLayoutSteps: Int?

    public init(
        host: String = "127.0.0.1", port: Int = 8080, storage: Storage, containers: Set<String>,
        users: [String: String] = [:], serverKeys: [String: String] = [:], apiTokens: [String: [String: String]] = [:],
        signInUsers: SignInUsers? = nil, operatorToken: String? = nil, limits: ServerLimits = ServerLimits(), clock: ServerClock = .system, activity: ServerActivity = ServerActivity(),
        console: Bool = false, logger: Logger = Logger(label: "cloudstore.server")
    ) {
        self.host = host
        self.port = port
        self.storage = storage
        self.containers = containers
        self.users = users
        self.serverKeys = serverKeys
        self.apiTokens = apiTokens
        self.signInUsers = signInUsers
        self.operatorToken = operatorToken
        self.limits = limits
        self.clock = clock
        self.activity = activity
        self.console = console
        self.logger = logger
    }
}

extension ServerConfiguration {
    /// What is wrong with a table of users (bearer token → userRecordName), or nil: a name must be
    /// 1 to 255 characters and must not be one the server writes for callers that are not users
    /// (`_serverKey_…`, `_apiToken_…`, `_operator`, the public database's `_defaultOwner`), or a
    /// user so named would pass for a server key as a record's creator.
    public static func usersProblem(_ users: [String: String]) -> String? {
        users.values.sorted().lazy.compactMap(userRecordNameProblem).first
    }

    /// What is wrong with one user's name, by the rules of ``usersProblem(_:)``, or nil.
    static func userRecordNameProblem(_ name: String) -> String? {
        if name.isEmpty || name.utf8.count > 255 {
            return "user \"\(name.prefix(64))\" is not a valid userRecordName: use 1 to 255 characters"
        }
        let reserved = [Caller.serverKey("").userRecordName, Caller.apiToken("").userRecordName]
        if reserved.contains(where: name.hasPrefix)
            || name == Caller.operator.userRecordName || name == DatabasePartition.publicOwner
        {
            return "user \"\(name.prefix(64))\" has a name the server keeps for callers that are not users: name the user otherwise"
        }
        return nil
    }

    /// Throws when the configuration cannot serve anyone: no containers, an invalid container name
    /// or user name, a limit that cannot work.
    func validate() throws(ServerConfigurationError) {
        try limits.validate()
        if containers.isEmpty {
            throw ServerConfigurationError(
                "no containers: declare the containers this server serves, e.g. --container iCloud.com.example.notes")
        }
        if let bad = containers.sorted().first(where: { !DatabaseRoute.isValidContainer($0) }) {
            throw ServerConfigurationError(
                "container \"\(bad.prefix(140))\" is invalid: use 1 to 128 of A-Z a-z 0-9 . _ -")
        }
        if let problem = Self.usersProblem(users) { throw ServerConfigurationError(problem) }
        if case .sqlite = storage, !postgresReplicas.isEmpty {
            throw ServerConfigurationError(
                "read replicas are PostgreSQL's: store in PostgreSQL (--postgres) to read from its replicas, or leave --postgres-replica out")
        }
        if case .poll(let interval) = changeNotifications, !(interval > .zero && interval <= .seconds(60)) {
            throw ServerConfigurationError(
                "the notifications poll interval must be above 0 and at most 60 s; it is \(interval) (a change reaches a waiting long poll within it: 0.1 s is the default)")
        }
        if let operatorToken, operatorToken.isEmpty || users[operatorToken] != nil {
            throw ServerConfigurationError(
                "the operator token is empty or is also a user's token: give the operator a token of its own")
        }
        if let container = apiTokens.keys.sorted().first(where: { !containers.contains($0) }) {
            throw ServerConfigurationError(
                "API tokens for container \(container.prefix(140)), which this server does not serve: declare it, or remove its tokens")
        }
        for (container, names) in apiTokens.sorted(by: { $0.key < $1.key }) {
            if let name = names.keys.sorted().first(where: { $0.isEmpty || names[$0]!.isEmpty }) {
                throw ServerConfigurationError(
                    "API token \"\(name.prefix(64))\" of container \(container) has an empty name or token: give each token a name and a secret")
            }
        }
        if let problem = signInUsers?.problem { throw ServerConfigurationError("sign-in users: \(problem)") }
        if console, operatorToken == nil {
            throw ServerConfigurationError(
                "the console needs an operator token: give the server one (operatorToken) or leave the console off")
        }
    }
}

/// The server's clock, injectable so tests can move time.
///
/// ```swift
/// let clock = ServerClock { Date(timeIntervalSince1970: 1_800_000_000) }
/// ```
public struct ServerClock: Sendable {
    public var now: @Sendable () -> Date

    public init(now: @escaping @Sendable () -> Date) {
        self.now = now
    }

    /// The wall clock.
    public static let system = ServerClock { Date() }
}

/// A configuration the server cannot run with; the message names the setting and the fix.
public struct ServerConfigurationError: Error, CustomStringConvertible {
    public var message: String

    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}
