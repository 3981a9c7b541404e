import ArgumentParser
import CloudStoreServer
import CloudStoreWire
import Configuration
import Foundation
import Logging
import UnixSignals

/// `cloudstore serve`: runs the CloudStore server until SIGTERM or SIGINT (then shuts down
/// gracefully: in-flight requests finish); SIGHUP reloads the tokens, API tokens and sign-in users
/// files.
///
/// ```sh
/// cloudstore serve --data ./data --tokens tokens.json --container iCloud.com.example.notes
/// CLOUDSTORE_POSTGRES=postgres://me@127.0.0.1/cloudstore cloudstore serve --config serve.json
/// ```
/// Prints one line once it listens: `cloudstore: listening on http://127.0.0.1:8080 (storage: ...)`.
public struct ServeCommand: CloudStoreSubcommand {
    public static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the CloudStore sync server (CloudKit Web Services JSON).",
        discussion: """
            Serves the CloudKit Web Services database API for the containers it declares \
            (--container, repeatable) until SIGTERM or SIGINT, then finishes the requests in flight \
            and exits. SIGHUP reloads the tokens, API tokens and sign-in users files without dropping connections. Stores in SQLite under --data (one file per container), or in PostgreSQL with \
            --postgres. Users sign in with the bearer tokens of --tokens, or on the sign-in page \
            /signin/CONTAINER/ENVIRONMENT with a login and password of --sign-in-users. Prints "cloudstore: \
            listening on http://HOST:PORT (storage: ...)" once it accepts connections; --debug 2 \
            logs each request.

            Every option may also come from the environment (CLOUDSTORE_ and its name in upper \
            snake case: CLOUDSTORE_CONTAINERS=a,b, CLOUDSTORE_POSTGRES, CLOUDSTORE_OPERATOR_TOKEN, \
            CLOUDSTORE_MAX_CONNECTIONS) or from the JSON file of --config (its name in camelCase); \
            the command line wins over the environment, which wins over the file.

            Example:
              echo '{"alice-token": "_alice"}' > tokens.json
              cloudstore serve --port 8080 --data ./cloudstore-data --tokens tokens.json \\
                --container iCloud.com.example.notes
            """)

    @Option(help: "A JSON file of settings: any option below by its name in camelCase, e.g. {\"containers\": [\"iCloud.com.example.notes\"], \"maxConnections\": 500}.")
    var config: String?

    @Option(help: "The address to listen on (default 127.0.0.1).")
    var host: String?

    @Option(help: "The port to listen on, 0 to 65535; 0 picks a free one (default 8080).")
    var port: Int?

    @Option(help: "The directory of the SQLite files, one per container; created when absent (default ./cloudstore-data).")
    var data: String?

    @Option(help: "A PostgreSQL URL (postgres://user:password@host:5432/database) to store there instead of SQLite. Prefer CLOUDSTORE_POSTGRES or the config file: a password on the command line is visible to other users of the machine.")
    var postgres: String?

    @Option(help: "A JSON file of users: {\"<bearer token>\": \"<userRecordName>\"}. Without it no user can sign in.")
    var tokens: String?

    @Option(
        name: .customLong("api-tokens"),
        help: "A JSON file of API tokens by container and name: {\"<container>\": {\"<name>\": \"<token>\"}}. ?ckAPIToken= alone then reads that container's public database; an unknown token is 401. SIGHUP reloads it.")
    var apiTokens: String?

    @Option(
        name: .customLong("sign-in-users"),
        help: ArgumentHelp(
            "A JSON file of people who may sign in on the sign-in page /signin/CONTAINER/ENVIRONMENT, and the secret that signs their web auth tokens: {\"secret\": \"<32+ random characters>\", \"allowedRedirects\": [\"https://app.example.com\"], \"users\": [<entries of cloudstore hash-password>]}. 421s then carry the page's URL as redirectURL. SIGHUP reloads it.",
            valueName: "file"))
    var signInUsers: String?

    @Option(
        name: .customLong("container"),
        help: ArgumentHelp(
            "A container this server serves, e.g. iCloud.com.example.notes. Repeatable; at least one is needed. Requests for any other container answer 404.",
            valueName: "id"))
    var containers: [String] = []

    @Option(
        name: .customLong("server-key"),
        help: ArgumentHelp(
            "A server-to-server key for the public database: a key ID and a file with its P-256 public key (PEM). Repeatable.",
            valueName: "id=pem-file"))
    var serverKeys: [String] = []

    @Option(help: "A file holding the operator's bearer token (its first line): the operator may change the production schema, which users may not. Or set CLOUDSTORE_OPERATOR_TOKEN.")
    var operatorTokenFile: String?

    @Option(help: "Requests per second each caller may make; above it the server answers 429. Requests that fail to authenticate are limited per client address.")
    var rateLimit: Double?

    @Option(help: "Seconds a connection may stay open with no request in progress before the server closes it (default 75, above the 60 s after which HTTP clients such as AsyncHTTPClient drop idle connections themselves).")
    var idleTimeout: Double?

    @Option(help: "Seconds a request body may take to arrive (default 60).")
    var bodyTimeout: Double?

    @Option(help: "Open connections at most (default 1000, lowered to fit the descriptor limit); beyond it the connection idle longest is closed.")
    var maxConnections: Int?

    @Option(help: "Bytes one asset (an ASSETID field's file) may have (default 262144000, 250 MiB); a larger upload answers 413.")
    var maxAssetBytes: Int64?

    @Option(
        name: .customLong("postgres-replica"),
        help: ArgumentHelp(
            "A PostgreSQL streaming replica of --postgres that serves lookups, queries and pages of zone changes when it has caught up (else the primary answers). Repeatable; or CLOUDSTORE_POSTGRES_REPLICAS=url,url, or \"postgresReplicas\" in the config file.",
            valueName: "url"))
    var postgresReplicas: [String] = []

    @Option(help: ArgumentHelp(
        "How an instance on PostgreSQL hears other instances' changes: listen (LISTEN/NOTIFY, at once; the default) or poll (reads the databases its long polls wait on every --notifications-poll-interval: behind a transaction pooler with no way past it, or on an engine without LISTEN).",
        valueName: "listen|poll"))
    var notifications: String?

    @Option(help: "Seconds between the polls of --notifications poll (default 0.1): the longest a change waits before it reaches a long poll on another instance.")
    var notificationsPollInterval: Double?

    @Flag(help: "Serve the read-only web console under /console (containers, users, zones, records, schema, recent requests); it needs the operator token.")
    var console = false

    @OptionGroup public var global: GlobalOptions

    public init() {}

    public func validate() throws {
        if let port, !(0...65535).contains(port) {
            throw ValidationError("--port must be 0 to 65535 (0 picks a free one); it is \(port)")
        }
        if let rateLimit, !(rateLimit > 0) { throw ValidationError("--rate-limit must be above 0") }
        for key in serverKeys { _ = try Self.splitServerKey(key) }
    }

    public func run(in context: CommandContext) async throws {
        let settings = try await ServeSettings.resolve(
            options: commandLineOptions, environment: context.environment, configFile: config)
        let storage: ServerConfiguration.Storage =
            settings.postgres.map { .postgres(url: $0) }
            ?? .sqlite(directory: URL(fileURLWithPath: settings.data).standardizedFileURL.path)
        var configuration = ServerConfiguration(
            host: settings.host, port: settings.port, storage: storage, containers: Set(settings.containers),
            users: try settings.tokens.map(Self.loadTokens) ?? [:],
            serverKeys: try Self.loadServerKeys(settings.serverKeys.map(Self.splitServerKey)),
            apiTokens: try settings.apiTokens.map { try Self.loadAPITokens($0, containers: Set(settings.containers)) } ?? [:],
            signInUsers: try settings.signInUsers.map(Self.loadSignInUsers), operatorToken: settings.operatorToken, limits: settings.limits, console: settings.console,
            logger: context.logger("server"))
        configuration.changeNotifications = settings.changeNotifications
        configuration.postgresReplicas = settings.postgresReplicas
        let logger = context.logger("server")
        let server = try await CloudServer.start(
            configuration: configuration, shutdownSignals: context.handlesSignals ? [.sigterm, .sigint] : [])
        context.output.print("cloudstore: listening on http://\(settings.host):\(server.port) (storage: \(storage))")
        let reloading = Task {
            guard context.handlesSignals else { return }
            for await _ in await UnixSignalsSequence(trapping: .sighup) {
                Self.reloadTokens(settings.tokens, into: server, logger: logger)
                if let path = settings.apiTokens {
                    Self.reloadAPITokens(path, containers: Set(settings.containers), into: server, logger: logger)
                }
                if let path = settings.signInUsers {
                    Self.reloadSignInUsers(path, into: server, logger: logger)
                }
            }
        }
        defer { reloading.cancel() }
        try await withTaskCancellationHandler {
            try await server.waitUntilStopped()
        } onCancel: {
            Task { try? await server.shutdown() }
        }
    }

    /// On SIGHUP: reads the tokens file again and replaces the users.
    static func reloadTokens(_ path: String?, into server: CloudServer, logger: Logger) {
        guard let path else {
            logger.warning("SIGHUP: no tokens file to reload (start with --tokens to add users)")
            return
        }
        reload(
            path, logger: logger, reloaded: "tokens reloaded", failed: "tokens not reloaded; the previous tokens stay in effect",
            load: loadTokens, count: { ("users", Set($0.values).count) }, into: server.replaceUsers)
    }

    /// On SIGHUP: reads the API tokens file again and replaces the API tokens.
    static func reloadAPITokens(_ path: String, containers: Set<String>, into server: CloudServer, logger: Logger) {
        reload(
            path, logger: logger, reloaded: "API tokens reloaded", failed: "API tokens not reloaded; the previous ones stay in effect",
            load: { try loadAPITokens($0, containers: containers) }, count: { ("tokens", $0.values.reduce(0) { $0 + $1.count }) },
            into: server.replaceAPITokens)
    }

    /// On SIGHUP: reads the sign-in users file again and replaces the sign-in users, their secret
    /// and the allowed redirects.
    static func reloadSignInUsers(_ path: String, into server: CloudServer, logger: Logger) {
        reload(
            path, logger: logger, reloaded: "sign-in users reloaded",
            failed: "sign-in users not reloaded; the previous ones stay in effect", load: loadSignInUsers,
            count: { ("users", $0.users.count) }, into: server.replaceSignInUsers)
    }

    /// Reads a file again and hands what it holds to the server, keeping every connection and
    /// request in flight; a file that cannot be read, or that the server refuses, keeps the
    /// previous values, with an error line.
    private static func reload<Value>(
        _ path: String, logger: Logger, reloaded: Logger.Message, failed: Logger.Message, load: (String) throws -> Value,
        count: (Value) -> (name: String, count: Int), into replace: (Value) throws -> Void
    ) {
        do {
            let value = try load(path)
            try replace(value)
            let (name, number) = count(value)
            logger.notice(reloaded, metadata: ["file": "\(path)", "\(name)": "\(number)"])
        } catch {
            logger.error(failed, metadata: ["error": "\(error)"])
        }
    }

    /// The options given on the command line, as settings.
    private var commandLineOptions: [ServeSettings.Key: ConfigContent] {
        var options: [ServeSettings.Key: ConfigContent] = [:]
        options[.host] = host.map { .string($0) }
        options[.port] = port.map { .int($0) }
        options[.data] = data.map { .string($0) }
        options[.postgres] = postgres.map { .string($0) }
        options[.tokens] = tokens.map { .string($0) }
        options[.apiTokens] = apiTokens.map { .string($0) }
        options[.signInUsers] = signInUsers.map { .string($0) }
        options[.containers] = containers.isEmpty ? nil : .stringArray(containers)
        options[.serverKeys] = serverKeys.isEmpty ? nil : .stringArray(serverKeys)
        options[.operatorTokenFile] = operatorTokenFile.map { .string($0) }
        options[.rateLimit] = rateLimit.map { .double($0) }
        options[.idleTimeout] = idleTimeout.map { .double($0) }
        options[.bodyTimeout] = bodyTimeout.map { .double($0) }
        options[.maxConnections] = maxConnections.map { .int($0) }
        options[.maxAssetBytes] = maxAssetBytes.map { .int(Int($0)) }
        options[.console] = console ? .bool(true) : nil
        options[.postgresReplicas] = postgresReplicas.isEmpty ? nil : .stringArray(postgresReplicas)
        options[.notifications] = notifications.map { .string($0) }
        options[.notificationsPollInterval] = notificationsPollInterval.map { .double($0) }
        return options
    }

    /// Takes `--container ID` and `--container=ID` out of a `serve` command line, so that
    /// ``CloudStoreCommand`` hands ArgumentParser only the rest: ArgumentParser removes each
    /// argument it parses with a scan of those left, which makes a long command line quadratic
    /// (1,000 containers took 1.6 s to parse in a debug build, 10 took 0.02 s). What it cannot be
    /// sure of stays for ArgumentParser to read or refuse: a value that is empty or looks like an
    /// option, and everything after `--`. Other commands' arguments are answered as they are.
    static func separatingContainers(_ arguments: [String]) -> (arguments: [String], containers: [String]) {
        guard arguments.first == configuration.commandName else { return (arguments, []) }
        let option = "--container"
        var rest: [String] = []
        var containers: [String] = []
        rest.reserveCapacity(arguments.count)
        var index = arguments.startIndex
        while index < arguments.endIndex {
            let argument = arguments[index]
            if argument == "--" {
                rest += arguments[index...]
                break
            }
            if argument == option, index + 1 < arguments.endIndex, let value = arguments[index + 1].nonOption {
                containers.append(value)
                index += 2
                continue
            }
            if argument.hasPrefix(option + "="), let value = String(argument.dropFirst(option.count + 1)).nonOption {
                containers.append(value)
            } else {
                rest.append(argument)
            }
            index += 1
        }
        return (rest, containers)
    }

    /// `ID=PEMFILE` as its parts.
    static func splitServerKey(_ argument: String) throws -> (id: String, file: String) {
        guard let equals = argument.firstIndex(of: "="), equals != argument.startIndex,
            equals != argument.index(before: argument.endIndex)
        else { throw ValidationError("a server key is given as ID=PEMFILE; \"\(argument)\" is not") }
        return (id: String(argument[..<equals]), file: String(argument[argument.index(after: equals)...]))
    }

    /// Reads a tokens file: a JSON object of bearer token → userRecordName.
    static func loadTokens(_ path: String) throws -> [String: String] {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw CommandError("cannot read the tokens file \(path): \(error.localizedDescription)")
        }
        guard let users = try? JSONDecoder().decode([String: String].self, from: data) else {
            throw CommandError(
                "the tokens file \(path) is not a JSON object of strings like {\"<token>\": \"_alice\"}")
        }
        if let bad = users.first(where: { $0.key.isEmpty || $0.value.isEmpty }) {
            throw CommandError(
                "the tokens file \(path) has an empty token or user (user \"\(bad.value)\"): give every token a user")
        }
        return users
    }

    /// Reads an API tokens file: container → name → token, for containers this server serves.
    static func loadAPITokens(_ path: String, containers: Set<String>) throws -> [String: [String: String]] {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw CommandError("cannot read the API tokens file \(path): \(error.localizedDescription)")
        }
        guard let tokens = try? JSONDecoder().decode([String: [String: String]].self, from: data) else {
            throw CommandError(
                "the API tokens file \(path) is not a JSON object like {\"iCloud.com.example.notes\": {\"website\": \"<token>\"}}")
        }
        if let container = tokens.keys.sorted().first(where: { !containers.contains($0) }) {
            throw CommandError(
                "the API tokens file \(path) has tokens for container \(container), which this server does not serve: declare it with --container, or remove its tokens")
        }
        for (container, names) in tokens where names.contains(where: { $0.key.isEmpty || $0.value.isEmpty }) {
            throw CommandError(
                "the API tokens file \(path) has an empty name or token for container \(container): give each token a name and a secret")
        }
        return tokens
    }

    /// Reads a sign-in users file (``SignInUsers``), refusing one the server could not use (a short
    /// secret, a bad entry) with a line that names the file and the fix.
    static func loadSignInUsers(_ path: String) throws -> SignInUsers {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw CommandError("cannot read the sign-in users file \(path): \(error.localizedDescription)")
        }
        let users: SignInUsers
        do {
            users = try JSONDecoder().decode(SignInUsers.self, from: data)
        } catch {
            throw CommandError(
                "the sign-in users file \(path) is not a JSON object like {\"secret\": \"…\", \"allowedRedirects\": [\"https://app.example.com\"], \"users\": [<entries of cloudstore hash-password>]} (\(WireCoding.describe(error)))")
        }
        if let problem = users.problem { throw CommandError("the sign-in users file \(path): \(problem)") }
        return users
    }

    /// Reads each key's PEM file: key ID → PEM.
    static func loadServerKeys(_ arguments: [(id: String, file: String)]) throws -> [String: String] {
        var keys: [String: String] = [:]
        for (id, file) in arguments {
            do {
                keys[id] = try String(contentsOfFile: file, encoding: .utf8)
            } catch {
                throw CommandError("cannot read the server key file \(file) of key \(id): \(error.localizedDescription)")
            }
        }
        return keys
    }
}

extension String {
    /// The string, unless it is empty or starts with `-` (then ArgumentParser takes it for an option).
    fileprivate var nonOption: String? { isEmpty || hasPrefix("-") ? nil : self }
}
