import Testing

@testable import CloudStoreServer

/// Which replica serves a read and whether its answer stands (``ReplicaRouting``), driven directly.
@Suite("Read replicas: routing")
struct ReplicaRoutingTests {
    @Test(arguments: [
        // replica's sequence of the partition, primary's, may answer
        (Int64?.none, Int64?.none, true),  // the partition has no row anywhere: nothing to miss
        (5, nil, true),
        (nil, 3, false),  // the replica has not seen the partition's first write
        (4, 5, false),  // behind
        (5, 5, true),
        (6, 5, true),  // the primary moved on after its read: the replica's answer is later, never earlier
    ] as [(Int64?, Int64?, Bool)])
    func anAnswerStands_onlyFromAReplicaAtOrPastThePrimary(replica: Int64?, primary: Int64?, stands: Bool) {
        #expect(ReplicaRouting.mayAnswer(replicaSeq: replica, primarySeq: primary) == stands)
    }

    @Test func replicasTakeReadsInTurn_andOneThatFailedRestsLongerEachTime() {
        var routing = ReplicaRouting(count: 2)
        #expect(routing.next(now: 0) == 0)
        #expect(routing.next(now: 0) == 1)
        #expect(routing.next(now: 0) == 0)

        routing.record(.failed, of: 0, now: 10)
        #expect(!routing.isAvailable(0, now: 10.5))
        #expect(routing.next(now: 10.5) == 1)
        #expect(routing.next(now: 10.5) == 1, "the resting one is skipped")
        #expect(routing.isAvailable(0, now: 11))

        routing.record(.failed, of: 0, now: 11)  // second in a row: two seconds
        #expect(!routing.isAvailable(0, now: 12.9))
        #expect(routing.isAvailable(0, now: 13))

        routing.record(.failed, of: 1, now: 11)
        #expect(routing.next(now: 11.5) == nil, "every replica rests: the primary answers")

        routing.record(.served, of: 0, now: 13)
        #expect(routing.records[0] == .init(served: 1, behind: 0, failed: 2, failuresInARow: 0, restingUntil: nil))
        routing.record(.behind, of: 0, now: 13)
        #expect(routing.records[0].behind == 1)
        #expect(routing.isAvailable(0, now: 13), "behind is not broken")

        for _ in 0..<10 { routing.record(.failed, of: 1, now: 100) }
        #expect(routing.records[1].restingUntil == 100 + ReplicaRouting.longestRest)
        var none = ReplicaRouting(count: 0)
        #expect(none.next(now: 0) == nil)
    }
}
