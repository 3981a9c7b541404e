/// A subscription: what changes of a database its user wants to hear of (<doc:WireProtocol> §8).
///
/// A **zone** subscription fires when records of one zone change, a **database** subscription
/// when any zone of the database changes (private and shared databases), and a **query**
/// subscription when a record of a type, matching its filters, is created, updated or deleted:
///
/// ```swift
/// let newNotes = Subscription(
///     subscriptionID: "new-notes",
///     query: .init(recordType: "Note", filterBy: [.init("pinned", .equals, .int64(1))]),
///     firesOn: [.create])
/// ```
///
/// Each matching change produces one ``PushNotification``, delivered to the long poll and to the
/// user's web courier. Notifications are hints: a client that missed some still catches up with
/// the changes endpoints.
public struct Subscription: Hashable, Sendable, Codable {
    /// `zone`, `query` or `database`.
    public enum SubscriptionType: String, Hashable, Sendable, Codable, CaseIterable {
        case zone, query, database
    }

    /// The kinds of change a query subscription fires on.
    public enum FiresOn: String, Hashable, Sendable, Codable, CaseIterable {
        case create, update, delete
    }

    /// What a notification shows (Apple's `notificationInfo`): kept and sent back in the payload's
    /// `aps` dictionary.
    public struct NotificationInfo: Hashable, Sendable, Codable {
        public var alertBody: String?
        public var alertLocalizationKey: String?
        public var alertLocalizationArgs: [String]?
        public var alertActionLocalizationKey: String?
        public var alertLaunchImage: String?
        public var soundName: String?
        public var shouldBadge: Bool?
        public var shouldSendContentAvailable: Bool?
        public var category: String?

        public init(
            alertBody: String? = nil, soundName: String? = nil, shouldBadge: Bool? = nil,
            shouldSendContentAvailable: Bool? = nil, category: String? = nil
        ) {
            self.alertBody = alertBody
            self.soundName = soundName
            self.shouldBadge = shouldBadge
            self.shouldSendContentAvailable = shouldSendContentAvailable
            self.category = category
        }
    }

    public var subscriptionID: String
    public var subscriptionType: SubscriptionType
    /// The zone of a zone subscription, or the one zone a query subscription watches when it is
    /// not ``zoneWide``. The default zone when absent.
    public var zoneID: ZoneID?
    /// A query subscription's record type and filters (its `sortBy` is ignored).
    public var query: RecordsQueryRequest.Query?
    /// The changes a query subscription fires on; every kind when absent.
    public var firesOn: [FiresOn]?
    /// Whether a query subscription is deleted once it fired.
    public var firesOnce: Bool?
    /// Whether a query subscription watches every zone of its database (true when absent), or
    /// only ``zoneID``.
    public var zoneWide: Bool?
    public var notificationInfo: NotificationInfo?

    public init(
        subscriptionID: String, subscriptionType: SubscriptionType, zoneID: ZoneID? = nil,
        query: RecordsQueryRequest.Query? = nil, firesOn: [FiresOn]? = nil, firesOnce: Bool? = nil,
        zoneWide: Bool? = nil, notificationInfo: NotificationInfo? = nil
    ) {
        self.subscriptionID = subscriptionID
        self.subscriptionType = subscriptionType
        self.zoneID = zoneID
        self.query = query
        self.firesOn = firesOn
        self.firesOnce = firesOnce
        self.zoneWide = zoneWide
        self.notificationInfo = notificationInfo
    }

    /// A query subscription.
    public init(
        subscriptionID: String, query: RecordsQueryRequest.Query, firesOn: [FiresOn] = FiresOn.allCases,
        firesOnce: Bool = false, zoneID: ZoneID? = nil, notificationInfo: NotificationInfo? = nil
    ) {
        self.init(
            subscriptionID: subscriptionID, subscriptionType: .query, zoneID: zoneID, query: query, firesOn: firesOn,
            firesOnce: firesOnce, zoneWide: zoneID == nil, notificationInfo: notificationInfo)
    }
}

/// One item of a subscriptions endpoint's answer: a subscription, or an error naming it.
public typealias SubscriptionResult = WireResult<Subscription>

/// `POST /{db}/subscriptions/modify`: `{"operations": [{"operationType", "subscription"}]}`.
///
/// A delete names only the subscription's ID: `{"operationType": "delete", "subscription":
/// {"subscriptionID": "x"}}`.
public struct SubscriptionsModifyRequest: Hashable, Sendable, Codable {
    public enum OperationType: String, Hashable, Sendable, Codable {
        case create, update, delete
    }

    public struct Operation: Hashable, Sendable, Codable {
        public var operationType: OperationType
        public var subscriptionID: String
        /// The whole subscription for `create` and `update`; nil for `delete`.
        public var subscription: Subscription?

