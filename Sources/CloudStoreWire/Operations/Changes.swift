/// `POST /{db}/changes/database`: which zones changed since a database token.
public struct DatabaseChangesRequest: Hashable, Sendable, Codable {
    /// Omit the first time to get every zone.
    public var syncToken: String?
    public var resultsLimit: Int?

    public init(syncToken: String? = nil, resultsLimit: Int? = nil) {
        self.syncToken = syncToken
        self.resultsLimit = resultsLimit
    }
}

public struct DatabaseChangesResponse: Hashable, Sendable, Codable {
    public var syncToken: String
    public var moreComing: Bool
    /// Changed zones with their current zone token, and deleted zones with `deleted: true`.
    public var zones: [Zone]

    public init(syncToken: String, moreComing: Bool, zones: [Zone]) {
        self.syncToken = syncToken
        self.moreComing = moreComing
        self.zones = zones
    }
}

/// `POST /{db}/changes/zone`: the records that changed in zones since each zone's token.
public struct ZoneChangesRequest: Hashable, Sendable, Codable {
    public struct Zone: Hashable, Sendable, Codable {
        public var zoneID: ZoneID
        /// Omit for everything.
        public var syncToken: String?
        public var resultsLimit: Int?
        public var desiredKeys: [String]?
        public var desiredRecordTypes: [String]?

        public init(
            zoneID: ZoneID, syncToken: String? = nil, resultsLimit: Int? = nil, desiredKeys: [String]? = nil,
            desiredRecordTypes: [String]? = nil
        ) {
            self.zoneID = zoneID
            self.syncToken = syncToken
            self.resultsLimit = resultsLimit
            self.desiredKeys = desiredKeys
            self.desiredRecordTypes = desiredRecordTypes
        }
    }

    public var zones: [Zone]
    /// Defaults for every zone that does not set its own.
    public var resultsLimit: Int?
    public var desiredKeys: [String]?
    public var desiredRecordTypes: [String]?
    public var numbersAsStrings: Bool?

    public init(zones: [Zone], resultsLimit: Int? = nil) {
        self.zones = zones
        self.resultsLimit = resultsLimit
    }
}

/// One zone's page of changes. Records are in their latest state; tombstones have `deleted: true`.
public struct ZoneChanges: Hashable, Sendable, Codable {
    public var zoneID: ZoneID
    /// The next request's token for this zone.
    public var syncToken: String
    /// More changes follow: ask again with `syncToken`. A page may be empty and still say so.
    public var moreComing: Bool
    public var records: [Record]

    public init(zoneID: ZoneID, syncToken: String, moreComing: Bool, records: [Record]) {
        self.zoneID = zoneID
        self.syncToken = syncToken
        self.moreComing = moreComing
        self.records = records
    }
}

public struct ZoneChangesResponse: Hashable, Sendable, Codable {
    public var zones: [ZoneChangesResult]
    public init(zones: [ZoneChangesResult]) { self.zones = zones }
}

/// `POST /{db}/records/changes`: one zone's changed records since its token, the older form of
/// `changes/zone` that CloudKit Web Services clients still call (Apple's "Fetching Record Changes").
///
/// The request is one zone of ``ZoneChangesRequest`` with its keys at the top level; the answer is
/// that zone's page, a ``ZoneChanges`` not wrapped in a zone list. A zone problem (it does not
/// exist, it is not shared with the caller) answers for the request.
///
/// ```json
/// {"zoneID": {"zoneName": "Notes"}, "syncToken": "<omit for everything>", "resultsLimit": 200}
/// ```
public struct RecordChangesRequest: Hashable, Sendable, Codable {
    /// The zone, its token and the page's options.
    public var zone: ZoneChangesRequest.Zone
    public var numbersAsStrings: Bool?

    public init(_ zone: ZoneChangesRequest.Zone, numbersAsStrings: Bool? = nil) {
        self.zone = zone
        self.numbersAsStrings = numbersAsStrings
    }

    enum CodingKeys: String, CodingKey {
        case numbersAsStrings
    }

    public init(from decoder: any Decoder) throws {
        zone = try ZoneChangesRequest.Zone(from: decoder)
        numbersAsStrings = try decoder.container(keyedBy: CodingKeys.self).decodeIfPresent(Bool.self, forKey: .numbersAsStrings)
    }

    public func encode(to encoder: any Encoder) throws {
        try zone.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(numbersAsStrings, forKey: .numbersAsStrings)
    }
}

