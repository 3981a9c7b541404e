import CloudStoreWire
import Foundation
import Synchronization
import Testing

@testable import CloudStoreServer

/// The storage side of records/modify (``RecordWriteScript``), driven without a database: a
/// backend made of dictionaries answers its reads, and the tests read what it asked and which row
/// operations it emitted.
@Suite("Record write script")
struct RecordWriteScriptTests {
    typealias Script = RecordWriteScript
    static let partition = DatabasePartition(container: "iCloud.test", environment: .development, scope: .private, owner: "_alice")
    static let time = Date(timeIntervalSince1970: 1_800_000_000)
    static let now = Date(timeIntervalSince1970: 1_800_000_500)
    static let lifetime = AssetLifetime(tombstoneHorizon: 1_000)

    /// What a backend holds, and what it answers; what it was asked, in order, goes to `log`.
    struct Backend {
        var zone: StoredZone? = StoredZone(name: "Notes", seq: 10, dbSeq: 3, incarnation: 1, purgedThrough: 0, deleted: false)
        var rows: [String: StoredRecord] = [:]
        /// `DELETE_SELF` references: source → target.
        var deleteSelf: [(source: String, target: String)] = []
        var keyHolders: [String: String] = [:]
        var subscriptions: [(subscriber: Subscriber, subscription: Subscription)] = []
        var schema = CloudSchema.empty
        var storesSchema = true
        let log = Log()

        final class Log {
            var asked: [Asked] = []
        }

        var asked: [Asked] { log.asked }

        enum Asked: Hashable {
            case read(Script.Read)
            case write(Script.Operation)
        }

        func read(_ read: Script.Read) -> Script.Answer {
            log.asked.append(.read(read))
            switch read {
            case .snapshot(let names, _):
                guard let zone else { return .snapshot(nil) }
                return .snapshot(RecordSnapshot(zone: zone, records: rows.filter { names.contains($0.key) }, schema: schema))
            case .deleteSelfReferrers(let targets):
                return .referrers(
                    deleteSelf.filter { targets.contains($0.target) && rows[$0.source]?.isDeleted == false }.map { ($0.target, $0.source) })
            case .rows(let names):
                return .rows(rows.filter { names.contains($0.key) })
            case .uniqueKeyHolders(let keys):
                return .uniqueKeyHolders(keyHolders.filter { keys.contains($0.key) })
            case .publicSubscriptions(let types):
                return .subscriptions(subscriptions.filter { $0.subscriber.scope == .public && types.contains($0.subscription.query?.recordType ?? "") })
            case .subscriptions(let subscribers):
                return .subscriptions(subscriptions.filter { subscribers.contains($0.subscriber) })
            }
        }

        func write(_ operation: Script.Operation) -> Script.Answer {
            log.asked.append(.write(operation))
            switch operation {
            case .writeRecords: return .databaseSeq(42)
            case .storeSchema: return .schemaStored(storesSchema)
            case .advanceSharedDatabases(let users):
                return .sharedDatabaseSeqs(Dictionary(uniqueKeysWithValues: users.map { ($0, Int64(100 + $0.count)) }))
            default: return .applied
            }
        }

        var operations: [Script.Operation] {
            asked.compactMap { if case .write(let operation) = $0 { operation } else { nil } }
        }

        var reads: [Script.Read] {
            asked.compactMap { if case .read(let read) = $0 { read } else { nil } }
        }
    }

