import ArgumentParser
import CloudStoreServer
import Foundation

/// `cloudstore serve`: runs the CloudStore server until SIGTERM or SIGINT (then shuts down
/// gracefully: in-flight requests finish).
///
/// ```sh
/// cloudstore serve --data ./data --tokens tokens.json          # SQLite, one file per container
/// cloudstore serve --postgres postgres://me@127.0.0.1/cloudstore --tokens tokens.json
/// ```
/// Prints one line once it listens: `cloudstore: listening on http://127.0.0.1:8080 (storage: ...)`.
public struct ServeCommand: CloudStoreSubcommand {
    public static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the CloudStore sync server (CloudKit Web Services JSON).",
        discussion: """
            Serves the database API of PROTOCOL.md until SIGTERM or SIGINT, then finishes the \
            requests in flight and exits. Stores in SQLite under --data (one file per container), or \
            in PostgreSQL with --postgres. Users sign in with the bearer tokens of --tokens. Prints \
            "cloudstore: listening on http://HOST:PORT (storage: ...)" once it accepts connections; \
            --debug 2 logs each request.

            Example:
              echo '{"alice-token": "_alice"}' > tokens.json
              cloudstore serve --port 8080 --data ./cloudstore-data --tokens tokens.json
            """)

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "The port to listen on; 0 picks a free one.")
    var port = 8080

    @Option(help: "The directory of the SQLite files, one per container; created when absent.")
    var data = "cloudstore-data"

    @Option(help: "A PostgreSQL URL (postgres://user:password@host:5432/database) to store there instead of SQLite.")
    var postgres: String?

    @Option(help: "A JSON file of users: {\"<bearer token>\": \"<userRecordName>\"}. Without it no user can sign in.")
    var tokens: String?

    @Option(
        name: .customLong("server-key"),
        help: ArgumentHelp(
            "A server-to-server key for the public database: a key ID and a file with its P-256 public key (PEM). Repeatable.",
            valueName: "id=pem-file"),
        transform: { argument in
            guard let equals = argument.firstIndex(of: "="), equals != argument.startIndex,
                equals != argument.index(before: argument.endIndex)
            else { throw ValidationError("use the form ID=PEMFILE") }
            return (id: String(argument[..<equals]), file: String(argument[argument.index(after: equals)...]))
        })
    var serverKeys: [(id: String, file: String)] = []

    @Option(help: "Requests per second each caller may make; above it the server answers 429.")
    var rateLimit: Double?

    @OptionGroup public var global: GlobalOptions

    public init() {}

    public func validate() throws {
        if let rateLimit, !(rateLimit > 0) { throw ValidationError("--rate-limit must be above 0") }
    }

    public func run(in context: CommandContext) async throws {
        var limits = ServerLimits()
        limits.requestsPerSecondPerUser = rateLimit
        let storage: ServerConfiguration.Storage =
            postgres.map { .postgres(url: $0) } ?? .sqlite(directory: URL(fileURLWithPath: data).standardizedFileURL.path)
        let configuration = ServerConfiguration(
            host: host, port: port, storage: storage, users: try tokens.map(Self.loadTokens) ?? [:],
            serverKeys: try Self.loadServerKeys(serverKeys), limits: limits, logger: context.logger("server"))
        let stop = StopSignal(handlingSignals: context.handlesSignals)
        let server = try await CloudServer.start(configuration: configuration)
        context.output.print("cloudstore: listening on http://\(host):\(server.port) (storage: \(storage))")
        await stop.wait()
        try await server.shutdown()
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
