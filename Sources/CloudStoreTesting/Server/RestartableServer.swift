import CloudStoreServer
import CloudStoreWire
import Foundation
import Synchronization

/// A CloudStore server on a data directory of its own that a test can kill and start again in the
/// middle of a run, on the same port when the port is still free, so clients keep their URL.
///
/// In this process (``Kind/inProcess``, a ``TestServer``) a kill is a shutdown that lets requests in
/// flight finish; as a child process (``Kind/childProcess``, `cloudstore serve`) it is SIGKILL, so
/// nothing gets to finish. Put a ``FaultProxy`` in front (`FaultProxy.start { server.baseURL }`) to
/// give clients an address that survives even a restart on another port.
///
/// ```swift
/// let server = try await RestartableServer.start(.childProcess)
/// // ... clients talk to server.baseURL ...
/// await server.kill()             // SIGKILL: no graceful anything
/// try await server.restart()      // same data, same port if it is free
/// try await server.shutdown()     // stops it and removes the data directory
/// ```
public final class RestartableServer: Sendable {
    public enum Kind: Sendable, Hashable, CustomStringConvertible {
        /// A ``TestServer`` in this process; a kill is a graceful shutdown.
        case inProcess
        /// `cloudstore serve` as a child process (``ServerProcess``); a kill is SIGKILL.
        case childProcess

        public var description: String {
            switch self {
            case .inProcess: "in-process"
            case .childProcess: "child process"
            }
        }
    }

    private enum Running {
        case inProcess(TestServer)
        case childProcess(ServerProcess)
        case stopped
    }

    private struct State {
        var running: Running
        var baseURL: URL
        var starts = 1
    }

    public let kind: Kind
    /// Where the server keeps its SQLite files, across restarts.
    public let dataDirectory: URL
    /// Token → userRecordName.
    public let users: [String: String]
    /// The containers the server serves.
    public let containers: Set<String>
    private let root: URL
    private let state: Mutex<State>

    private init(
        kind: Kind, root: URL, users: [String: String], containers: Set<String>, running: Running, baseURL: URL
    ) {
        self.kind = kind
        self.root = root
        self.dataDirectory = root.appendingPathComponent("data", isDirectory: true)
        self.users = users
        self.containers = containers
        self.state = Mutex(State(running: running, baseURL: baseURL))
    }

    /// Starts a server on a new temporary data directory, serving `containers`.
    public static func start(
        _ kind: Kind, users: [String: String] = TestServer.defaultUsers,
        containers: Set<String> = TestServer.defaultContainers
    ) async throws -> RestartableServer {
        let root = FileManager.default.temporaryDirectory
            .appendingPathComponent("cloudstore-restartable-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try WireCoding.encode(users).write(to: root.appendingPathComponent("tokens.json"))
        do {
            let (running, url) = try await launch(kind, root: root, users: users, containers: containers, port: 0)
            return RestartableServer(
                kind: kind, root: root, users: users, containers: containers, running: running, baseURL: url)
        } catch {
            try? FileManager.default.removeItem(at: root)
            throw error
        }
    }

    private static func launch(
        _ kind: Kind, root: URL, users: [String: String], containers: Set<String>, port: Int
    ) async throws -> (Running, URL) {
        let data = root.appendingPathComponent("data", isDirectory: true)
        switch kind {
        case .inProcess:
            let server = try await TestServer.start(
                users: users, containers: containers, storage: .sqlite(directory: data), port: port)
            return (.inProcess(server), server.baseURL)
        case .childProcess:
            let child = try await ServerProcess.launch(
                ["--data", data.path, "--tokens", root.appendingPathComponent("tokens.json").path]
                    + ServerProcess.containerArguments(containers), port: port)
            return (.childProcess(child), child.baseURL)
        }
    }

    /// `http://127.0.0.1:<port>` of the server now running (or last running).
    public var baseURL: URL { state.withLock { $0.baseURL } }

    /// How many times the server was started, the first start included.
    public var starts: Int { state.withLock { $0.starts } }

    /// Whether the server is running.
    public var isRunning: Bool {
        state.withLock { state in
            if case .stopped = state.running { return false }
            return true
        }
    }

    /// The token of a user.
    public func token(for userRecordName: String) -> String? {
        users.first { $0.value == userRecordName }?.key
    }

    /// Stops the server: SIGKILL for a child process, a shutdown in this process. Does nothing when
    /// it is not running.
    public func kill() async {
        let running = state.withLock { state in
            defer { state.running = .stopped }
            return state.running
        }
        switch running {
        case .inProcess(let server): try? await server.shutdown()
        case .childProcess(let child): await child.kill()
        case .stopped: break
        }
    }

    /// Kills the server if it runs, then starts it again on the same data directory, on the same
    /// port when that is free and on a new one otherwise (see ``baseURL``).
    public func restart() async throws {
        await kill()
        let port = baseURL.port ?? 0
        let (running, url): (Running, URL)
        do {
            (running, url) = try await Self.launch(kind, root: root, users: users, containers: containers, port: port)
        } catch {
            (running, url) = try await Self.launch(kind, root: root, users: users, containers: containers, port: 0)
        }
        state.withLock { state in
            state.running = running
            state.baseURL = url
            state.starts += 1
        }
    }

    /// Stops the server (gracefully) and removes its data directory.
    public func shutdown() async throws {
        let running = state.withLock { state in
            defer { state.running = .stopped }
            return state.running
        }
        defer { try? FileManager.default.removeItem(at: root) }
        switch running {
        case .inProcess(let server): try await server.shutdown()
        case .childProcess(let child): await child.terminate()
        case .stopped: break
        }
    }
}
