import CloudStoreTesting
import CloudStoreWire
import Foundation
import Testing

@testable import CloudStoreServer

/// How many statements (each a round trip) one `records/modify` costs on PostgreSQL, by what it
/// writes: a change of the record write's script that adds one shows here. `BEGIN` and `COMMIT`
/// count; a batch costs the same whatever its number of records.
@Suite(
    "PostgreSQL: round trips of a records/modify", .serialized,
    .enabled(
        if: Backend.postgresURL != nil,
        "set CLOUDSTORE_TEST_POSTGRES_URL (bash .ci/run does) to run these"))
struct PostgresRoundTripTests {
    static let partition = DatabasePartition(container: "iCloud.test", environment: .development, scope: .private, owner: "_alice")
    static let zone = partition.zone("Notes")
    static let stamp = Record.Stamp(timestamp: Date(timeIntervalSince1970: 1_800_000_000), userRecordName: "_alice")

    static func save(_ name: String, deleteSelf targets: Set<String> = [], keys: [String]? = nil) throws -> RecordWrite {
        let content = try StoredContent(RecordContent(fields: ["title": .string(name)], created: stamp, modified: stamp))
        return RecordWrite(
            name: name, type: "Note", change: .save(content: content, fields: [:], deleteSelfTargets: targets), time: stamp.timestamp,
            uniqueKeys: keys)
    }

    static func delete(_ name: String) -> RecordWrite {
        RecordWrite(name: name, type: "Note", change: .delete, time: stamp.timestamp)
    }

    /// Writes what `decide` plans and answers how many statements that took: the `sql` lines the
    /// storage logs at trace level, one before each statement it sends.
    static func statements(
        _ storage: PostgresStorage, _ log: LogRecorder, loading names: Set<String>, cascading roots: Set<String> = [],
        _ decide: @escaping @Sendable (RecordSnapshot) throws -> RecordWritePlan
    ) async throws -> Int {
        let before = log.messages.count
        let written = try await storage.modifyRecords(
            in: zone, loading: RecordSnapshotRequest(names: names, cascadeRoots: roots), decide: { (try decide($0), ()) })
        try #require(written != nil)
        return log.messages.dropFirst(before).filter { $0.hasPrefix("trace sql sql=") }.count
    }

    @Test func eachKindOfBatch_costsTheStatementsItDidBefore() async throws {
        try await Backend.withFreshSchema { url in
            let log = LogRecorder()
            let storage = try PostgresStorage(url: url, logger: log.logger(level: .trace))
            try await storage.prepare()
            try await withThrowingDiscardingTaskGroup { group in
                group.addTask { await storage.client.run() }
                defer { group.cancelAll() }
                _ = try await storage.modifyZones([.create("Notes")], in: Self.partition)
                let names = (0..<10).map { "N-\($0)" }

                // BEGIN, the partition's lock, the context, the batch, the subscriptions, COMMIT.
                let creates = try await Self.statements(storage, log, loading: Set(names)) { _ in
                    RecordWritePlan(writes: try names.map { try Self.save($0) })
                }
                #expect(creates == 6)

                // Updates remove the records' references first.
                let updates = try await Self.statements(storage, log, loading: Set(names)) { _ in
                    RecordWritePlan(writes: try names.map { try Self.save($0, deleteSelf: $0 == "N-0" ? [] : ["N-0"]) })
                }
                #expect(updates == 7)

                // A cascade reads the referrers of each level and the rows it did not read.
                let cascade = try await Self.statements(storage, log, loading: ["N-0"], cascading: ["N-0"]) { snapshot in
                    RecordWritePlan(writes: [Self.delete("N-0")] + snapshot.deleteSelfReferrers["N-0", default: []].sorted().map(Self.delete))
                }
                #expect(cascade == 10)

                // Unique keys: their holders (and the holders' rows), then the keys replaced.
                let keyed = try await Self.statements(storage, log, loading: ["K-1"]) { snapshot in
                    guard snapshot.uniqueKeysRead.contains("k1") else { throw RecordSnapshot.MissingUniqueKeys(keys: ["k1"]) }
                    return RecordWritePlan(writes: [try Self.save("K-1", keys: ["k1"])])
                }
                #expect(keyed == 8)

                // A schema extended, a share saved with one participant whose shared database advances.
                let share = StoredShare(
                    shortGUID: "g", owner: "_alice", ownerParticipantID: "p0", publicPermission: .none,
                    participants: ["_bob": StoredParticipant(user: "_bob", participantID: "p1", permission: .readWrite, status: .accepted)])
                let shared = try await Self.statements(storage, log, loading: ["S-1"]) { snapshot in
                    var schema = snapshot.schema
                    schema.recordTypes.append(CloudSchema.RecordType(name: "Note", fields: []))
                    schema.version = (snapshot.schema.version ?? 0) + 1
                    return RecordWritePlan(
                        writes: [try Self.save("S-1")], schema: schema, share: .save(share), sharedDatabases: ["_bob"])
                }
                #expect(shared == 14)

                // Subscriptions that fire: the notifications, a fired subscription, the old ones purged
                // (the schema and the share are read now: the zone has both).
                let owner = Subscriber(container: "iCloud.test", environment: .development, scope: .private, user: "_alice")
                _ = try await storage.modifySubscriptions(
                    [
                        .save(Subscription(subscriptionID: "zone", subscriptionType: .zone, zoneID: ZoneID(zoneName: "Notes")), mustExist: false),
                        .save(Subscription(subscriptionID: "once", query: .init(recordType: "Note"), firesOnce: true), mustExist: false),
                    ], of: owner)
                let notified = try await Self.statements(storage, log, loading: Set(names)) { _ in
                    RecordWritePlan(writes: try names.map { try Self.save($0) })
                }
                #expect(notified == 12)
            }
        }
    }
}
