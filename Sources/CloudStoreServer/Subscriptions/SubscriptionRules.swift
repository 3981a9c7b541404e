import CloudStoreWire

/// Whose subscriptions: one user's, in one database of a container and environment.
///
/// Unlike a ``DatabasePartition``, whose owner for the public database is
/// ``DatabasePartition/publicOwner``, a subscriber is always a user: everyone may subscribe to the
/// public database, each to their own subscriptions.
struct Subscriber: Hashable, Sendable, CustomStringConvertible {
    var container: String
    var environment: CloudEnvironment
    var scope: DatabaseScope
    var user: String

    var description: String { "\(container)/\(environment.rawValue)/\(scope.rawValue)/\(user)" }
}

/// What `subscriptions/modify` asks the storage to do, in order.
enum SubscriptionChange: Hashable, Sendable {
    /// Creates the subscription, or replaces one with its ID (`create`); with `mustExist`
    /// (`update`), only replaces.
    case save(Subscription, mustExist: Bool)
    case delete(String)

    var subscriptionID: String {
        switch self {
        case .save(let subscription, _): subscription.subscriptionID
        case .delete(let id): id
        }
    }
}

/// Which subscriptions a database takes, and what a valid one holds (WireProtocol.md §8).
///
/// - Zone subscriptions: private and shared databases (the public database has one zone: watch
///   it with a query subscription).
/// - Database subscriptions: private and shared databases.
/// - Query subscriptions: private and public databases, as CloudKit's; `query.recordType` and
///   its filters are checked as a `records/query`'s.
enum SubscriptionRules {
    /// The problem of a subscription ID in any operation (a save, a delete, a lookup), or nil: the
    /// rules of record names (PostgreSQL stores no NUL, and an index entry has a size limit).
    static func idProblem(_ id: String) -> String? {
        guard RecordRules.recordNameProblem(id) != nil else { return nil }
        return "subscriptionID \"\(id.prefix(64))\" is invalid: use 1 to 255 printable characters"
    }

    /// The problem of a subscription in a database, or nil.
    static func problem(_ subscription: Subscription, in scope: DatabaseScope) -> String? {
        if let problem = idProblem(subscription.subscriptionID) { return problem }
        switch (subscription.subscriptionType, scope) {
        case (.zone, .public), (.database, .public):
            return "the public database takes query subscriptions only: watch its records with a query subscription"
        case (.query, .shared):
            return "the shared database takes zone and database subscriptions: subscribe to the zone, or query its owner's records in the public database"
        case (.query, _):
            guard let query = subscription.query else {
                return "a query subscription needs a query with a recordType"
            }
            do {
                _ = try QueryEvaluator(query)
            } catch {
                return error.error.reason ?? error.description
            }
            if let firesOn = subscription.firesOn, firesOn.isEmpty {
                return "firesOn is empty: name at least one of create, update and delete"
            }
            if subscription.zoneWide == false, subscription.zoneID == nil {
                return "a query subscription that is not zoneWide needs the zoneID it watches"
            }
        case (.zone, .shared):
            guard subscription.zoneID?.ownerRecordName != nil else {
                return "a zone subscription of the shared database names the zone's owner in zoneID.ownerRecordName"
            }
        case (.zone, _), (.database, _):
            break
        }
        if let zoneID = subscription.zoneID {
            do {
                try ZoneNames.validate(zoneID.zoneName)
            } catch {
                return error.error.reason ?? error.description
            }
        }
        return nil
    }

    /// A subscription as it is stored and answered: the defaults Apple's reference gives filled in
    /// (`firesOn` all kinds, `zoneWide` true, the default zone), the fields its type does not use
    /// left out.
    static func normalized(_ subscription: Subscription) -> Subscription {
        var normalized = subscription
        switch subscription.subscriptionType {
        case .query:
            normalized.firesOn = subscription.firesOn ?? Subscription.FiresOn.allCases
            normalized.firesOnce = subscription.firesOnce ?? false
            normalized.zoneWide = subscription.zoneWide ?? (subscription.zoneID == nil)
            normalized.query?.sortBy = nil
        case .zone:
            normalized.zoneID = subscription.zoneID ?? .default
            normalized.query = nil
            normalized.firesOn = nil
            normalized.firesOnce = nil
            normalized.zoneWide = nil
        case .database:
            normalized.zoneID = nil
            normalized.query = nil
            normalized.firesOn = nil
            normalized.firesOnce = nil
            normalized.zoneWide = nil
        }
        return normalized
    }
}
