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
public struct ServeCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "serve", abstract: "Run the CloudStore sync server (CloudKit Web Services JSON).")

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
        help: "A server-to-server key for the public database: ID=PEMFILE (a P-256 public key). Repeatable.")
    var serverKeys: [String] = []

    @Option(help: "Requests per second each caller may make; above it the server answers 429.")
    var rateLimit: Double?

    @Option(help: "Log detail: 0 warnings, 1 lifecycle, 2 requests, 3 records, 4 everything (or CLOUDSTORE_DEBUG).")
    var debug: Int?

    public init() {}

    public func run() async throws {
        let logger = DebugLevel.logger(label: "cloudstore.server", level: debug)
        var limits = ServerLimits()
        if let rateLimit {
            guard rateLimit > 0 else { throw ValidationError("--rate-limit must be above 0") }
            limits.requestsPerSecondPerUser = rateLimit
        }
        let storage: ServerConfiguration.Storage =
            postgres.map { .postgres(url: $0) } ?? .sqlite(directory: URL(fileURLWithPath: data).standardizedFileURL.path)
        let configuration = ServerConfiguration(
            host: host, port: port, storage: storage, users: try tokens.map(Self.loadTokens) ?? [:],
            serverKeys: try Self.loadServerKeys(serverKeys), limits: limits, logger: logger)
        let host = host
        try await CloudServer.run(configuration: configuration) { port in
            let line = "cloudstore: listening on http://\(host):\(port) (storage: \(storage))\n"
            FileHandle.standardOutput.write(Data(line.utf8))
        }
    }

    /// Reads a tokens file: a JSON object of bearer token → userRecordName.
    static func loadTokens(_ path: String) throws -> [String: String] {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw ValidationError("cannot read the tokens file \(path): \(error.localizedDescription)")
        }
        guard let users = try? JSONDecoder().decode([String: String].self, from: data) else {
            throw ValidationError(
                "the tokens file \(path) is not a JSON object of strings like {\"<token>\": \"_alice\"}")
        }
        if let bad = users.first(where: { $0.key.isEmpty || $0.value.isEmpty }) {
            throw ValidationError(
                "the tokens file \(path) has an empty token or user (user \"\(bad.value)\"): give every token a user")
        }
        return users
    }

    /// Reads `ID=PEMFILE` arguments into key ID → PEM.
    static func loadServerKeys(_ arguments: [String]) throws -> [String: String] {
        var keys: [String: String] = [:]
        for argument in arguments {
            guard let equals = argument.firstIndex(of: "="), equals != argument.startIndex else {
                throw ValidationError("--server-key \(argument) is not of the form ID=PEMFILE")
            }
            let path = String(argument[argument.index(after: equals)...])
            do {
                keys[String(argument[..<equals])] = try String(contentsOfFile: path, encoding: .utf8)
            } catch {
                throw ValidationError("cannot read the server key file \(path): \(error.localizedDescription)")
            }
        }
        return keys
    }
}