    /// Runs the script on `backend`, planning with `plan`; answers the rows written and every
    /// snapshot the plan was given.
    @discardableResult
    static func run(
        _ backend: Backend, in zone: ZoneAddress = partition.zone("Notes"), names: Set<String>, cascading roots: Set<String> = [],
        receipts: Set<String> = [], _ plan: (RecordSnapshot) throws -> RecordWritePlan
    ) throws -> (written: [StoredRecord]?, snapshots: [RecordSnapshot]) {
        var snapshots: [RecordSnapshot] = []
        let ids = NotificationIDs()
        let script = Script(
            zone: zone, loading: RecordSnapshotRequest(names: names, cascadeRoots: roots, receipts: receipts), now: now,
            assetLifetime: lifetime, newNotificationID: ids.next)
        let result = try script.run(
            deciding: { snapshot in
                snapshots.append(snapshot)
                return (try plan(snapshot), snapshots.count)
            },
            read: { backend.read($0) }, write: { backend.write($0) })
        if let result { #expect(result.0 == snapshots.count, "the decision is the last plan's") }
        return (result?.1, snapshots)
    }

    static func content(_ fields: [String: FieldValue] = [:]) -> StoredContent {
        let stamp = Record.Stamp(timestamp: time, userRecordName: "_alice")
        return try! StoredContent(RecordContent(fields: fields, created: stamp, modified: stamp))
    }

    static func live(_ name: String, seq: Int64 = 1) -> StoredRecord {
        StoredRecord(name: name, type: "Note", seq: seq, content: content(), deletedAt: nil)
    }

    static func tombstone(_ name: String) -> StoredRecord {
        StoredRecord(name: name, type: "Note", seq: 2, content: nil, deletedAt: time)
    }

    static func save(
        _ name: String, fields: [String: FieldValue] = [:], deleteSelf targets: Set<String> = [], keys: [String]? = nil
    ) -> RecordWrite {
        RecordWrite(
            name: name, type: "Note", change: .save(content: content(fields), fields: fields, deleteSelfTargets: targets), time: time,
            uniqueKeys: keys)
    }

    static func delete(_ name: String, keys: [String]? = nil) -> RecordWrite {
        RecordWrite(name: name, type: "Note", change: .delete, time: time, uniqueKeys: keys)
    }

    static let alice = Subscriber(container: "iCloud.test", environment: .development, scope: .private, user: "_alice")

    // MARK: - Reads

    @Test func aZoneThatDoesNotExist_endsTheScriptAfterItsFirstRead_withoutAPlan() throws {
        let backend = Backend(zone: nil)
        let (written, snapshots) = try Self.run(backend, names: ["B", "A"], receipts: ["r"]) { _ in
            Issue.record("planned without a zone")
            return RecordWritePlan(writes: [])
        }
        #expect(written == nil)
        #expect(snapshots.isEmpty)
        #expect(backend.asked == [.read(.snapshot(names: ["A", "B"], receipts: ["r"]))])
    }

    @Test func aPlanThatWritesNothing_writesNoRowAndReadsNoSubscription() throws {
        let backend = Backend(rows: ["A": Self.live("A")])
        let (written, _) = try Self.run(backend, names: ["A"]) { _ in RecordWritePlan(writes: []) }
        #expect(written == [])
        #expect(backend.asked == [.read(.snapshot(names: ["A"], receipts: []))])
    }

    /// Deleting A reaches B (DELETE_SELF to A) and C (to B); D refers back to A (a cycle) and E
    /// is a tombstone: the search reads each level's referrers, and the rows it did not read.
    @Test func aCascade_readsEachLevelsReferrers_andOnlyTheRowsNotReadYet() throws {
        let backend = Backend(
            rows: ["A": Self.live("A"), "B": Self.live("B"), "C": Self.live("C"), "D": Self.live("D"), "E": Self.tombstone("E")],
            deleteSelf: [("B", "A"), ("C", "B"), ("D", "C"), ("A", "D"), ("E", "A")])
        let (_, snapshots) = try Self.run(backend, names: ["A", "C"], cascading: ["A"]) { _ in RecordWritePlan(writes: []) }
        #expect(
            backend.reads == [
                .snapshot(names: ["A", "C"], receipts: []),
                .deleteSelfReferrers(of: ["A"]), .rows(named: ["B"]),
                .deleteSelfReferrers(of: ["B"]),
                .deleteSelfReferrers(of: ["C"]), .rows(named: ["D"]),
                .deleteSelfReferrers(of: ["D"]),
            ])
        let snapshot = try #require(snapshots.first)
        #expect(snapshot.deleteSelfReferrers == ["A": ["B"], "B": ["C"], "C": ["D"], "D": ["A"]])
        #expect(Set(snapshot.records.keys) == ["A", "B", "C", "D"])
    }

