import CloudStoreTesting
import CloudStoreWire
import Foundation
import Logging
import PostgresNIO
import Synchronization
import Testing

@testable import CloudStoreServer

/// Which failed transactions run again, and when (``PostgresTransactionRetry``), as a table.
@Suite("PostgreSQL: which refused transactions run again")
struct PostgresTransactionRetryTests {
    @Test(arguments: [
        // sqlState, transient without one, stage, retried
        ("40001", false, PostgresTransactionRetry.Stage.beforeCommit, true),
        ("40001", false, .commit, true),
        ("40P01", false, .beforeCommit, true),
        ("57P01", false, .beforeCommit, true),
        ("57P01", false, .commit, false),
        ("08006", false, .beforeCommit, true),
        ("08006", false, .commit, false),
        ("23505", false, .beforeCommit, false),
        ("53100", false, .beforeCommit, false),
        ("55P03", false, .beforeCommit, false),
        (nil, true, .beforeCommit, true),
        (nil, true, .commit, false),
        (nil, false, .beforeCommit, false),
    ] as [(String?, Bool, PostgresTransactionRetry.Stage, Bool)])
    func mayRetry_onlyWhatCertainlyDidNotCommit(
        sqlState: String?, transient: Bool, stage: PostgresTransactionRetry.Stage, retried: Bool
    ) {
        let failure = PostgresFailure(doing: "a test", sqlState: sqlState, message: "m", isTransient: sqlState == nil ? transient : nil)
        #expect(PostgresTransactionRetry.mayRetry(failure, at: stage) == retried)
    }

    @Test func delay_doublesWithJitterUpToTheMaximum_thenGivesUp() {
        let retry = PostgresTransactionRetry(attempts: 8, firstDelay: .milliseconds(5), maximumDelay: .milliseconds(40))
        #expect(retry.delay(afterAttempt: 1, random: 1) == .milliseconds(5))
        #expect(retry.delay(afterAttempt: 1, random: 0) == .microseconds(2500))
        #expect(retry.delay(afterAttempt: 2, random: 1) == .milliseconds(10))
        #expect(retry.delay(afterAttempt: 4, random: 1) == .milliseconds(40))
        #expect(retry.delay(afterAttempt: 7, random: 1) == .milliseconds(40))
        #expect(retry.delay(afterAttempt: 8, random: 1) == nil, "eight attempts made")
    }
}

/// Refused transactions injected into a real PostgreSQL (a statement just before `COMMIT` that
/// raises the SQLSTATE, or ends the connection): a `records/modify` transaction runs again and
/// writes once; one that keeps failing, or fails in a way that is not retried, writes nothing.
@Suite(
    "PostgreSQL: refused transactions run again", .serialized,
    .enabled(if: Backend.postgresURL != nil, "set CLOUDSTORE_TEST_POSTGRES_URL (bash .ci/run does) to run these"))
struct PostgresTransactionRetryStorageTests {
    static let partition = DatabasePartition(container: "iCloud.test", environment: .development, scope: .private, owner: "_alice")
    static let zone = partition.zone("Notes")

    /// A statement before COMMIT that fails with `condition` (a PostgreSQL condition name).
    static func raise(_ condition: String) -> PostgresStorage.InjectedFault {
        .beforeCommit(PostgresQuery(unsafeSQL: "DO $$ BEGIN RAISE EXCEPTION 'injected by the test' USING ERRCODE = '\(condition)'; END $$"))
    }

