import CloudStoreServer
import Configuration
import Foundation
import SystemPackage

/// The settings of `cloudstore serve`, each read from, in order: its command-line option, its
/// environment variable (`CLOUDSTORE_` and the key in upper snake case: `containers` →
/// `CLOUDSTORE_CONTAINERS`, `maxConnections` → `CLOUDSTORE_MAX_CONNECTIONS`), the JSON file of
/// `--config`, and the default.
///
/// ```json
/// {"port": 8080, "data": "/var/lib/cloudstore", "tokens": "/etc/cloudstore/tokens.json",
///  "apiTokens": "/etc/cloudstore/api-tokens.json", "signInUsers": "/etc/cloudstore/sign-in-users.json",
///  "containers": ["iCloud.com.example.notes"], "operatorTokenFile": "/etc/cloudstore/operator-token",
///  "idleTimeout": 75, "maxConnections": 1000, "maxAssetBytes": 262144000}
/// ```
///
/// Secrets (`postgres`, a URL that may hold a password, and `operatorToken`) need never be on the
/// command line, and are never logged.
struct ServeSettings: Sendable {
    /// The keys, as in the config file.
    enum Key: String, CaseIterable {
        case host, port, data, postgres, tokens, apiTokens, signInUsers, containers, serverKeys, operatorToken
        case operatorTokenFile
        case rateLimit, idleTimeout, bodyTimeout, maxConnections, maxAssetBytes, console
        case notifications, notificationsPollInterval, postgresReplicas
    }

    var host = "127.0.0.1"
    var port = 8080
    var data = "cloudstore-data"
    var postgres: String?
    var tokens: String?
    /// The API tokens file: container → name → token.
    var apiTokens: String?
    /// The sign-in users file (``SignInUsers``): who may sign in on the sign-in page.
    var signInUsers: String?
    var containers: [String] = []
    var serverKeys: [String] = []
    var operatorToken: String?
    var rateLimit: Double?
    var limits = ServerLimits()
    /// Serves the web console under `/console`; needs the operator token.
    var console = false
    /// How the instance hears other instances' commits on PostgreSQL.
    var changeNotifications = ServerConfiguration.ChangeNotifications.listen
    /// URLs of PostgreSQL streaming replicas that serve reads.
    var postgresReplicas: [String] = []

    /// Resolves every setting. `options` holds the values given on the command line.
    static func resolve(
        options: [Key: ConfigContent], environment: [String: String], configFile: String?
    ) async throws -> ServeSettings {
        var arguments: [AbsoluteConfigKey: ConfigValue] = [:]
        for (key, content) in options {
            arguments[AbsoluteConfigKey([key.rawValue])] = ConfigValue(content, isSecret: key.isSecret)
        }
        let secretNames = Set(Key.allCases.filter(\.isSecret).map(\.environmentVariable))
        var providers: [any ConfigProvider] = [
            InMemoryProvider(name: "command line", values: arguments),
            KeyMappingProvider(
                upstream: EnvironmentVariablesProvider(
                    environmentVariables: environment.filter { $0.key.hasPrefix("CLOUDSTORE_") },
                    secretsSpecifier: .dynamic { name, _ in secretNames.contains(name.uppercased()) }),
                keyMapper: { $0.prepending(["cloudstore"]) }),
        ]
        if let configFile {
            guard FileManager.default.fileExists(atPath: configFile) else {
                throw CommandError("no config file at \(configFile): check the --config path")
            }
            try checkKeys(ofConfigFile: configFile)
            do {
                providers.append(try await FileProvider<JSONSnapshot>(filePath: FilePath(configFile)))
            } catch {
                throw notSettings(configFile)
            }
        }
        let reader = ConfigReader(providers: providers)
        func read<T>(_ key: Key, _ fetch: (ConfigKey) async throws -> T?) async throws -> T? {
            do {
                return try await fetch(ConfigKey(key.rawValue))
            } catch {
                throw CommandError(
                    "the setting \(key.rawValue) (--\(key.option), \(key.environmentVariable) or the config file) has the wrong type: \(key.expected)")
            }
        }

        var settings = ServeSettings()
        settings.host = try await read(.host) { try await reader.fetchString(forKey: $0) } ?? settings.host
        settings.port = try await read(.port) { try await reader.fetchInt(forKey: $0) } ?? settings.port
        settings.data = try await read(.data) { try await reader.fetchString(forKey: $0) } ?? settings.data
        settings.postgres = try await read(.postgres) { try await reader.fetchString(forKey: $0, isSecret: true) }
        settings.tokens = try await read(.tokens) { try await reader.fetchString(forKey: $0) }
        settings.apiTokens = try await read(.apiTokens) { try await reader.fetchString(forKey: $0) }
        settings.signInUsers = try await read(.signInUsers) { try await reader.fetchString(forKey: $0) }
        settings.containers = try await read(.containers) { try await reader.fetchStringArray(forKey: $0) } ?? []
        settings.serverKeys = try await read(.serverKeys) { try await reader.fetchStringArray(forKey: $0) } ?? []
        settings.operatorToken = try await read(.operatorToken) { try await reader.fetchString(forKey: $0, isSecret: true) }
        if settings.operatorToken == nil,
            let file = try await read(.operatorTokenFile, { try await reader.fetchString(forKey: $0) })
        {
            settings.operatorToken = try readOperatorToken(file)
        }
        settings.rateLimit = try await read(.rateLimit) { try await reader.fetchDouble(forKey: $0) }
        settings.limits.requestsPerSecondPerUser = settings.rateLimit
        if let seconds = try await read(.idleTimeout, { try await reader.fetchDouble(forKey: $0) }) {
            settings.limits.idleTimeoutSeconds = seconds
        }
        if let seconds = try await read(.bodyTimeout, { try await reader.fetchDouble(forKey: $0) }) {
            settings.limits.bodyTimeoutSeconds = seconds
        }
        if let count = try await read(.maxConnections, { try await reader.fetchInt(forKey: $0) }) {
            settings.limits.maxConnections = count
        }
        if let bytes = try await read(.maxAssetBytes, { try await reader.fetchInt(forKey: $0) }) {
            guard bytes > 0 else { throw CommandError("maxAssetBytes must be above 0; it is \(bytes)") }
            settings.limits.assetBytes = Int64(bytes)
        }
        settings.console = try await read(.console) { try await reader.fetchBool(forKey: $0) } ?? false
        settings.postgresReplicas =
            try await read(.postgresReplicas) { try await reader.fetchStringArray(forKey: $0, isSecret: true) } ?? []
        let interval = try await read(.notificationsPollInterval) { try await reader.fetchDouble(forKey: $0) }
        switch try await read(.notifications, { try await reader.fetchString(forKey: $0) }) {
        case nil, "listen":
            if interval != nil {
                throw CommandError("notificationsPollInterval is for notifications poll: pass --notifications poll too, or leave the interval out")
            }
        case "poll":
            guard let interval else {
                settings.changeNotifications = .poll(interval: ServerConfiguration.ChangeNotifications.defaultPollInterval)
                break
            }
            guard interval > 0, interval <= 60 else {
                throw CommandError("the notifications poll interval must be above 0 and at most 60 seconds; it is \(interval)")
            }
            settings.changeNotifications = .poll(interval: .milliseconds(Int64((interval * 1000).rounded(.up))))
        case let other?:
            throw CommandError("notifications \"\(other)\" is not a way the server knows: use listen (PostgreSQL LISTEN, the default) or poll")
        }
        try settings.check()
        return settings
    }

