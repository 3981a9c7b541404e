/// A `REFERENCE` field value: a pointer from one record to another.
///
/// On the wire: `{"recordName": "F-1", "zoneID": {...}, "action": "NONE"}`.
public struct Reference: Hashable, Sendable, Codable {
    /// What the server does to the referring record when the target goes away.
    public enum Action: String, Hashable, Sendable, Codable {
        /// Nothing: the reference dangles.
        case none = "NONE"
        /// Delete the referring record when its target is deleted.
        case deleteSelf = "DELETE_SELF"
        /// The target must exist when the referring record is saved.
        case validate = "VALIDATE"
    }

    public var recordName: String
    public var zoneID: ZoneID?
    public var action: Action

    public init(recordName: String, zoneID: ZoneID? = nil, action: Action = .none) {
        self.recordName = recordName
        self.zoneID = zoneID
        self.action = action
    }

    public init(_ recordID: RecordID, action: Action = .none) {
        self.init(recordName: recordID.recordName, zoneID: recordID.zoneID, action: action)
    }

    enum CodingKeys: String, CodingKey {
        case recordName, zoneID, action
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        recordName = try container.decode(String.self, forKey: .recordName)
        zoneID = try container.decodeIfPresent(ZoneID.self, forKey: .zoneID)
        action = try container.decodeIfPresent(Action.self, forKey: .action) ?? .none
    }
}

/// A `LOCATION` field value.
public struct Location: Hashable, Sendable, Codable {
    public var latitude: Double
    public var longitude: Double
    public var horizontalAccuracy: Double?
    public var verticalAccuracy: Double?
    public var altitude: Double?
    public var speed: Double?
    public var course: Double?
    /// Milliseconds since 1970-01-01 UTC, as `TIMESTAMP` values travel.
    public var timestamp: Int64?

    public init(
        latitude: Double, longitude: Double, horizontalAccuracy: Double? = nil,
        verticalAccuracy: Double? = nil, altitude: Double? = nil, speed: Double? = nil,
        course: Double? = nil, timestamp: Int64? = nil
    ) {
        self.latitude = latitude
        self.longitude = longitude
        self.horizontalAccuracy = horizontalAccuracy
        self.verticalAccuracy = verticalAccuracy
        self.altitude = altitude
        self.speed = speed
        self.course = course
        self.timestamp = timestamp
    }
}