    /// The plan asks for unique keys: the script reads their holders, the rows of the holders it
    /// had not read, and plans again with them; a second request reads only what it asks for.
    @Test func uniqueKeysThePlanAsksFor_areReadWithTheirHoldersRows_andThePlanRunsAgain() throws {
        let backend = Backend(
            rows: ["A": Self.live("A"), "H": Self.live("H"), "N": Self.tombstone("N"), "P": Self.tombstone("P")],
            keyHolders: ["k1": "H", "k2": "A"])
        let (written, snapshots) = try Self.run(backend, names: ["A", "N", "P"]) { snapshot in
            guard snapshot.uniqueKeysRead.contains("k1") else { throw RecordSnapshot.MissingUniqueKeys(keys: ["k2", "k1", "k0"]) }
            guard snapshot.uniqueKeysRead.contains("k3") else { throw RecordSnapshot.MissingUniqueKeys(keys: ["k3"]) }
            return RecordWritePlan(writes: [Self.save("A", keys: ["k2"]), Self.save("N", keys: ["k3", "k4"]), Self.save("P")])
        }
        #expect(
            backend.reads.prefix(4) == [
                .snapshot(names: ["A", "N", "P"], receipts: []), .uniqueKeyHolders(["k0", "k1", "k2"]), .rows(named: ["H"]),
                .uniqueKeyHolders(["k3"]),
            ])
        #expect(snapshots.count == 3)
        #expect(snapshots[1].uniqueKeyHolders == ["k1": "H", "k2": "A"])
        #expect(snapshots[1].uniqueKeysRead == ["k0", "k1", "k2"])
        #expect(snapshots[1].records["H"] != nil)
        #expect(snapshots[2].uniqueKeysRead == ["k0", "k1", "k2", "k3"])
        #expect(
            backend.operations.prefix(3) == [
                .removeReferences(sources: ["A"]), .removeUniqueKeys(sources: ["A"]),
                .insertUniqueKeys([
                    .init(key: "k2", type: "Note", source: "A"), .init(key: "k3", type: "Note", source: "N"),
                    .init(key: "k4", type: "Note", source: "N"),
                ]),
            ])
        #expect(written?.map(\.name) == ["A", "N", "P"])
    }

    // MARK: - Row operations

    /// What a write drops first depends on what it replaces: a live record's references, saved
    /// assets and unique keys go (a tombstone has none, nor has a record read and not found); a
    /// record whose row was not read may be live.
    @Test(arguments: [
        (before: nil as StoredRecord?, read: true, delete: false, replaces: false),
        (before: nil, read: false, delete: false, replaces: true),
        (before: RecordWriteScriptTests.tombstone("A"), read: true, delete: false, replaces: false),
        (before: RecordWriteScriptTests.live("A"), read: true, delete: false, replaces: true),
        (before: RecordWriteScriptTests.live("A"), read: true, delete: true, replaces: true),
    ])
    func aWriteRemovesWhatItReplaces_onlyWhenItMayReplaceALiveRecord(
        before: StoredRecord?, read: Bool, delete: Bool, replaces: Bool
    ) throws {
        let backend = Backend(rows: before.map { ["A": $0] } ?? [:])
        try Self.run(backend, names: read ? ["A"] : []) { _ in
            RecordWritePlan(writes: [delete ? Self.delete("A", keys: []) : Self.save("A", keys: ["k"])])
        }
        let operations = backend.operations
        #expect(operations.contains(.removeReferences(sources: ["A"])) == replaces)
        #expect(operations.contains(.removeUniqueKeys(sources: ["A"])) == replaces)
        guard case .writeRecords(let rows)? = operations.first(where: { if case .writeRecords = $0 { true } else { false } }) else {
            Issue.record("no rows written: \(operations)")
            return
        }
        let removableAt = delete ? Self.time.addingTimeInterval(1_000) : Self.time
        #expect(rows.releasedAssets == (replaces ? [.init(record: "A", removableAt: removableAt)] : []))
    }

    /// Each write at the zone's next sequence, in plan order; references in order of target;
    /// assets the new versions hold saved, with their records; the zone's sequence after the batch.
    @Test func theRows_takeTheZonesNextSequencesInPlanOrder_withTheirReferencesAndAssets() throws {
        let asset = "0123456789abcdef0123456789abcdef"
        let photo = FieldValue.asset(
            Asset(fileChecksum: "c", size: 1, downloadURL: AssetLocation.downloadPath(Self.partition, assetID: asset)))
        let backend = Backend(rows: ["A": Self.live("A"), "B": Self.live("B", seq: 7), "C": Self.tombstone("C")])
        let (written, _) = try Self.run(backend, names: ["A", "B", "C"]) { _ in
            RecordWritePlan(writes: [Self.save("B", fields: ["photo": photo], deleteSelf: ["Z", "Y"]), Self.delete("A"), Self.save("C")])
        }
        let expected = Script.RecordRows(
            records: [
                StoredRecord(name: "B", type: "Note", seq: 11, content: Self.content(["photo": photo]), deletedAt: nil),
                StoredRecord(name: "A", type: "Note", seq: 12, content: nil, deletedAt: Self.time),
                StoredRecord(name: "C", type: "Note", seq: 13, content: Self.content(), deletedAt: nil),
            ],
            references: [.init(source: "B", target: "Y"), .init(source: "B", target: "Z")], zoneSeq: 13,
            releasedAssets: [.init(record: "B", removableAt: Self.time), .init(record: "A", removableAt: Self.time.addingTimeInterval(1_000))],
            savedAssets: [.init(record: "B", assetIDs: [asset])])
        #expect(backend.operations == [.removeReferences(sources: ["B", "A"]), .writeRecords(expected)])
        #expect(written == expected.records)
    }

    /// After the rows: the schema over the version read, the share, the shared databases; then
    /// the subscriptions of the owner's database and of each shared database raised.
    @Test func aSchemaAShareAndSharedDatabases_followTheRows_inThatOrder() throws {
        let share = StoredShare(shortGUID: "g", owner: "_alice", ownerParticipantID: "p0", publicPermission: .none, participants: [:])
        let schema = CloudSchema(recordTypes: [.init(name: "Note", fields: [])], version: 5)
        let backend = Backend(rows: ["A": Self.tombstone("A")], schema: CloudSchema(recordTypes: [], version: 4))
        try Self.run(backend, names: ["A"]) { _ in
            RecordWritePlan(writes: [Self.save("A")], schema: schema, share: .save(share), sharedDatabases: ["_carol", "_bob"])
        }
        #expect(
            backend.operations.suffix(3) == [
                .storeSchema(schema, replacing: 4), .applyShare(.save(share)), .advanceSharedDatabases(["_bob", "_carol"]),
            ])
        var bob = Self.alice
        bob.scope = .shared
        bob.user = "_bob"
        var carol = bob
        carol.user = "_carol"
        #expect(backend.reads.last == .subscriptions(of: [Self.alice, bob, carol]))
    }

    /// A schema another transaction changed since the snapshot: the script throws ``StorageRetry``,
    /// and the backend runs the transaction again.
    @Test func aSchemaNotStored_throwsStorageRetry() throws {
        let backend = Backend(rows: ["A": Self.tombstone("A")], storesSchema: false)
        #expect(throws: StorageRetry.self) {
            try Self.run(backend, names: ["A"]) { _ in
                RecordWritePlan(writes: [Self.save("A")], schema: CloudSchema(recordTypes: [], version: 1))
            }
        }
        #expect(backend.reads.count == 1, "no subscription read after a failed store")
    }

    // MARK: - Notifications

    /// Subscriptions answered in any order: the notifications are stored in order of watcher (the
    /// owner's, then each shared database by user, each user's by ID), each at the sequence the
    /// write gave its database; a `firesOnce` one that fired is deleted; old notifications go.
    @Test func notifications_areStoredInOrderOfWatcher_atTheirDatabasesSequence() throws {
        var bob = Self.alice
        bob.scope = .shared
        bob.user = "_bob"
        let zone = ZoneID(zoneName: "Notes", ownerRecordName: "_alice")
        let backend = Backend(
            rows: ["A": Self.live("A")],
            subscriptions: [
                (bob, Subscription(subscriptionID: "b-zone", subscriptionType: .zone, zoneID: zone)),
                (Self.alice, Subscription(subscriptionID: "z-once", query: .init(recordType: "Note"), firesOnce: true)),
                (Self.alice, Subscription(subscriptionID: "a-database", subscriptionType: .database)),
                (bob, Subscription(subscriptionID: "a-other-zone", subscriptionType: .zone, zoneID: ZoneID(zoneName: "Other"))),
            ])
        let share = StoredShare(
            shortGUID: "g", owner: "_alice", ownerParticipantID: "p0", publicPermission: .none,
            participants: ["_bob": StoredParticipant(user: "_bob", participantID: "p1", permission: .readWrite, status: .accepted)])
        try Self.run(backend, names: ["A", "N"]) { _ in
            RecordWritePlan(writes: [Self.save("A"), Self.save("N")], share: .save(share), sharedDatabases: ["_bob"])
        }
        let operations = backend.operations.suffix(3)
        guard case .insertNotifications(let notifications, let createdAt)? = operations.first else {
            Issue.record("no notifications: \(operations)")
            return
        }
        #expect(notifications.map(\.subscriber) == [Self.alice, Self.alice, bob])
        #expect(notifications.map(\.dbSeq) == [42, 42, 104], "the owner's database at the rows' sequence, bob's at his")
        #expect(createdAt == Self.now)
        let payloads = notifications.map(\.payload)
        #expect(payloads.map { $0.ck.database?.subscriptionID ?? $0.ck.query?.subscriptionID ?? $0.ck.zone?.subscriptionID } == ["a-database", "z-once", "b-zone"])
        #expect(payloads[1].ck.query?.recordName == "A", "a firesOnce subscription fires on the first write only")
        #expect(Array(operations.dropFirst()) == [
            .deleteSubscriptions([.init(subscriber: Self.alice, id: "z-once")]),
            .removeNotifications(createdBefore: Self.now.addingTimeInterval(-NotificationPlan.retention)),
        ])
    }

    @Test func subscriptionsThatDoNotFire_storeNothing() throws {
        let backend = Backend(
            rows: ["A": Self.tombstone("A")],
            subscriptions: [(Self.alice, Subscription(subscriptionID: "tasks", query: .init(recordType: "Task")))])
        try Self.run(backend, names: ["A"]) { _ in RecordWritePlan(writes: [Self.save("A")]) }
        #expect(backend.asked.last == .read(.subscriptions(of: [Self.alice])))
        #expect(backend.operations.count == 1)
    }

    /// The public database: everyone's subscriptions to the types written, through one read.
    @Test func aPublicZone_readsEveryonesSubscriptionsToTheTypesWritten() throws {
        let publicZone = DatabasePartition(
            container: "iCloud.test", environment: .development, scope: .public, owner: DatabasePartition.publicOwner
        ).zone(ZoneID.defaultZoneName)
        let bob = Subscriber(container: "iCloud.test", environment: .development, scope: .public, user: "_bob")
        let backend = Backend(subscriptions: [(bob, Subscription(subscriptionID: "notes", query: .init(recordType: "Note")))])
        var task = Self.save("T")
        task.type = "Task"
        try Self.run(backend, in: publicZone, names: ["A", "T"]) { _ in RecordWritePlan(writes: [Self.save("A"), task]) }
        #expect(backend.reads.last == .publicSubscriptions(recordTypes: ["Note", "Task"]))
        guard case .insertNotifications(let notifications, _)? = backend.operations.suffix(2).first else {
            Issue.record("no notifications: \(backend.operations)")
            return
        }
        #expect(notifications.map(\.subscriber) == [bob])
        #expect(notifications.map(\.dbSeq) == [42])
    }
}

/// Notification IDs in order: n1, n2, …
final class NotificationIDs: Sendable {
    private let count = Mutex(0)

    func next() -> String {
        count.withLock { count in
            count += 1
            return "n\(count)"
        }
    }
}
