import CloudStoreTesting
import CloudStoreWire
import Foundation
import Logging
import PostgresNIO
import Testing

@testable import CloudStoreServer

/// A PostgreSQL instance's start: it does not fight the traffic of the instances already serving,
/// waits out the conflicts of an upgrade, and says why when PostgreSQL refuses it.
@Suite(
    "PostgreSQL: starts beside live traffic, and why one fails", .serialized, .timeLimit(.minutes(ReliabilityRun.hangLimitMinutes)),
    .enabled(if: Backend.postgresURL != nil, "set CLOUDSTORE_TEST_POSTGRES_URL (bash .ci/run does) to run these"))
struct ServerPostgresStartTests {
    /// What the database holds before the start.
    enum Fixture: String, CaseIterable, CustomTestStringConvertible {
        /// This release's layout, recorded.
        case currentLayout
        /// The layout the releases before layout versions left: every table and index, no version.
        case previousReleasesLayout

        var testDescription: String { rawValue }
    }

    static let current = PostgresLayout(schema: "any").version

    static func configuration(_ url: String, logger: Logger? = nil) -> ServerConfiguration {
        ServerConfiguration(
            port: 0, storage: .postgres(url: url), containers: TestServer.defaultContainers, users: TestServer.defaultUsers,
            logger: logger ?? Logger(label: "start", factory: { _ in SwiftLogNoOpLogHandler() }))
    }

    /// Another transaction holds every CloudStore table in ACCESS EXCLUSIVE mode (stronger than
    /// any writer's lock) while an instance starts: it answers `/readyz` all the same, because a
    /// start on a current layout, or on the complete layout of the release before versions (which
    /// only gets the version table), touches no table. The releases before waited here: their
    /// `CREATE INDEX IF NOT EXISTS` locked each table before finding the index.
    @Test(arguments: Fixture.allCases)
    func aStart_touchesNoTable_whileAnotherTransactionLocksThemAll(fixture: Fixture) async throws {
        try await Backend.withFreshSchema { url in
            switch fixture {
            case .currentLayout:
                try await CloudServer.start(configuration: Self.configuration(url)).shutdown()
            case .previousReleasesLayout:
                try await withPostgres(url) { storage, connection in
                    for step in storage.layout.steps where step.name != PostgresLayout.versionTable {
                        for statement in step.statements(schema: storage.schemaName) {
                            try await storage.run(PostgresQuery(unsafeSQL: statement), on: connection)
                        }
                    }
                }
            }
            try await withPostgres(url) { storage, connection in
                try await storage.run("BEGIN", on: connection)
                for step in storage.layout.steps where step.name != PostgresLayout.versionTable {
                    guard case .table(let name, _) = step.object else { continue }
                    try await storage.run(
                        PostgresQuery(unsafeSQL: "LOCK TABLE \"\(storage.schemaName)\".\(name) IN ACCESS EXCLUSIVE MODE"), on: connection)
                }
                let start = Task { try await CloudServer.start(configuration: Self.configuration(url)) }
                let startedInTime = await finishes(start, within: .seconds(10))
                let readyInTime = startedInTime ? (try? await waitUntilReady(start.value.baseURL, within: .seconds(5))) != nil : false
                try await storage.run("ROLLBACK", on: connection)
                try await start.value.shutdown()
                #expect(startedInTime, "the start waited for a lock on a CloudStore table")
                #expect(readyInTime, "/readyz did not answer while the tables were locked")
                #expect(try await storage.recordedLayoutVersion(connection) == Self.current)
            }
        }
    }

    /// An upgrade step that cannot get its lock within the lock timeout (PostgreSQL: 55P03) is
    /// tried again, and the start succeeds once the lock is free, rather than failing.
    @Test func anUpgradeStepThatCannotGetItsLock_isTriedAgainUntilItCan() async throws {
        let keyIndexStep = try #require(PostgresLayout(schema: "any").steps.firstIndex { $0.name == "cloudstore_record_by_key" }) + 1
        try await Backend.withFreshSchema { url in
            try await ServerPostgresRestartTests.startEarlierRelease(url, steps: keyIndexStep - 1).shutdown()
            let recorder = LogRecorder()
            try await withPostgres(url) { storage, connection in
                try await storage.run("BEGIN", on: connection)
                try await storage.run("LOCK TABLE \(unescaped: storage.table("record")) IN ACCESS EXCLUSIVE MODE", on: connection)
                let start = Task {
                    defer { recorder.logger().notice("test: the start ended") }
                    return try await CloudServer.start(configuration: Self.configuration(url, logger: recorder.logger(level: .notice)))
                }
                let first = Task { await recorder.waitFor(anyOf: ["conflicted with live traffic; retrying", "test: the start ended"]) }
                let answered = await finishes(first, within: .seconds(20))
                try await storage.run("ROLLBACK", on: connection)
                #expect(answered, "the start neither retried nor ended while the lock was held")
                #expect(await first.value == "conflicted with live traffic; retrying")
                try await start.value.shutdown()
                #expect(try await storage.recordedLayoutVersion(connection) == Self.current)
                #expect(try await storage.hasValidIndex("cloudstore_record_by_key", connection))
            }
            let retry = try #require(recorder.messages.first { $0.contains("conflicted with live traffic; retrying") })
            #expect(retry.contains("sqlState=55P03"), "\(retry)")
            #expect(retry.contains("step \(keyIndexStep) of \(Self.current): creating unique index cloudstore_record_by_key"), "\(retry)")
        }
    }

