import CloudStoreWire
import Foundation

/// One record change of a records/modify plan, as subscriptions see it: the record's state after
/// a create or update, its last state before a delete (which a query's filters then test).
struct RecordEvent: Sendable {
    var name: String
    var type: String
    var reason: PushNotification.Reason
    var content: StoredContent?

    /// The events of a plan's writes, in order, given the rows the plan read: a save of a record
    /// that is absent or deleted creates it, of a live one updates it; deleting a live record
    /// deletes it (deleting a tombstone is no event).
    static func events(of writes: [RecordWrite], before rows: [String: StoredRecord]) -> [RecordEvent] {
        var current = rows.mapValues(\.content)
        var events: [RecordEvent] = []
        for write in writes {
            let before = current[write.name] ?? nil
            switch write.change {
            case .save(let content, _, _):
                events.append(
                    RecordEvent(name: write.name, type: write.type, reason: before == nil ? .recordCreated : .recordUpdated, content: content))
                current[write.name] = content
            case .delete:
                guard let before else { continue }
                events.append(RecordEvent(name: write.name, type: write.type, reason: .recordDeleted, content: before))
                current[write.name] = .some(nil)
            }
        }
        return events
    }
}

/// A stored subscription a change may fire: its user, database, and the sequence the change
/// gave that user's database (the long poll answers a notification with the changes up to it).
struct SubscriptionWatch: Sendable {
    var subscriber: Subscriber
    var subscription: Subscription
    var dbSeq: Int64
}

/// A notification to store for a subscriber, at a sequence of their database.
struct PlannedNotification: Hashable, Sendable {
    var subscriber: Subscriber
    var dbSeq: Int64
    var payload: PushNotification
}

/// Which notifications one records/modify produces (WireProtocol.md §8), decided from its events
/// and the subscriptions watching its zone; the storage writes them, and deletes the `firesOnce`
/// subscriptions that fired, in the transaction of the change.
///
/// - A query subscription fires once per matching event: the record's type, a reason in its
///   `firesOn`, its filters (a delete tests the record as it was), and its zone unless `zoneWide`.
/// - A zone subscription fires once per records/modify that changed its zone.
/// - A database subscription fires once per records/modify that changed its database.
struct NotificationPlan: Sendable {
    var notifications: [PlannedNotification] = []
    /// `firesOnce` query subscriptions that fired: delete them.
    var fired: [(subscriber: Subscriber, subscriptionID: String)] = []

    init() {}

    init(zone: ZoneAddress, events: [RecordEvent], watches: [SubscriptionWatch], newID: () -> String) {
        guard !events.isEmpty else { return }
        var decoded: [Int: QueryEvaluator.Candidate] = [:]
        func candidate(_ index: Int) -> QueryEvaluator.Candidate? {
            if let candidate = decoded[index] { return candidate }
            let event = events[index]
            guard let content = try? event.content?.decoded() else { return nil }
            let candidate = QueryEvaluator.Candidate(
                row: StoredRecord(name: event.name, type: event.type, seq: 0, content: event.content, deletedAt: nil),
                content: content)
            decoded[index] = candidate
            return candidate
        }
        for watch in watches {
            let subscription = watch.subscription
            let database = PushNotification.DatabaseNumber(watch.subscriber.scope)
            var ck = PushNotification.CloudKitInfo(containerIdentifier: zone.partition.container, notificationID: "")
            func add(_ ck: PushNotification.CloudKitInfo) {
                var ck = ck
                ck.notificationID = newID()
                notifications.append(
                    PlannedNotification(
                        subscriber: watch.subscriber, dbSeq: watch.dbSeq,
                        payload: PushNotification(aps: .init(subscription.notificationInfo), ck: ck)))
            }
            switch subscription.subscriptionType {
            case .database:
                ck.database = .init(subscriptionID: subscription.subscriptionID, database: database)
                add(ck)
            case .zone:
                let watched = subscription.zoneID ?? .default
                guard watched.zoneName == zone.zoneName else { continue }
                if watch.subscriber.scope == .shared, watched.ownerRecordName != zone.partition.owner { continue }
                ck.zone = .init(
                    subscriptionID: subscription.subscriptionID, zoneName: zone.zoneName, zoneOwner: zone.partition.owner,
                    database: database)
                add(ck)
            case .query:
                guard let query = subscription.query, let evaluator = try? QueryEvaluator(query) else { continue }
                if subscription.zoneWide == false, (subscription.zoneID ?? .default).zoneName != zone.zoneName { continue }
                let firesOn = Set(subscription.firesOn ?? Subscription.FiresOn.allCases)
                for (index, event) in events.enumerated() where event.type == query.recordType {
                    guard firesOn.contains(event.reason.firesOn), let candidate = candidate(index),
                        (query.filterBy ?? []).allSatisfy({ evaluator.matches(candidate, $0) })
                    else { continue }
                    ck.query = .init(
                        subscriptionID: subscription.subscriptionID, recordName: event.name, zoneName: zone.zoneName,
                        zoneOwner: zone.partition.owner, database: database, reason: event.reason)
                    add(ck)
                    if subscription.firesOnce == true {
                        fired.append((watch.subscriber, subscription.subscriptionID))
                        break
                    }
                }
            }
        }
    }
}

extension PushNotification.Reason {
    /// The `firesOn` kind that asks for this reason.
    var firesOn: Subscription.FiresOn {
        switch self {
        case .recordCreated: .create
        case .recordUpdated: .update
        case .recordDeleted: .delete
        }
    }
}
