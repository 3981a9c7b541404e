/// When a transaction that failed is run again, and after how long (``PostgresStorage/transaction(_:)``).
///
/// Only a failure after which nothing of the transaction can have committed is retried, so a
/// retry is the transaction's first and only effect:
/// - a serialization failure (40001) or a deadlock (40P01): PostgreSQL rolled the transaction back
///   and asks for it again (so do CockroachDB and YugabyteDB, with 40001, for any conflict);
/// - a connection lost, refused or ended by the server (57P01-57P03, class 08) before `COMMIT`
///   was sent: the server rolls back what it had.
///
/// A connection lost while `COMMIT` is on its way is not retried: the transaction may have
/// committed, and only the caller knows whether doing it again is harmless. Nothing else is
/// retried either: a constraint, a syntax error or a full disk fails the same way again.
///
/// ```swift
/// let retry = PostgresTransactionRetry()
/// retry.delay(afterAttempt: 1, random: 0.5)   // 3.75 ms: between half and all of 5 ms
/// retry.delay(afterAttempt: 6, random: 0.5)   // nil: six attempts were made, give up
/// ```
struct PostgresTransactionRetry: Sendable, Equatable {
    /// How many times a transaction runs at most, the first included.
    var attempts = 6
    /// The backoff before the second attempt; each later one doubles, up to ``maximumDelay``.
    var firstDelay: Duration = .milliseconds(5)
    var maximumDelay: Duration = .milliseconds(250)

    /// Where in the transaction a failure happened.
    enum Stage: Sendable, Equatable {
        /// Taking a connection, `BEGIN`, or the transaction's own statements.
        case beforeCommit
        /// The `COMMIT` statement.
        case commit
    }

    /// Whether a transaction that failed this way at `stage` certainly did not commit, and may
    /// therefore run again.
    static func mayRetry(_ failure: PostgresFailure, at stage: Stage) -> Bool {
        guard let sqlState = failure.sqlState else {
            // No answer: the connection failed. Before COMMIT nothing could commit.
            return failure.isTransient && stage == .beforeCommit
        }
        // PostgreSQL rolled back and asks for the transaction again. A serialization failure may
        // come at COMMIT (SERIALIZABLE, distributed engines' optimistic transactions): rolled back too.
        if sqlState == "40001" || sqlState == "40P01" { return true }
        // The server ended the connection (shutting down, terminated, a connection exception):
        // before COMMIT, nothing committed.
        let connectionEnded = ["57P01", "57P02", "57P03"].contains(sqlState) || sqlState.hasPrefix("08")
        return connectionEnded && stage == .beforeCommit
    }

    /// The wait before attempt `attempt + 1`, after `attempt` attempts failed; nil when no attempt
    /// is left. `random` (0 to 1) spreads transactions that conflicted together: the wait is
    /// between half and all of the backoff.
    func delay(afterAttempt attempt: Int, random: Double) -> Duration? {
        guard attempt < attempts else { return nil }
        return Backoff.delay(afterAttempt: attempt, first: firstDelay, maximum: maximumDelay, random: random)
    }
}

/// Exponential backoff with jitter: the wait after `attempt` failed attempts is `first` doubled
/// `attempt - 1` times, at most `maximum`, times a factor between one half and one that `random`
/// (0 to 1) picks, so that work which conflicted together does not conflict again together.
enum Backoff {
    static func delay(afterAttempt attempt: Int, first: Duration, maximum: Duration, random: Double) -> Duration {
        let doublings = min(max(attempt - 1, 0), 30)
        let backoff = min(first * (1 << doublings), maximum)
        return backoff * (0.5 + 0.5 * min(max(random, 0), 1))
    }
}