    /// Saves one note through a storage whose transactions meet `fault`; answers the error, the
    /// attempts made, and the zone's records and sequence after.
    static func save(
        _ url: String, fault: @escaping @Sendable (Int) -> PostgresStorage.InjectedFault?
    ) async throws -> (error: (any Error)?, attempts: Int, names: [String], seq: Int64) {
        let attempts = Mutex(0)
        let storage = try PostgresStorage(
            url: url, logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }),
            transactionRetry: PostgresTransactionRetry(attempts: 4, firstDelay: .milliseconds(1), maximumDelay: .milliseconds(4)),
            injectedFault: { attempt in
                attempts.withLock { $0 = max($0, attempt) }
                return fault(attempt)
            })
        try await storage.prepare()
        return try await withThrowingTaskGroup(of: (error: (any Error)?, attempts: Int, names: [String], seq: Int64)?.self) { group in
            group.addTask { await storage.client.run(); return nil }
            defer { group.cancelAll() }
            let plain = try PostgresStorage(url: url, logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
            group.addTask { await plain.client.run(); return nil }
            _ = try await plain.modifyZones([.create("Notes")], in: Self.partition)
            attempts.withLock { $0 = 0 }
            let stamp = Record.Stamp(timestamp: Date(timeIntervalSince1970: 1_800_000_000), userRecordName: "_alice")
            let content = try StoredContent(RecordContent(fields: ["title": .string("once")], created: stamp, modified: stamp))
            var failure: (any Error)?
            do {
                _ = try await storage.modifyRecords(
                    in: Self.zone, loading: RecordSnapshotRequest(names: ["N-1"], cascadeRoots: []),
                    decide: { _ in
                        (RecordWritePlan(writes: [RecordWrite(name: "N-1", type: "Note", change: .save(content: content, fields: [:], deleteSelfTargets: []), time: stamp.timestamp)]), ())
                    })
            } catch {
                failure = error
            }
            let page = try #require(try await plain.zoneChanges(in: Self.zone, after: 0, limit: 10, recordTypes: nil, purgingTombstonesBefore: .distantPast))
            return (failure, attempts.withLock { $0 }, page.records.map(\.name), page.zone.seq)
        }
    }

    @Test(arguments: ["serialization_failure", "deadlock_detected"])
    func aConflictRunsTheTransactionAgain_andWritesOnce(_ condition: String) async throws {
        try await Backend.withFreshSchema { url in
            let result = try await Self.save(url) { attempt in attempt <= 2 ? Self.raise(condition) : nil }
            #expect(result.error == nil, "\(String(describing: result.error))")
            #expect(result.attempts == 3)
            #expect(result.names == ["N-1"])
            #expect(result.seq == 1, "written once: the zone's sequence moved by one")
        }
    }

    /// The backend ends itself inside the statement (`pg_sleep` notices the termination at once).
    @Test func aConnectionEndedBeforeCommit_runsTheTransactionAgainOnAnother() async throws {
        try await Backend.withFreshSchema { url in
            let result = try await Self.save(url) { attempt in
                attempt == 1 ? .beforeCommit(PostgresQuery(unsafeSQL: "SELECT pg_terminate_backend(pg_backend_pid()), pg_sleep(5)")) : nil
            }
            #expect(result.error == nil, "\(result.error.map { PostgresFailure($0, doing: "saving") }.map(String.init(describing:)) ?? "")")
            #expect(result.attempts == 2)
            #expect(result.names == ["N-1"] && result.seq == 1)
        }
    }

    /// The backend ends at its next command, the COMMIT: whether a lost COMMIT committed is unknown
    /// to the server, so it is not run again (here it had not: nothing is written twice or at all).
    @Test func aConnectionLostAtCommit_isNotRunAgain() async throws {
        try await Backend.withFreshSchema { url in
            let result = try await Self.save(url) { _ in .atCommit }
            let failure = PostgresFailure(try #require(result.error), doing: "a test")
            #expect(failure.sqlState == nil && failure.isTransient, "\(failure)")
            #expect(result.attempts == 1)
            #expect(result.names.isEmpty)
        }
    }

    @Test func aConflictThatPersists_failsAfterTheLastAttempt_andWritesNothing() async throws {
        try await Backend.withFreshSchema { url in
            let result = try await Self.save(url) { _ in Self.raise("serialization_failure") }
            let failure = PostgresFailure(try #require(result.error), doing: "a test")
            #expect(failure.sqlState == "40001")
            #expect(result.attempts == 4)
            #expect(result.names.isEmpty && result.seq == 0)
        }
    }

    @Test func anErrorThatWouldRecur_isNotRetried() async throws {
        try await Backend.withFreshSchema { url in
            let result = try await Self.save(url) { _ in Self.raise("unique_violation") }
            #expect(PostgresFailure(try #require(result.error), doing: "a test").sqlState == "23505")
            #expect(result.attempts == 1)
            #expect(result.names.isEmpty)
        }
    }
}
