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
