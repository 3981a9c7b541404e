import CloudStoreServer
import CloudStoreTesting
import Foundation
import Logging

/// The server's storage for a benchmark.
enum Backend: String, CaseIterable {
    case sqlite = "SQLite"
    case postgres = "PostgreSQL"
}

/// The CloudStore server as a child process of the benchmark (this same executable, run as
/// `cloudstore-bench serve ...`), on a free loopback port, so the client's and the server's CPU
/// time are separate and the server's is read from `/proc/<pid>/stat`.
final class BenchServer: Sendable {
    /// Users by bearer token: `user0-token` → `_user0`, …
    static let users: [String: String] = Dictionary(
        uniqueKeysWithValues: (0..<8).map { ("user\($0)-token", "_user\($0)") })

    let process: ServerProcess
    let backend: Backend
    /// Unique per server, so a PostgreSQL database kept between runs never mixes their records.
    let containerIdentifier: String

    var url: URL { process.baseURL }

    private init(process: ServerProcess, backend: Backend, containerIdentifier: String) {
        self.process = process
        self.backend = backend
        self.containerIdentifier = containerIdentifier
    }

    static func start(_ backend: Backend, postgresURL: String?, directory: URL) async throws -> BenchServer {
        let serverDirectory = directory.appendingPathComponent("server-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: serverDirectory, withIntermediateDirectories: true)
        let tokens = serverDirectory.appendingPathComponent("tokens.json")
        try JSONEncoder().encode(users).write(to: tokens)
        let containerIdentifier = "iCloud.com.example.bench.\(UUID().uuidString.prefix(8))"
        var arguments = ["--tokens", tokens.path, "--container", containerIdentifier]
        switch backend {
        case .sqlite: arguments += ["--data", serverDirectory.appendingPathComponent("data").path]
        case .postgres:
            guard let postgresURL else { throw BenchError("the PostgreSQL backend needs --postgres URL") }
            arguments += ["--postgres", postgresURL]
        }
        let process = try await ServerProcess.launch(arguments, executable: selfExecutable)
        return BenchServer(process: process, backend: backend, containerIdentifier: containerIdentifier)
    }

    var processID: Int32 { process.processID }

    /// CPU seconds the server process has used so far.
    var cpuSeconds: Double { processCPUSeconds(of: process.processID) }

    func stop() async {
        await process.terminate()
    }

    /// This executable, to run as the server and as bootstrap children.
    static var selfExecutable: URL {
        let path = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: path)
    }

    /// `cloudstore-bench serve --host H --port P (--data DIR | --postgres URL) --tokens FILE --container ID`: what
    /// ``start(_:postgresURL:directory:)`` runs in the child. Prints the line `ServerProcess` waits
    /// for, then serves until SIGTERM or until the benchmark that started it exits.
    static func serve(_ arguments: [String]) async throws {
        func option(_ name: String) -> String? {
            guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
            return arguments[index + 1]
        }
        let storage: ServerConfiguration.Storage =
            option("--postgres").map { .postgres(url: $0) } ?? .sqlite(directory: option("--data") ?? "bench-data")
        let users = try option("--tokens").map { try JSONDecoder().decode([String: String].self, from: Data(contentsOf: URL(fileURLWithPath: $0))) } ?? [:]
        var logger = Logger(label: "cloudstore.bench.server")
        logger.logLevel = .error
        let host = option("--host") ?? "127.0.0.1"
        let server = try await CloudServer.start(
            configuration: ServerConfiguration(
                host: host, port: option("--port").flatMap(Int.init) ?? 0, storage: storage,
                containers: Set(option("--container").map { [$0] } ?? []), users: users, logger: logger))
        FileHandle.standardOutput.write(Data("cloudstore: listening on http://\(host):\(server.port) (storage: \(storage))\n".utf8))
        // SIGTERM ends the process (a benchmark's data need not survive); so does the benchmark's end.
        let parent = getppid()
        while getppid() == parent {
            try await Task.sleep(for: .milliseconds(500))
        }
        try await server.shutdown()
    }
}

/// A benchmark that cannot run as asked; the message says what to change.
struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