        /// Creates or updates a subscription.
        public init(_ operationType: OperationType, _ subscription: Subscription) {
            self.operationType = operationType
            self.subscriptionID = subscription.subscriptionID
            self.subscription = subscription
        }

        /// Deletes a subscription.
        public init(deleting subscriptionID: String) {
            self.operationType = .delete
            self.subscriptionID = subscriptionID
        }

        enum CodingKeys: String, CodingKey { case operationType, subscription }
        struct Reference: Codable { var subscriptionID: String }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            operationType = try container.decode(OperationType.self, forKey: .operationType)
            subscriptionID = try container.decode(Reference.self, forKey: .subscription).subscriptionID
            if operationType != .delete {
                subscription = try container.decode(Subscription.self, forKey: .subscription)
            }
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(operationType, forKey: .operationType)
            if let subscription {
                try container.encode(subscription, forKey: .subscription)
            } else {
                try container.encode(Reference(subscriptionID: subscriptionID), forKey: .subscription)
            }
        }
    }

    public var operations: [Operation]

    public init(operations: [Operation]) { self.operations = operations }
}

/// `POST /{db}/subscriptions/lookup`: `{"subscriptions": [{"subscriptionID": "x"}]}`.
public struct SubscriptionsLookupRequest: Hashable, Sendable, Codable {
    public struct Item: Hashable, Sendable, Codable {
        public var subscriptionID: String
        public init(subscriptionID: String) { self.subscriptionID = subscriptionID }
    }

    public var subscriptions: [Item]

    public init(subscriptionIDs: [String]) { subscriptions = subscriptionIDs.map(Item.init) }
}

/// The answer of `subscriptions/list`, `subscriptions/lookup` and `subscriptions/modify`.
public struct SubscriptionsResponse: Hashable, Sendable, Codable {
    public var subscriptions: [SubscriptionResult]
    public init(subscriptions: [SubscriptionResult]) { self.subscriptions = subscriptions }
}

/// `POST tokens/create` (under `/device/1/{container}/{environment}` or `/database/1/…`):
/// `{"apnsEnvironment": "development"}`.
public struct PushTokenCreateRequest: Hashable, Sendable, Codable {
    public var apnsEnvironment: String?
    public init(apnsEnvironment: String? = nil) { self.apnsEnvironment = apnsEnvironment }
}

/// `POST tokens/register`: `{"apnsEnvironment", "apnsToken"}` (Apple's reference requires both;
/// the server reads a missing `apnsEnvironment` as the request's environment, as MistKit sends it).
public struct PushTokenRegisterRequest: Hashable, Sendable, Codable {
    public var apnsEnvironment: String?
    public var apnsToken: String
    public init(apnsEnvironment: String? = nil, apnsToken: String) {
        self.apnsEnvironment = apnsEnvironment
        self.apnsToken = apnsToken
    }
}

/// The answer of `tokens/create` and `tokens/register`: the token, and the web courier URL that
/// delivers the token user's notifications, one per `GET`.
public struct PushTokenResponse: Hashable, Sendable, Codable {
    public var apnsEnvironment: String
    public var apnsToken: String
    /// Absolute; `GET` it to wait for the next notification (an empty body after the wait means
    /// none came: ask again).
    public var webcourierURL: String

    public init(apnsEnvironment: String, apnsToken: String, webcourierURL: String) {
        self.apnsEnvironment = apnsEnvironment
        self.apnsToken = apnsToken
        self.webcourierURL = webcourierURL
    }
}

/// A notification in CloudKit's push payload shape: `{"aps": {...}, "ck": {...}}`.
///
/// `ck.qry` marks a query notification (with the record and the reason), `ck.fet` a zone
/// notification and `ck.met` a database notification:
///
/// ```json
/// {"ck": {"cid": "iCloud.com.example.notes", "nid": "…",
///         "qry": {"sid": "new-notes", "rid": "note-1", "zid": "_defaultZone",
///                 "zoid": "_defaultOwner", "dbs": 1, "fo": 1}}}
/// ```
public struct PushNotification: Hashable, Sendable, Codable {
    /// Which database a notification is about, as CloudKit numbers them (`dbs`).
    public enum DatabaseNumber: Int, Hashable, Sendable, Codable {
        case `public` = 1, `private` = 2, shared = 3

        public init(_ scope: DatabaseScope) {
            switch scope {
            case .public: self = .public
            case .private: self = .private
            case .shared: self = .shared
            }
        }

        public var scope: DatabaseScope {
            switch self {
            case .public: .public
            case .private: .private
            case .shared: .shared
            }
        }
    }

    /// Why a query subscription fired (`fo`): 1 created, 2 updated, 3 deleted.
    public enum Reason: Int, Hashable, Sendable, Codable {
        case recordCreated = 1, recordUpdated = 2, recordDeleted = 3
    }

