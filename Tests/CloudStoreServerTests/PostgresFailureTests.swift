import Testing

@testable import CloudStoreServer

/// What an operator reads when PostgreSQL refuses something (``PostgresFailure``), and which
/// refusals the layout's preparation waits out.
@Suite("PostgreSQL failures: explained and classified")
struct PostgresFailureTests {
    @Test(arguments: ["40P01", "55P03", "40001", "57P01", "57P03", "08006"])
    func conflictsAndLostConnections_areTransient(sqlState: String) {
        #expect(PostgresFailure.isTransient(sqlState: sqlState))
        #expect(PostgresFailure(doing: "x", sqlState: sqlState, message: "m").isTransient)
    }

    @Test(arguments: ["42501", "42P01", "23505", "53100", "3D000", "28P01", "42601"])
    func everythingElse_failsTheStart(sqlState: String) {
        #expect(!PostgresFailure.isTransient(sqlState: sqlState))
    }

    @Test func theMessage_namesWhatCloudStoreDid_theSQLSTATE_andEveryFieldPostgreSQLSent() {
        let failure = PostgresFailure(
            doing: "preparing the storage layout, step 11 of 22: creating index cloudstore_reference_by_target",
            sqlState: "40P01", message: "deadlock detected",
            detail: "Process 12 waits for ShareLock on relation 16390; blocked by process 13.",
            hint: "See server log for query details.")
        #expect(
            failure.description
                == "preparing the storage layout, step 11 of 22: creating index cloudstore_reference_by_target: PostgreSQL error 40P01 (deadlock_detected): deadlock detected; detail: Process 12 waits for ShareLock on relation 16390; blocked by process 13.; hint: See server log for query details.; this conflict is transient: retrying may succeed")
    }

    @Test func aMissingPrivilege_saysWhatToGrant() {
        let failure = PostgresFailure(
            doing: "preparing the storage layout, step 1 of 22: creating schema app", sqlState: "42501",
            message: "permission denied for database cloudstore")
        #expect(failure.description.contains("PostgreSQL error 42501 (insufficient_privilege): permission denied for database cloudstore"))
        #expect(failure.description.contains("grant the PostgreSQL user the privilege named"))
    }

    /// An error that is not PostgreSQL's keeps its own words and is not retried.
    @Test func anotherError_isDescribedAsItIs() {
        let failure = PostgresFailure(PostgresStorageError("the row of partition p vanished"), doing: "reading")
        #expect(failure.description == "reading: the row of partition p vanished")
        #expect(!failure.isTransient)
    }

    /// Explaining an explained failure again says what the caller was doing, and keeps the rest.
    @Test func anExplainedFailure_takesTheNewActivity() {
        let inner = PostgresFailure(doing: "inner", sqlState: "55P03", message: "canceling statement due to lock timeout")
        let outer = PostgresFailure(inner, doing: "outer")
        #expect(outer.doing == "outer" && outer.sqlState == "55P03" && outer.isTransient)
        #expect(StorageFailure.describe(inner, doing: "answering GET /readyz").hasPrefix("answering GET /readyz: PostgreSQL error 55P03"))
    }
}
