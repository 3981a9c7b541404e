@testable import CloudStoreServer
import CloudStoreTesting
import Foundation
import PostgresNIO
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A streaming replica of the test PostgreSQL, made by the test: `pg_basebackup -R` from the
/// primary the test URL names, started as a hot standby on a free loopback port. PostgreSQL
/// refuses to run as root: as root it runs as the `postgres` user (`runuser`).
///
/// ```swift
/// let standby = try await StandbyPostgres.start(from: url, in: root)
/// defer { standby.stop() }
/// try await standby.waitUntilCaughtUp(with: url)
/// ```
final class StandbyPostgres: Sendable {
    /// The directory of PostgreSQL's programs (the newest installed), nil when none is.
    static let binaries: String? = {
        let root = "/usr/lib/postgresql"
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        return versions.sorted { $0.compare($1, options: .numeric) == .orderedAscending }.reversed()
            .map { "\(root)/\($0)/bin" }
            .first { FileManager.default.isExecutableFile(atPath: "\($0)/pg_basebackup") }
    }()

    let port: Int
    let user: String
    let database: String
    private let directory: String
    private let bin: String
    /// `-c` options of the primary's limits.
    private let settings: String

    private init(port: Int, user: String, database: String, directory: String, bin: String, settings: String) {
        self.settings = settings
        self.port = port
        self.user = user
        self.database = database
        self.directory = directory
        self.bin = bin
    }

    /// Copies the primary `url` names and starts the copy as its streaming replica.
    static func start(from url: String, in root: TemporaryDirectory) async throws -> StandbyPostgres {
        let bin = try #require(binaries, "PostgreSQL's programs are missing: install Debian's postgresql package (.ci/run does)")
        let components = try #require(URLComponents(string: url))
        let host = try #require(components.host)
        let user = components.user ?? "postgres"
        let database = components.path.trimmingCharacters(in: ["/"])
        let directory = root.file("standby").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        chmod(root.url.path, 0o777)
        chmod(directory, 0o777)
        let port = try PgBouncer.freePort()
        // A standby must allow at least as much as its primary, or its recovery stops.
        let settings = try await withPostgres(url) { storage, connection in
            var settings: [String] = []
            for try await (name, value) in try await storage.run(
                """
                SELECT name, setting FROM pg_settings WHERE name IN
                    ('max_connections', 'max_worker_processes', 'max_wal_senders', 'max_prepared_transactions', 'max_locks_per_transaction')
                """, on: connection
            ).decode((String, String).self) {
                settings.append("-c \(name)=\(value)")
            }
            return settings.joined(separator: " ")
        }
        let standby = StandbyPostgres(
            port: port, user: user, database: database, directory: directory, bin: bin, settings: settings)
        try await standby.shell(
            """
            '\(bin)/pg_basebackup' -h \(host) -p \(components.port ?? 5432) -U \(user) -D '\(directory)/data' -R -X stream -c fast && \
            chmod 700 '\(directory)/data'
            """, doing: "copying the primary with pg_basebackup")
        try await standby.start()
        return standby
    }

    /// Starts the standby (again).
    func start() async throws {
        try await shell(
            """
            '\(bin)/pg_ctl' -D '\(directory)/data' -l '\(directory)/server.log' -w -o \
            "-c listen_addresses=127.0.0.1 -p \(port) -k '\(directory)' -c hot_standby=on \(settings)" start
            """, doing: "starting the standby")
    }

    /// Stops it at once, as a crash would (`-m immediate`).
    func stop() {
        let child = try? Self.spawn("'\(bin)/pg_ctl' -D '\(directory)/data' -m immediate -w stop", log: "\(directory)/stop.log")
        _ = child?.waitUntilExit()
    }

    /// The standby's URL for the schema `url` names (its `schema` query item kept).
    func url(like url: String) -> String {
        var components = URLComponents(string: url)!
        components.host = "127.0.0.1"
        components.port = port
        return components.string!
    }

    /// Stops replaying the primary's changes (`pg_wal_replay_pause`): the standby falls behind.
    func pauseReplay(_ url: String) async throws {
        try await withPostgres(self.url(like: url)) { storage, connection in
            try await storage.run("SELECT pg_wal_replay_pause()", on: connection)
        }
    }

    func resumeReplay(_ url: String) async throws {
        try await withPostgres(self.url(like: url)) { storage, connection in
            try await storage.run("SELECT pg_wal_replay_resume()", on: connection)
        }
    }

    /// Returns once the standby has replayed everything the primary `url` names had written when
    /// called; bounded (30 s).
    func waitUntilCaughtUp(with url: String) async throws {
        let target = try await withPostgres(url) { storage, connection in
            for try await lsn in try await storage.run("SELECT pg_current_wal_lsn()::text", on: connection).decode(String.self) {
                return lsn
            }
            return ""
        }
        for _ in 0..<300 {
            let caughtUp = try await withPostgres(self.url(like: url)) { storage, connection in
                for try await done in try await storage.run(
                    "SELECT pg_last_wal_replay_lsn() >= \(target)::pg_lsn", on: connection
                ).decode(Bool.self) {
                    return done
                }
                return false
            }
            if caughtUp { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw PgBouncerError("the standby did not replay the primary's WAL up to \(target) within 30 s")
    }

    /// Runs `script` with `/bin/sh` (as `postgres` when this process is root) and throws with its
    /// output when it fails.
    private func shell(_ script: String, doing: String) async throws {
        let log = "\(directory)/\(UUID().uuidString).log"
        let child = try Self.spawn(script, log: log)
        let termination = await child.waitForExit()
        guard termination.status == 0 else {
            let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            let server = (try? String(contentsOfFile: "\(directory)/server.log", encoding: .utf8)) ?? ""
            throw PgBouncerError("\(doing) failed (\(termination)):\n\(output.suffix(2000))\n\(server.suffix(2000))")
        }
    }

    private static func spawn(_ script: String, log: String) throws -> ChildProcess {
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        chmod(log, 0o666)
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        let arguments = getuid() == 0 ? ["-u", "postgres", "--", "/bin/sh", "-c", script] : ["-c", script]
        return try ChildProcess.spawn(
            URL(fileURLWithPath: getuid() == 0 ? "/usr/sbin/runuser" : "/bin/sh"), arguments, standardOutput: .file(output),
            standardError: .file(output))
    }
}
