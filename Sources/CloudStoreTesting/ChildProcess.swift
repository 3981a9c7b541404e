import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// An executable run as a child process with `posix_spawn`: what ``ServerProcess``, the crash
/// tests' helper and the CLI and browser tests start their children with.
///
/// Not Foundation's `Process`: on Linux, up to Swift 6.3.1, its `run()` copies each
/// `/proc/self/fd` entry's whole 256-byte name out of glibc's directory buffer and crashes the
/// parent (SIGSEGV in `memmove`) once about 1,360 descriptors are open, when the last entry sits at
/// the end of that buffer (swift-corelibs-foundation pull request 5472). A test run with a
/// hundred servers, PostgreSQL pools and held connections open at once gets there.
///
/// The child starts with the default signal dispositions and no blocked signal, as from a shell,
/// in a process group of its own, and with only descriptors 0, 1 and 2 open.
///
/// ```swift
/// let output = Pipe()
/// let child = try ChildProcess.spawn(executable, ["--version"], standardOutput: .pipe(output))
/// let printed = output.fileHandleForReading.readDataToEndOfFile()
/// let termination = await child.waitForExit()   // .exited(0)
/// ```
public final class ChildProcess: Sendable {
    /// What one of the child's standard descriptors is.
    public enum Stream {
        /// This process's own descriptor.
        case inherit
        /// `/dev/null`.
        case null
        /// The pipe's write end (for output) or read end (for input); this process's copy of that
        /// end is closed once the child started, so the other end sees the child's end of file.
        case pipe(Pipe)
        /// An open file.
        case file(FileHandle)
    }

    /// How the child ended.
    public enum Termination: Sendable, Equatable, CustomStringConvertible {
        /// It exited with this status.
        case exited(Int32)
        /// A signal it did not handle ended it.
        case signaled(Int32)

        /// The exit status, or the signal's number (as Foundation's `terminationStatus`).
        public var status: Int32 {
            switch self {
            case .exited(let status), .signaled(let status): status
            }
        }

        public var description: String {
            switch self {
            case .exited(let status): "exit status \(status)"
            case .signaled(let signal): "signal \(signal)"
            }
        }
    }

    public struct SpawnError: Error, CustomStringConvertible {
        public var description: String
    }

    /// The child's process ID.
    public let processID: pid_t
    private let state = Mutex(WaitState())

    private struct WaitState {
        var termination: Termination?
        var waiters: [CheckedContinuation<Termination, Never>] = []
        var blockedWaiters: [DispatchSemaphore] = []
    }

    private init(processID: pid_t) {
        self.processID = processID
    }

    /// Starts `executable` with `arguments` (not counting the program name) and, when given,
    /// exactly `environment`; by default this process's environment.
    public static func spawn(
        _ executable: URL, _ arguments: [String], environment: [String: String]? = nil, standardInput: Stream = .null,
        standardOutput: Stream = .inherit, standardError: Stream = .inherit
    ) throws -> ChildProcess {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }

        var closeAfterSpawn: [FileHandle] = []
        for (descriptor, stream) in [(Int32(0), standardInput), (1, standardOutput), (2, standardError)] {
            switch stream {
            case .inherit:
                continue
            case .null:
                try check(
                    posix_spawn_file_actions_addopen(&actions, descriptor, "/dev/null", descriptor == 0 ? O_RDONLY : O_WRONLY, 0),
                    "opening /dev/null")
            case .pipe(let pipe):
                let end = descriptor == 0 ? pipe.fileHandleForReading : pipe.fileHandleForWriting
                try check(posix_spawn_file_actions_adddup2(&actions, end.fileDescriptor, descriptor), "redirecting \(descriptor)")
                if !closeAfterSpawn.contains(where: { $0 === end }) { closeAfterSpawn.append(end) }
            case .file(let handle):
                try check(posix_spawn_file_actions_adddup2(&actions, handle.fileDescriptor, descriptor), "redirecting \(descriptor)")
            }
        }
        // After the redirections, which may read descriptors above 2.
        try check(addCloseFrom(&actions, 3), "closing the descriptors above 2")

        var everySignal = sigset_t()
        sigfillset(&everySignal)
        var noSignal = sigset_t()
        sigemptyset(&noSignal)
        posix_spawnattr_setsigdefault(&attributes, &everySignal)
        posix_spawnattr_setsigmask(&attributes, &noSignal)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP))

        let path = executable.path
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let environment = environment ?? ProcessInfo.processInfo.environment
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { envp.forEach { free($0) } }

        var processID: pid_t = 0
        let code = posix_spawn(&processID, path, &actions, &attributes, argv, envp)
        for handle in closeAfterSpawn { try? handle.close() }
        guard code == 0 else {
            throw SpawnError(description: "cannot start \(path): \(String(cString: strerror(code)))")
        }
        let child = ChildProcess(processID: processID)
        // waitpid blocks: a thread of its own per child, never a cooperative thread.
        Thread { child.reap() }.start()
        return child
    }

    /// How the child ended; nil while it runs (or before it is reaped).
    public var termination: Termination? { state.withLock { $0.termination } }

    /// Sends `signal` to the child, unless it was already reaped (its ID may be reused).
    public func signal(_ signal: Int32) {
        state.withLock { state in
            if state.termination == nil { _ = kill(processID, signal) }
        }
    }

    /// Waits for the child to end.
    @discardableResult
    public func waitForExit() async -> Termination {
        await withCheckedContinuation { continuation in
            let termination = state.withLock { state -> Termination? in
                if let termination = state.termination { return termination }
                state.waiters.append(continuation)
                return nil
            }
            termination.map { continuation.resume(returning: $0) }
        }
    }

    /// Waits for the child to end, blocking the calling thread (for synchronous callers; the
    /// thread that reaps the child wakes it directly).
    @discardableResult
    public func waitUntilExit() -> Termination {
        let woken = DispatchSemaphore(value: 0)
        if let termination = state.withLock({ state -> Termination? in
            if state.termination == nil { state.blockedWaiters.append(woken) }
            return state.termination
        }) {
            return termination
        }
        woken.wait()
        return state.withLock { $0.termination! }
    }

    private func reap() {
        var status: Int32 = 0
        var reaped: pid_t
        repeat {
            reaped = waitpid(processID, &status, 0)
        } while reaped < 0 && errno == EINTR
        let termination: Termination =
            reaped < 0 ? .exited(-1)
            : (status & 0x7F) == 0 ? .exited((status >> 8) & 0xFF) : .signaled(status & 0x7F)
        let (waiters, blockedWaiters) = state.withLock { state in
            // Set under the lock `signal(_:)` takes: no signal goes to a reused process ID.
            state.termination = termination
            defer { (state.waiters, state.blockedWaiters) = ([], []) }
            return (state.waiters, state.blockedWaiters)
        }
        for waiter in waiters { waiter.resume(returning: termination) }
        for waiter in blockedWaiters { waiter.signal() }
    }

    private static func check(_ code: Int32, _ what: String) throws {
        guard code == 0 else { throw SpawnError(description: "\(what) for a child process: \(String(cString: strerror(code)))") }
    }

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), which Swift's Glibc
    /// module does not declare.
    private static func addCloseFrom(_ actions: inout posix_spawn_file_actions_t, _ lowest: Int32) -> Int32 {
        typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else {
            return ENOSYS
        }
        return unsafeBitCast(symbol, to: AddCloseFrom.self)(&actions, lowest)
    }
}