/// `POST /{db}/zones/changes`: which zones changed since a token, the older form of
/// `changes/database` that CloudKit Web Services clients still call (Apple's "Fetching Zone
/// Changes").
///
/// Apple's reference names the token `metaSyncToken`, clients send `syncToken` as often: either
/// is read (the same token twice is fine, two different ones are refused), and the answer carries
/// both. The tokens are `changes/database` tokens, so a client may switch between the two.
public struct ZonesChangesRequest: Hashable, Sendable, Codable {
    /// Omit the first time to get every zone.
    public var syncToken: String?
    public var resultsLimit: Int?

    public init(syncToken: String? = nil, resultsLimit: Int? = nil) {
        self.syncToken = syncToken
        self.resultsLimit = resultsLimit
    }

    enum CodingKeys: String, CodingKey {
        case syncToken, metaSyncToken, resultsLimit
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let syncToken = try container.decodeIfPresent(String.self, forKey: .syncToken)
        let metaSyncToken = try container.decodeIfPresent(String.self, forKey: .metaSyncToken)
        if let syncToken, let metaSyncToken, syncToken != metaSyncToken {
            throw DecodingError.dataCorruptedError(
                forKey: .metaSyncToken, in: container,
                debugDescription: "syncToken and metaSyncToken differ: send the token once, under either name")
        }
        self.syncToken = syncToken ?? metaSyncToken
        resultsLimit = try container.decodeIfPresent(Int.self, forKey: .resultsLimit)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(syncToken, forKey: .syncToken)
        try container.encodeIfPresent(resultsLimit, forKey: .resultsLimit)
    }
}

/// The answer of `zones/changes`: a ``DatabaseChangesResponse`` with its token also as
/// `metaSyncToken`, the name Apple's reference gives it.
public struct ZonesChangesResponse: Hashable, Sendable, Codable {
    public var changes: DatabaseChangesResponse

    public init(_ changes: DatabaseChangesResponse) {
        self.changes = changes
    }

    enum CodingKeys: String, CodingKey {
        case metaSyncToken
    }

    public init(from decoder: any Decoder) throws {
        changes = try DatabaseChangesResponse(from: decoder)
    }

    public func encode(to encoder: any Encoder) throws {
        try changes.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(changes.syncToken, forKey: .metaSyncToken)
    }
}

/// The answer of the long-poll `GET /{db}/notifications?since=<db token>&timeout=<s>` (ext).
///
/// Push is a hint only: a client always fetches with the changes endpoints.
public struct NotificationsResponse: Hashable, Sendable, Codable {
    public struct ZoneReference: Hashable, Sendable, Codable {
        public var zoneID: ZoneID
        public init(zoneID: ZoneID) { self.zoneID = zoneID }
    }

    public var changed: Bool
    /// The database token now.
    public var syncToken: String
    public var zones: [ZoneReference]
    /// The caller's notifications from their subscriptions to this database
    /// (``Subscription``), for the changes after `since` up to ``syncToken``; absent when none.
    public var notifications: [PushNotification]?
    /// (ext) When the database changed after the `since` the poll named: the `changes/database`
    /// answer for that token as it stood when the poll answered, so a client whose database token
    /// is that `since` applies it instead of asking. Absent for a poll without `since`.
    public var databaseChanges: DatabaseChangesResponse?
    /// (ext) With ``databaseChanges``, for each changed zone whose token the poll named in `zones`:
    /// the first page `changes/zone` would answer for that token with at most
    /// ``maxZoneChangesRecords`` records, so a client that still holds the token applies it instead
    /// of asking. Absent when the poll named no zone or none changed.
    public var zoneChanges: [ZoneChanges]?

    public init(
        changed: Bool, syncToken: String, zones: [ZoneReference], notifications: [PushNotification]? = nil,
        databaseChanges: DatabaseChangesResponse? = nil, zoneChanges: [ZoneChanges]? = nil
    ) {
        self.changed = changed
        self.syncToken = syncToken
        self.zones = zones
        self.notifications = notifications
        self.databaseChanges = databaseChanges
        self.zoneChanges = zoneChanges
    }

    /// The most zone tokens a poll names in `zones`.
    public static let maxZoneTokens = 20
    /// The most records a page of ``zoneChanges`` carries (`moreComing` says when more follow): an
    /// answer saves a change's round trip, while a bulk change is fetched page by page as usual.
    public static let maxZoneChangesRecords = 20
}
