import Foundation
import Synchronization

/// `cloudstore serve` as a child process on a free port, for tests that kill or signal a server or
/// run two of them.
///
/// ```swift
/// let child = try await ServerProcess.launch(
///     ["--data", dir.path, "--tokens", tokensFile.path] + ServerProcess.containerArguments())
/// // ... talk to child.baseURL ...
/// let status = await child.terminate()   // SIGTERM: graceful; or child.kill() for SIGKILL
/// ```
///
/// ``launch(users:containers:data:arguments:)`` writes the tokens file itself, and ``with(users:containers:data:_:)``
/// terminates the child when the test body is done:
///
/// ```swift
/// try await ServerProcess.with(users: TestServer.defaultUsers) { server in
///     // ... talk to server.baseURL ...
/// }
/// ```
public final class ServerProcess: Sendable {
    public struct LaunchError: Error, CustomStringConvertible {
        public var description: String
    }

    /// The port the child listens on.
    public let port: Int
    public let baseURL: URL
    /// The child's process ID.
    public var processID: Int32 { child.processID }
    private let child: ChildProcess
    private let state: SharedState
    /// The directory of the tokens file (and of the data, unless given) that
    /// ``launch(users:containers:data:arguments:)`` made; removed when this value goes away.
    private let directory: TemporaryDirectory?

    private struct State {
        var output = ""
        /// The child's exit status, once it exited and everything it printed was read: a waiter
        /// woken by the exit sees the child's last words (its error message, say).
        var exitStatus: Int32?
        /// The status the termination handler saw, before the output was read to its end.
        var terminationStatus: Int32?
        var outputEnded = false
        var exitWaiters: [CheckedContinuation<Int32, Never>] = []
        var listenWaiter: CheckedContinuation<Int, any Error>?
        var outputWaiters: [(text: String, continuation: CheckedContinuation<Void, Never>)] = []
        /// The pipe's read end, kept open for as long as this value lives: releasing it while its
        /// readability source may still be registered lets the descriptor be reused under
        /// libdispatch's feet (a crash in `_dispatch_event_loop_drain` seen in a long soak).
        var readEnd: FileHandle?

        /// Removes and answers the waiters whose text the output now contains.
        mutating func satisfiedOutputWaiters() -> [CheckedContinuation<Void, Never>] {
            let output = output
            let ready = outputWaiters.filter { output.contains($0.text) }.map(\.continuation)
            outputWaiters.removeAll { output.contains($0.text) }
            return ready
        }

        /// Once the child exited and its output was read to the end: records the exit status and
        /// answers every waiter to wake (each only once).
        mutating func finishIfExited() -> Exit? {
            guard exitStatus == nil, let status = terminationStatus, outputEnded else { return nil }
            exitStatus = status
            defer { exitWaiters = []; listenWaiter = nil; outputWaiters = [] }
            return Exit(
                status: status, output: output, exitWaiters: exitWaiters, listenWaiter: listenWaiter,
                outputWaiters: outputWaiters.map(\.continuation))
        }
    }

    private struct Exit {
        var status: Int32
        var output: String
        var exitWaiters: [CheckedContinuation<Int32, Never>]
        var listenWaiter: CheckedContinuation<Int, any Error>?
        var outputWaiters: [CheckedContinuation<Void, Never>]

        func wake() {
            for waiter in exitWaiters { waiter.resume(returning: status) }
            for waiter in outputWaiters { waiter.resume() }
            listenWaiter?.resume(throwing: LaunchError(description: "cloudstore serve exited with \(status):\n\(output)"))
        }
    }

    /// The state the pipe and termination handlers share with the awaiting side.
    private final class SharedState: Sendable {
        private let mutex = Mutex(State())

        func withLock<T>(_ body: (inout State) -> T) -> T {
            mutex.withLock { body(&$0) }
        }
    }

    private init(port: Int, child: ChildProcess, state: SharedState, directory: TemporaryDirectory?) {
        self.port = port
        self.baseURL = URL(string: "http://127.0.0.1:\(port)")!
        self.child = child
        self.state = state
        self.directory = directory
    }

    /// What the child printed so far (stdout and stderr).
    public var output: String { state.withLock { $0.output } }