    /// The checks the command line's own validation makes, for values from anywhere.
    private func check() throws {
        guard (0...65535).contains(port) else {
            throw CommandError("port \(port) is not a port: use 0 to 65535 (0 picks a free one)")
        }
        guard !containers.isEmpty else {
            throw CommandError(
                "no containers: declare the containers this server serves with --container iCloud.com.example.notes (repeatable), CLOUDSTORE_CONTAINERS or \"containers\" in the config file")
        }
        if let rateLimit, !(rateLimit > 0) { throw CommandError("the rate limit must be above 0; it is \(rateLimit)") }
        if console, operatorToken == nil {
            throw CommandError(
                "the console needs the operator token: give it with --operator-token-file, CLOUDSTORE_OPERATOR_TOKEN or \"operatorTokenFile\" in the config file")
        }
    }

    /// Refuses a config file with a setting this command does not know (a misspelt key would
    /// otherwise be ignored without a word).
    private static func checkKeys(ofConfigFile path: String) throws {
        guard let data = FileManager.default.contents(atPath: path),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else {
            throw notSettings(path)
        }
        let known = Set(Key.allCases.map(\.rawValue))
        if let unknown = object.keys.sorted().first(where: { !known.contains($0) }) {
            throw CommandError(
                "the config file \(path) has an unknown setting \"\(unknown)\": use \(Key.allCases.map(\.rawValue).joined(separator: ", "))")
        }
    }

    private static func notSettings(_ path: String) -> CommandError {
        CommandError(
            "the config file \(path) is not a JSON object of settings like {\"containers\": [\"iCloud.com.example.notes\"]}: see `cloudstore serve --help`")
    }

    /// The operator token from its file: the first line, without surrounding whitespace.
    private static func readOperatorToken(_ path: String) throws -> String {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw CommandError("cannot read the operator token file \(path): check the path and its permissions")
        }
        let token = text.split(whereSeparator: \.isNewline).first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
        guard !token.isEmpty else { throw CommandError("the operator token file \(path) is empty: write the token in it") }
        return token
    }
}

extension ServeSettings.Key {
    var isSecret: Bool { self == .postgres || self == .operatorToken || self == .postgresReplicas }

    /// The command-line option, e.g. `max-connections`.
    var option: String {
        switch self {
        case .containers: "container"
        case .serverKeys: "server-key"
        default: rawValue.reduce(into: "") { name, character in
            if character.isUppercase { name += "-" + character.lowercased() } else { name.append(character) }
        }
        }
    }

    /// The environment variable, e.g. `CLOUDSTORE_MAX_CONNECTIONS`.
    var environmentVariable: String {
        "CLOUDSTORE_" + rawValue.reduce(into: "") { name, character in
            if character.isUppercase { name += "_" }
            name += character.uppercased()
        }
    }

    var expected: String {
        switch self {
        case .port, .maxConnections, .maxAssetBytes: "use a whole number"
        case .rateLimit, .idleTimeout, .bodyTimeout: "use a number"
        case .console: "use true or false"
        case .containers, .serverKeys: "use a list of strings (comma-separated in the environment)"
        default: "use a string"
        }
    }
}
