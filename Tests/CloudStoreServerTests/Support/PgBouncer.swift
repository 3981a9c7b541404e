import CloudStoreTesting
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Debian's PgBouncer in transaction pooling mode in front of the test PostgreSQL, as a process of
/// the test: each transaction gets whichever server connection is free, so a server that kept
/// anything in a connection between transactions (a prepared statement, `search_path`, `LISTEN`,
/// a session lock) breaks through it.
///
/// ```swift
/// let bouncer = try await PgBouncer.start(in: root, postgres: url)
/// defer { bouncer.stop() }
/// let pooled = bouncer.pooledURL(url, direct: false)   // pool_mode=transaction
/// ```
final class PgBouncer: Sendable {
    /// The program: Debian's `pgbouncer`; nil when it is not installed.
    static let path: String? = ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    /// Whether the PgBouncer tests run: PostgreSQL is there, and PgBouncer is too, or CI must fail
    /// for want of it.
    static let shouldRun = Backend.postgresURL != nil && (path != nil || Chromium.isCI)

    let port: Int
    private let child: ChildProcess
    private let directory: TemporaryDirectory

    private init(port: Int, child: ChildProcess, directory: TemporaryDirectory) {
        self.port = port
        self.child = child
        self.directory = directory
    }

    /// Starts PgBouncer on a free loopback port in front of the PostgreSQL `postgres` names
    /// (trusting its user), and returns once it accepts connections. PgBouncer refuses to run as
    /// root: as root it runs as the `postgres` user (`runuser`), which Debian's PostgreSQL creates.
    static func start(in root: TemporaryDirectory, postgres url: String) async throws -> PgBouncer {
        let program = try #require(path, "PgBouncer is missing: install Debian's pgbouncer package (apt-get install -y pgbouncer; .ci/run does)")
        let components = try #require(URLComponents(string: url))
        let host = try #require(components.host)
        let user = components.user ?? "postgres"
        let directory = try TemporaryDirectory(prefix: "cloudstore-pgbouncer")
        let port = try freePort()
        let users = directory.file("users.txt")
        try "\"\(user)\" \"\"\n".write(to: users, atomically: true, encoding: .utf8)
        let configuration = directory.file("pgbouncer.ini")
        try """
            [databases]
            * = host=\(host) port=\(components.port ?? 5432)
            [pgbouncer]
            listen_addr = 127.0.0.1
            listen_port = \(port)
            unix_socket_dir =
            auth_type = trust
            auth_file = \(users.path)
            pool_mode = transaction
            max_client_conn = 1000
            default_pool_size = 8
            """.write(to: configuration, atomically: true, encoding: .utf8)
        for path in [directory.url.path, users.path, configuration.path] {
            chmod(path, path == directory.url.path ? 0o755 : 0o644)
        }
        let log = directory.file("pgbouncer.log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let output = try FileHandle(forWritingTo: log)
        let child =
            getuid() == 0
            ? try ChildProcess.spawn(
                URL(fileURLWithPath: "/usr/sbin/runuser"), ["-u", "postgres", "--", program, configuration.path],
                standardOutput: .file(output), standardError: .file(output))
            : try ChildProcess.spawn(
                URL(fileURLWithPath: program), [configuration.path], standardOutput: .file(output), standardError: .file(output))
        let bouncer = PgBouncer(port: port, child: child, directory: directory)
        // Ready when its log says it listens; bounded, with its log in the failure.
        for _ in 0..<400 {
            let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            if text.contains("listening on 127.0.0.1:\(port)") { return bouncer }
            if child.termination != nil { break }
            try await Task.sleep(for: .milliseconds(25))
        }
        bouncer.stop()
        let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        throw PgBouncerError("PgBouncer did not start listening on port \(port) within 10 s:\n\(text.suffix(2000))")
    }

    /// `url` (a test schema's) through this PgBouncer, with `pool_mode=transaction` unless
    /// `saying` is false; with `direct`, also `direct_host` and `direct_port` naming PostgreSQL itself.
    func pooledURL(_ url: String, direct: Bool, saying poolMode: Bool = true) -> String {
        var components = URLComponents(string: url)!
        let postgres = (host: components.host!, port: components.port ?? 5432)
        components.host = "127.0.0.1"
        components.port = port
        var items = components.queryItems ?? []
        if poolMode { items.append(URLQueryItem(name: "pool_mode", value: "transaction")) }
        if direct {
            items.append(URLQueryItem(name: "direct_host", value: postgres.host))
            items.append(URLQueryItem(name: "direct_port", value: String(postgres.port)))
        }
        components.queryItems = items
        return components.string!
    }

    /// What PgBouncer logged so far.
    var log: String { (try? String(contentsOf: directory.file("pgbouncer.log"), encoding: .utf8)) ?? "" }

    /// Stops PgBouncer (SIGTERM, which `runuser` passes on) and waits for it to end.
    func stop() {
        guard child.termination == nil else { return }
        child.signal(SIGTERM)
        _ = child.waitUntilExit()
    }

    /// A loopback port nothing listens on now: bound to port 0, read, and closed.
    static func freePort() throws -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw PgBouncerError("socket() failed: errno \(errno)") }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(descriptor, pointer, length) == 0 && getsockname(descriptor, pointer, &length) == 0
            }
        }
        guard bound else { throw PgBouncerError("binding a free loopback port failed: errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

struct PgBouncerError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