    /// Launches `cloudstore serve --host 127.0.0.1 --port <port> <arguments>` and returns once it listens.
    ///
    /// ```swift
    /// let child = try await ServerProcess.launch(["--data", data.path, "--tokens", tokens.path, "--debug", "3"])
    /// ```
    ///
    /// - Parameters:
    ///   - arguments: what follows `cloudstore serve --host 127.0.0.1 --port <port>`.
    ///   - executable: the `cloudstore` binary; by default ``cloudstoreExecutable()``.
    ///   - environment: variables added to this process's environment for the child.
    ///   - port: the port to listen on; 0 (the default) picks a free one; nil passes neither
    ///     `--host` nor `--port`, for a child configured entirely by a config file and its environment.
    ///   - shellSetup: commands `/bin/sh` runs before it becomes the server (`exec`), to start it
    ///     under resource limits, e.g. `ulimit -n 256`; the child's process ID stays the same.
    public static func launch(
        _ arguments: [String], executable: URL? = nil, environment: [String: String] = [:], port: Int? = 0,
        shellSetup: String? = nil
    ) async throws -> ServerProcess {
        try await launch(
            arguments, executable: executable, environment: environment, port: port, shellSetup: shellSetup,
            keeping: nil)
    }

    /// `--container NAME` for each container, in a stable order.
    public static func containerArguments(_ containers: Set<String> = TestServer.defaultContainers) -> [String] {
        containers.sorted().flatMap { ["--container", $0] }
    }

    /// Launches `cloudstore serve` for `users` (bearer token → userRecordName) and `containers`:
    /// writes their tokens file into a temporary directory this value keeps until it goes away, and
    /// stores in `data`, or in that directory's `data` folder when `data` is nil. `arguments` come
    /// after `--data`, `--tokens` and the containers.
    ///
    /// ```swift
    /// let server = try await ServerProcess.launch(users: ["alice-token": "_alice"], arguments: ["--debug", "3"])
    /// // ... talk to server.baseURL ...
    /// await server.terminate()
    /// ```
    public static func launch(
        users: [String: String], containers: Set<String> = TestServer.defaultContainers, data: URL? = nil,
        arguments: [String] = []
    ) async throws -> ServerProcess {
        let directory = try TemporaryDirectory(prefix: "cloudstore-serve")
        let tokens = directory.file("tokens.json")
        try JSONEncoder().encode(users).write(to: tokens)
        let data = data ?? directory.file("data")
        return try await launch(
            ["--data", data.path, "--tokens", tokens.path] + containerArguments(containers) + arguments, executable: nil,
            environment: [:], port: 0, shellSetup: nil, keeping: directory)
    }

    /// Runs `body` with a child launched by ``launch(users:containers:data:arguments:)`` and terminates the
    /// child (SIGTERM) afterwards, also when `body` throws.
    ///
    /// ```swift
    /// try await ServerProcess.with(users: TestServer.defaultUsers) { server in
    ///     let device = try await TestDevice.make("A", schema: schema, server: server.baseURL)
    ///     // ...
    /// }
    /// ```
    public static func with<T>(
        users: [String: String], containers: Set<String> = TestServer.defaultContainers, data: URL? = nil,
        _ body: (ServerProcess) async throws -> T
    ) async throws -> T {
        let server = try await launch(users: users, containers: containers, data: data)
        return try await running { try await body(server) } finally: { await server.terminate() }
    }