    /// `ck.qry`: a record matching a query subscription changed.
    public struct QueryInfo: Hashable, Sendable, Codable {
        public var subscriptionID: String
        public var recordName: String
        public var zoneName: String
        public var zoneOwner: String
        public var database: DatabaseNumber
        public var reason: Reason

        public init(
            subscriptionID: String, recordName: String, zoneName: String, zoneOwner: String,
            database: DatabaseNumber, reason: Reason
        ) {
            self.subscriptionID = subscriptionID
            self.recordName = recordName
            self.zoneName = zoneName
            self.zoneOwner = zoneOwner
            self.database = database
            self.reason = reason
        }

        enum CodingKeys: String, CodingKey {
            case subscriptionID = "sid", recordName = "rid", zoneName = "zid", zoneOwner = "zoid", database = "dbs",
                reason = "fo"
        }
    }

    /// `ck.fet`: records of a zone changed.
    public struct ZoneInfo: Hashable, Sendable, Codable {
        public var subscriptionID: String
        public var zoneName: String
        public var zoneOwner: String
        public var database: DatabaseNumber

        public init(subscriptionID: String, zoneName: String, zoneOwner: String, database: DatabaseNumber) {
            self.subscriptionID = subscriptionID
            self.zoneName = zoneName
            self.zoneOwner = zoneOwner
            self.database = database
        }

        enum CodingKeys: String, CodingKey {
            case subscriptionID = "sid", zoneName = "zid", zoneOwner = "zoid", database = "dbs"
        }
    }

    /// `ck.met`: something in a database changed.
    public struct DatabaseInfo: Hashable, Sendable, Codable {
        public var subscriptionID: String
        public var database: DatabaseNumber

        public init(subscriptionID: String, database: DatabaseNumber) {
            self.subscriptionID = subscriptionID
            self.database = database
        }

        enum CodingKeys: String, CodingKey { case subscriptionID = "sid", database = "dbs" }
    }

    /// `ck`: CloudKit's part of the payload.
    public struct CloudKitInfo: Hashable, Sendable, Codable {
        public var containerIdentifier: String
        public var notificationID: String
        public var query: QueryInfo?
        public var zone: ZoneInfo?
        public var database: DatabaseInfo?

        public init(
            containerIdentifier: String, notificationID: String, query: QueryInfo? = nil, zone: ZoneInfo? = nil,
            database: DatabaseInfo? = nil
        ) {
            self.containerIdentifier = containerIdentifier
            self.notificationID = notificationID
            self.query = query
            self.zone = zone
            self.database = database
        }

        enum CodingKeys: String, CodingKey {
            case containerIdentifier = "cid", notificationID = "nid", query = "qry", zone = "fet", database = "met"
        }
    }

    /// `aps`: what the subscription's ``Subscription/NotificationInfo`` asked to show.
    public struct Alert: Hashable, Sendable, Codable {
        public struct Body: Hashable, Sendable, Codable {
            public var body: String?
            public var locKey: String?
            public var locArgs: [String]?
            public var actionLocKey: String?
            public var launchImage: String?

            enum CodingKeys: String, CodingKey {
                case body, locKey = "loc-key", locArgs = "loc-args", actionLocKey = "action-loc-key",
                    launchImage = "launch-image"
            }
        }

        public var alert: Body?
        public var badge: Int?
        public var sound: String?
        public var category: String?
        public var contentAvailable: Int?

        enum CodingKeys: String, CodingKey {
            case alert, badge, sound, category, contentAvailable = "content-available"
        }

        /// The `aps` a subscription's notification info asks for; nil when it asks for nothing.
        public init?(_ info: Subscription.NotificationInfo?) {
            guard let info else { return nil }
            let body = Body(
                body: info.alertBody, locKey: info.alertLocalizationKey, locArgs: info.alertLocalizationArgs,
                actionLocKey: info.alertActionLocalizationKey, launchImage: info.alertLaunchImage)
            alert = body == Body() ? nil : body
            badge = info.shouldBadge == true ? 1 : nil
            sound = info.soundName
            category = info.category
            contentAvailable = info.shouldSendContentAvailable == true ? 1 : nil
            if self == Alert(alert: nil, badge: nil, sound: nil, category: nil, contentAvailable: nil) { return nil }
        }

        init(alert: Body?, badge: Int?, sound: String?, category: String?, contentAvailable: Int?) {
            self.alert = alert
            self.badge = badge
            self.sound = sound
            self.category = category
            self.contentAvailable = contentAvailable
        }
    }

    public var aps: Alert?
    public var ck: CloudKitInfo

    public init(aps: Alert? = nil, ck: CloudKitInfo) {
        self.aps = aps
        self.ck = ck
    }

    /// The subscription that fired.
    public var subscriptionID: String? {
        ck.query?.subscriptionID ?? ck.zone?.subscriptionID ?? ck.database?.subscriptionID
    }
}
