@testable import CloudStoreServer
import CloudStoreWire
import Foundation
import Testing

/// Which notifications a records/modify produces (``NotificationPlan``), from its writes and the
/// subscriptions watching its zone.
@Suite("Notification plan")
struct NotificationPlanTests {
    let zone = DatabasePartition(container: "iCloud.test", environment: .development, scope: .private, owner: "_alice").zone("Notes")
    let alice = Subscriber(container: "iCloud.test", environment: .development, scope: .private, user: "_alice")

    func content(_ title: String) throws -> StoredContent {
        let stamp = Record.Stamp(timestamp: Date(timeIntervalSince1970: 1_000), userRecordName: "_alice")
        return try StoredContent(RecordContent(fields: ["title": .string(title)], created: stamp, modified: stamp))
    }

    func save(_ name: String, _ title: String) throws -> RecordWrite {
        RecordWrite(name: name, type: "Note", change: .save(content: try content(title), fields: [:], deleteSelfTargets: []), time: Date())
    }

    func delete(_ name: String) -> RecordWrite {
        RecordWrite(name: name, type: "Note", change: .delete, time: Date())
    }

    func plan(_ events: [RecordEvent], _ subscriptions: [Subscription], scope: DatabaseScope = .private) -> NotificationPlan {
        var subscriber = alice
        subscriber.scope = scope
        var next = 0
        return NotificationPlan(
            zone: zone, events: events, watches: subscriptions.map { SubscriptionWatch(subscriber: subscriber, subscription: $0, dbSeq: 7) }
        ) {
            next += 1
            return "n\(next)"
        }
    }

    @Test func events_tellCreatesUpdatesAndDeletes_andADeleteCarriesTheRecordAsItWas() throws {
        let live = StoredRecord(name: "L", type: "Note", seq: 1, content: try content("old"), deletedAt: nil)
        let tombstone = StoredRecord(name: "T", type: "Note", seq: 2, content: nil, deletedAt: Date())
        let events = RecordEvent.events(
            of: [try save("N", "a"), try save("N", "b"), try save("L", "new"), delete("T"), try save("T", "again"), delete("L")],
            before: ["L": live, "T": tombstone])
        #expect(events.map(\.name) == ["N", "N", "L", "T", "L"], "deleting a tombstone is no event")
        #expect(events.map(\.reason) == [.recordCreated, .recordUpdated, .recordUpdated, .recordCreated, .recordDeleted])
        #expect(events.last?.content == (try content("new")), "the delete carries the state it removed")
    }

    @Test func querySubscription_matchesTypeReasonFiltersAndZone() throws {
        let events = RecordEvent.events(of: [try save("A", "Hi"), try save("B", "Bye"), delete("A")], before: [:])
        let his = Subscription(
            subscriptionID: "his", query: .init(recordType: "Note", filterBy: [.init("title", .equals, .string("Hi"))]),
            firesOn: [.create, .delete])
        let updates = Subscription(subscriptionID: "updates", query: .init(recordType: "Note"), firesOn: [.update])
        let otherType = Subscription(subscriptionID: "tasks", query: .init(recordType: "Task"))
        var otherZone = Subscription(subscriptionID: "elsewhere", query: .init(recordType: "Note"), zoneID: ZoneID(zoneName: "Other"))
        otherZone.zoneWide = false
        let planned = plan(events, [his, updates, otherType, otherZone])
        let queries = planned.notifications.compactMap(\.payload.ck.query)
        #expect(queries.map(\.recordName) == ["A", "A"])
        #expect(queries.map(\.reason) == [.recordCreated, .recordDeleted])
        #expect(queries.allSatisfy { $0.subscriptionID == "his" && $0.zoneOwner == "_alice" && $0.database == .private })
        #expect(planned.notifications.map(\.payload.ck.notificationID) == ["n1", "n2"])
        #expect(planned.notifications.allSatisfy { $0.dbSeq == 7 })
        #expect(planned.fired.isEmpty)
    }

    @Test func zoneAndDatabaseSubscriptions_fireOncePerPlan_firesOnceIsReported() throws {
        let events = RecordEvent.events(of: [try save("A", "x"), try save("B", "y")], before: [:])
        let planned = plan(events, [
            Subscription(subscriptionID: "zone", subscriptionType: .zone, zoneID: ZoneID(zoneName: "Notes")),
            Subscription(subscriptionID: "default", subscriptionType: .zone),
            Subscription(subscriptionID: "db", subscriptionType: .database, notificationInfo: .init(alertBody: "hey", shouldSendContentAvailable: true)),
            Subscription(subscriptionID: "once", query: .init(recordType: "Note"), firesOnce: true),
        ])
        #expect(planned.notifications.compactMap(\.payload.ck.zone?.subscriptionID) == ["zone"])
        #expect(planned.notifications.compactMap(\.payload.ck.database?.subscriptionID) == ["db"])
        #expect(planned.notifications.compactMap(\.payload.ck.query?.recordName) == ["A"])
        #expect(planned.fired.map(\.subscriptionID) == ["once"])
        let database = try #require(planned.notifications.first { $0.payload.ck.database != nil })
        #expect(database.payload.aps?.alert?.body == "hey")
        #expect(database.payload.aps?.contentAvailable == 1)
        #expect(plan([], [Subscription(subscriptionID: "db", subscriptionType: .database)]).notifications.isEmpty)
    }

    @Test func sharedZoneSubscription_needsTheZonesOwner() throws {
        let events = RecordEvent.events(of: [try save("A", "x")], before: [:])
        let planned = plan(events, [
            Subscription(subscriptionID: "alices", subscriptionType: .zone, zoneID: ZoneID(zoneName: "Notes", ownerRecordName: "_alice")),
            Subscription(subscriptionID: "carols", subscriptionType: .zone, zoneID: ZoneID(zoneName: "Notes", ownerRecordName: "_carol")),
        ], scope: .shared)
        #expect(planned.notifications.compactMap(\.payload.ck.zone?.subscriptionID) == ["alices"])
        #expect(planned.notifications.first?.payload.ck.zone?.database == .shared)
    }

    @Test func rules_refuseWhatADatabaseDoesNotTake_andFillInDefaults() {
        #expect(SubscriptionRules.problem(Subscription(subscriptionID: "z", subscriptionType: .zone), in: .public) != nil)
        #expect(SubscriptionRules.problem(Subscription(subscriptionID: "q", subscriptionType: .query), in: .private)?.contains("query") == true)
        #expect(SubscriptionRules.problem(Subscription(subscriptionID: "", subscriptionType: .database), in: .private) != nil)
        let badField = Subscription(subscriptionID: "q", query: .init(recordType: "Note", filterBy: [.init("", .equals, .int64(1))]))
        #expect(SubscriptionRules.problem(badField, in: .private) != nil)
        let normalized = SubscriptionRules.normalized(
            Subscription(subscriptionID: "z", subscriptionType: .zone, query: .init(recordType: "Note"), firesOn: [.create]))
        #expect(normalized.zoneID == .default)
        #expect(normalized.query == nil && normalized.firesOn == nil)
    }
}