    private static func launch(
        _ arguments: [String], executable: URL?, environment: [String: String], port: Int?, shellSetup: String?,
        keeping directory: TemporaryDirectory?
    ) async throws -> ServerProcess {
        let server = try executable ?? cloudstoreExecutable()
        let serve = ["serve"] + (port.map { ["--host", "127.0.0.1", "--port", String($0)] } ?? []) + arguments
        let (executable, arguments) =
            shellSetup.map { (URL(fileURLWithPath: "/bin/sh"), ["-c", "\($0); exec \"$0\" \"$@\"", server.path] + serve) }
            ?? (server, serve)
        let pipe = Pipe()

        let state = SharedState()
        let readEnd = pipe.fileHandleForReading
        state.withLock { $0.readEnd = readEnd }
        // A thread of its own reads the child's output with blocking reads until the end of it.
        // Not a `readabilityHandler`: its dispatch source on the pipe crashed libdispatch's event
        // loop (`_dispatch_event_loop_drain`) now and then in long soaks, as children came and went.
        let reader = Thread {
            while case let data = readEnd.availableData, !data.isEmpty {
                let (waiter, outputWaiters) = state.withLock { state -> ((CheckedContinuation<Int, any Error>, Int)?, [CheckedContinuation<Void, Never>]) in
                    state.output += String(decoding: data, as: UTF8.self)
                    let outputWaiters = state.satisfiedOutputWaiters()
                    guard let port = Self.listeningPort(in: state.output), let waiter = state.listenWaiter else {
                        return (nil, outputWaiters)
                    }
                    state.listenWaiter = nil
                    return ((waiter, port), outputWaiters)
                }
                waiter.map { $0.0.resume(returning: $0.1) }
                for waiter in outputWaiters { waiter.resume() }
            }
            state.withLock { state -> Exit? in
                state.outputEnded = true
                return state.finishIfExited()
            }?.wake()
        }
        reader.name = "cloudstore serve output"
        reader.start()
        let child = try ChildProcess.spawn(
            executable, arguments, environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
            standardOutput: .pipe(pipe), standardError: .pipe(pipe))
        Task {
            let termination = await child.waitForExit()
            state.withLock { state -> Exit? in
                state.terminationStatus = termination.status
                return state.finishIfExited()
            }?.wake()
        }
        let port = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Int, any Error>) in
            let ready = state.withLock { state -> Result<Int, any Error>? in
                if let port = Self.listeningPort(in: state.output) { return .success(port) }
                if let status = state.exitStatus {
                    return .failure(LaunchError(description: "cloudstore serve exited with \(status):\n\(state.output)"))
                }
                state.listenWaiter = continuation
                return nil
            }
            ready.map { continuation.resume(with: $0) }
        }
        return ServerProcess(port: port, child: child, state: state, directory: directory)
    }

    /// The port in the `cloudstore: listening on http://host:port ...` line.
    static func listeningPort(in output: String) -> Int? {
        guard let range = output.range(of: "listening on http://") else { return nil }
        let rest = output[range.upperBound...]
        guard let colon = rest.firstIndex(of: ":") else { return nil }
        let digits = rest[rest.index(after: colon)...].prefix { $0.isNumber }
        guard rest[rest.index(after: colon)...].dropFirst(digits.count).first?.isWhitespace == true else { return nil }
        return Int(digits)
    }

    /// Returns once the child's output contains `text` (a log line, say; start the child with
    /// `--debug 3` to see each request's progress), or once the child exits.
    public func waitForOutput(_ text: String) async {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Bool in
                if state.output.contains(text) || state.exitStatus != nil { return true }
                state.outputWaiters.append((text, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// Sends SIGTERM (graceful shutdown) and waits for the exit status.
    @discardableResult
    public func terminate() async -> Int32 {
        signal(SIGTERM)
        return await waitForExit()
    }

    /// Sends SIGKILL and waits for the process to die.
    @discardableResult
    public func kill() async -> Int32 {
        signal(SIGKILL)
        return await waitForExit()
    }

    /// Sends a signal to the child.
    public func signal(_ signal: Int32) {
        child.signal(signal)
    }

    /// Waits for the child to exit; answers its status.
    public func waitForExit() async -> Int32 {
        await withCheckedContinuation { continuation in
            let status = state.withLock { state -> Int32? in
                if let status = state.exitStatus { return status }
                state.exitWaiters.append(continuation)
                return nil
            }
            status.map { continuation.resume(returning: $0) }
        }
    }

    /// The `cloudstore` executable: `CLOUDSTORE_EXECUTABLE` when set, else the one built next to the
    /// running test bundle (`.build/<triple>/debug/cloudstore`).
    public static func cloudstoreExecutable() throws -> URL {
        if let path = ProcessInfo.processInfo.environment["CLOUDSTORE_EXECUTABLE"] {
            return URL(fileURLWithPath: path)
        }
        var candidates: [URL] = []
        for start in [Bundle.main.executableURL, URL(fileURLWithPath: CommandLine.arguments[0])].compactMap({ $0 }) {
            var directory = start.resolvingSymlinksInPath().deletingLastPathComponent()
            for _ in 0..<4 {
                candidates.append(directory.appendingPathComponent("cloudstore"))
                directory.deleteLastPathComponent()
            }
        }
        candidates.append(URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(".build/debug/cloudstore"))
        let found = candidates.first { candidate in
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: candidate.path, isDirectory: &isDirectory) && !isDirectory.boolValue
                && FileManager.default.isExecutableFile(atPath: candidate.path)
        }
        if let found {
            return found
        }
        throw LaunchError(
            description: "cannot find the cloudstore executable (looked at \(candidates.map(\.path))): run `swift build` first or set CLOUDSTORE_EXECUTABLE")
    }
}
