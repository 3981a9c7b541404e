import CloudStoreWire
import Logging
import Testing

@testable import CloudStoreServer

/// `--notifications poll`: which long polls a round wakes (``ChangePoll``), the partitions it reads
/// from the keys waiters subscribe with, and the URL that says a transaction pooler is in front.
@Suite("Change notifications by polling, and transaction pooling")
struct ChangePollTests {
    @Test func rounds_wakeWhatIsNewToThemOrMoved_andForgetWhatNobodyWaitsOn() {
        var poll = ChangePoll()
        // new to the rounds: woken once (a change may have come between the waiter's read and this round)
        #expect(poll.round(watched: ["a", "b"], sequences: ["a": 4]) == ["a", "b"])
        // unchanged; b has no row yet and stays 0
        #expect(poll.round(watched: ["a", "b"], sequences: ["a": 4]) == [])
        // a moved, b got its first row
        #expect(poll.round(watched: ["a", "b"], sequences: ["a": 5, "b": 1]) == ["a", "b"])
        // nobody waits on b any more: forgotten
        #expect(poll.round(watched: ["a"], sequences: ["a": 5]) == [])
        #expect(poll.seen == ["a": 5])
        // b watched again: new to the rounds again, though its sequence is the one seen before
        #expect(poll.round(watched: ["a", "b"], sequences: ["a": 5, "b": 1]) == ["b"])
        // nobody waits: nothing read, nothing kept
        #expect(poll.round(watched: [], sequences: [:]) == [])
        #expect(poll.seen.isEmpty)
    }

    @Test(arguments: [
        DatabasePartition(container: "iCloud.com.example", environment: .development, scope: .private, owner: "_alice"),
        DatabasePartition(container: "iCloud.a", environment: .production, scope: .shared, owner: "_bob/with/slashes"),
        DatabasePartition(container: "iCloud.a", environment: .production, scope: .public, owner: DatabasePartition.publicOwner),
    ])
    func partitionKey_readsBackAsThePartition(_ partition: DatabasePartition) {
        #expect(DatabasePartition(key: partition.key) == partition)
    }

    @Test(arguments: ["", "iCloud.a", "iCloud.a/staging/private/_a", "iCloud.a/development/everyone/_a"])
    func textThatIsNoPartitionKey_readsAsNone(_ key: String) {
        #expect(DatabasePartition(key: key) == nil)
    }

    @Test func url_saysWhetherATransactionPoolerIsInFrontAndHowToGoPastIt() throws {
        let direct = try PostgresURL("postgres://u@db:5432/cloudstore?schema=s")
        #expect(!direct.transactionPooling)
        #expect(direct.direct! == ("db", 5432))

        let pooledOnly = try PostgresURL("postgres://u@bouncer:6432/cloudstore?pool_mode=transaction")
        #expect(pooledOnly.transactionPooling)
        #expect(pooledOnly.direct == nil)

        let pooled = try PostgresURL("postgres://u@bouncer:6432/cloudstore?pool_mode=transaction&direct_port=5432")
        #expect(pooled.direct! == ("bouncer", 5432))
        let elsewhere = try PostgresURL("postgres://u@bouncer:6432/cloudstore?pool_mode=transaction&direct_host=db&direct_port=5433")
        #expect(elsewhere.direct! == ("db", 5433))
        #expect(try !PostgresURL("postgres://u@db/cloudstore?pool_mode=session").transactionPooling)

        #expect {
            _ = try PostgresURL("postgres://u@db/cloudstore?pool_mode=statement")
        } throws: { "\($0)".contains("pool_mode=statement") && "\($0)".contains("pool_mode=transaction") }
        #expect {
            _ = try PostgresURL("postgres://u@db/cloudstore?pool_mode=transaction&direct_port=99999")
        } throws: { "\($0)".contains("direct_port=99999") }
    }

    @Test func listenBehindAPoolerWithNoWayPastIt_isRefusedAtStart() {
        #expect {
            _ = try PostgresStorage(url: "postgres://u@127.0.0.1:1/cloudstore?pool_mode=transaction", logger: .init(label: "test"))
        } throws: { "\($0)".contains("LISTEN") && "\($0)".contains("--notifications poll") }
        #expect(throws: Never.self) {
            _ = try PostgresStorage(
                url: "postgres://u@127.0.0.1:1/cloudstore?pool_mode=transaction", logger: .init(label: "test"),
                notifications: .poll(interval: .milliseconds(100)))
        }
    }
}
