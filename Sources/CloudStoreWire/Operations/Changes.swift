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

/// One zone's result in `changes/zone`: a page of changes, or an error naming the zone.
public enum ZoneChangesResult: Hashable, Sendable, Codable {
    case changes(ZoneChanges)
    case error(ServerError)

    public init(from decoder: any Decoder) throws {
        let probe = try decoder.container(keyedBy: ProbeKeys.self)
        if probe.contains(.serverErrorCode) {
            self = .error(try ServerError(from: decoder))
        } else {
            self = .changes(try ZoneChanges(from: decoder))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .changes(let changes): try changes.encode(to: encoder)
        case .error(let error): try error.encode(to: encoder)
        }
    }
}

public struct ZoneChangesResponse: Hashable, Sendable, Codable {
    public var zones: [ZoneChangesResult]
    public init(zones: [ZoneChangesResult]) { self.zones = zones }
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

    public init(changed: Bool, syncToken: String, zones: [ZoneReference]) {
        self.changed = changed
        self.syncToken = syncToken
        self.zones = zones
    }
}