    /// While another instance holds the upgrade's advisory lock, a start that needs an upgrade
    /// waits for it, says so, and runs no step; once the lock is free it upgrades and serves.
    @Test func aStartDuringAnotherInstancesUpgrade_waitsForIt() async throws {
        try await Backend.withFreshSchema { url in
            try await ServerPostgresRestartTests.startEarlierRelease(url, steps: Self.current - 1).shutdown()
            let recorder = LogRecorder()
            try await withPostgres(url) { storage, connection in
                let lock = "\(PostgresStorage.preparationLockClass), hashtext('\(storage.schemaName)')"
                try await storage.run(PostgresQuery(unsafeSQL: "SELECT pg_advisory_lock(\(lock))"), on: connection)
                let start = Task {
                    defer { recorder.logger().notice("test: the start ended") }
                    return try await CloudServer.start(configuration: Self.configuration(url, logger: recorder.logger(level: .notice)))
                }
                let waiting = "waiting for another instance to upgrade the storage layout"
                let first = Task { await recorder.waitFor(anyOf: [waiting, "test: the start ended"]) }
                let answered = await finishes(first, within: .seconds(20))
                let versionWhileWaiting = try await storage.recordedLayoutVersion(connection)
                try await storage.run(PostgresQuery(unsafeSQL: "SELECT pg_advisory_unlock(\(lock))"), on: connection)
                #expect(answered, "the start neither waited nor ended while the lock was held")
                #expect(await first.value == waiting)
                #expect(versionWhileWaiting == Self.current - 1, "no step ran while another instance held the lock")
                try await start.value.shutdown()
                #expect(try await storage.recordedLayoutVersion(connection) == Self.current)
            }
        }
    }

    /// PostgreSQL refuses the start: the user may not create the schema, then (once it exists)
    /// may not create tables in it. `serve` exits with one line naming the SQLSTATE, PostgreSQL's
    /// message, the step, and the fix, and never the password of the URL.
    @Test func aRefusedStart_namesTheSQLSTATEAndTheStep_neverThePassword() async throws {
        try await Backend.withFreshSchema { url in
            let role = "cs_test_role_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(12)
            let password = "pw-\(UUID().uuidString)"
            var components = try #require(URLComponents(string: url))
            let schema = try #require(components.queryItems?.first { $0.name == "schema" }?.value)
            components.user = role
            components.password = password
            let limited = try #require(components.string)
            do {
                _ = try await withPostgres(url) { storage, connection in
                    try await storage.run(PostgresQuery(unsafeSQL: "CREATE ROLE \(role) LOGIN PASSWORD '\(password)'"), on: connection)
                }
            } catch {
                throw PostgresFailure(
                    error, doing: "creating a role without privileges for this test (the user of CLOUDSTORE_TEST_POSTGRES_URL needs CREATEROLE)")
            }
            do {
                let root = try TemporaryDirectory(prefix: "cloudstore-refused")
                defer { withExtendedLifetime(root) {} }
                let tokens = root.file("tokens.json")
                try WireCoding.encode(TestServer.defaultUsers).write(to: tokens)
                let arguments = ["--tokens", tokens.path] + ServerProcess.containerArguments()
                func refusal() async throws -> String {
                    do {
                        let server = try await ServerProcess.launch(arguments, environment: ["CLOUDSTORE_POSTGRES": limited])
                        await server.terminate()
                        Issue.record("cloudstore serve started as a user without privileges")
                        return ""
                    } catch let error as ServerProcess.LaunchError {
                        return error.description
                    }
                }

                let noSchema = try await refusal()
                #expect(noSchema.contains("exited with 1"), "\(noSchema)")
                #expect(
                    noSchema.contains(
                        "cloudstore: error: preparing the storage layout, step 1 of \(Self.current): creating schema \(schema): PostgreSQL error 42501 (insufficient_privilege): permission denied for database"),
                    "\(noSchema)")
                #expect(noSchema.contains("grant the PostgreSQL user the privilege named"), "\(noSchema)")
                #expect(!noSchema.contains(password))
                #expect(!noSchema.contains("Generic description"))

                try await withPostgres(url) { storage, connection in
                    try await storage.run(PostgresQuery(unsafeSQL: "CREATE SCHEMA \(schema)"), on: connection)
                    try await storage.run(PostgresQuery(unsafeSQL: "GRANT USAGE ON SCHEMA \(schema) TO \(role)"), on: connection)
                }
                let noCreate = try await refusal()
                #expect(
                    noCreate.contains(
                        "step 2 of \(Self.current): creating table cloudstore_layout: PostgreSQL error 42501 (insufficient_privilege): permission denied for schema \(schema)"),
                    "\(noCreate)")
                #expect(!noCreate.contains(password))
            } catch {
                try? await Self.drop(role, in: url)
                throw error
            }
            try await Self.drop(role, in: url)
        }
    }

    static func drop(_ role: String, in url: String) async throws {
        try await withPostgres(url) { storage, connection in
            try await storage.run(PostgresQuery(unsafeSQL: "DROP OWNED BY \(role)"), on: connection)
            try await storage.run(PostgresQuery(unsafeSQL: "DROP ROLE \(role)"), on: connection)
        }
    }
}
