/// Identifies a record zone: its name and the user who owns it.
///
/// On the wire: `{"zoneName": "Notes", "ownerRecordName": "_u1"}` (the owner is also read as
/// `ownerName`, as CloudKit clients send it). A missing `zoneName` means the default zone; a missing
/// owner means the caller, which is how a client names its own zones.
///
/// ```swift
/// let zone = ZoneID(zoneName: "Notes")            // the caller's "Notes" zone
/// let theirs = ZoneID(zoneName: "Notes", ownerRecordName: "_u2")
/// ```
public struct ZoneID: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The name of the zone every database has and no one can delete.
    public static let defaultZoneName = "_defaultZone"
    /// The caller's default zone.
    public static let `default` = ZoneID(zoneName: defaultZoneName)
    /// The owner of the public database's zones, as the server names it in its answers: no user
    /// has this name.
    public static let publicDatabaseOwner = "_defaultOwner"
    /// The public database's zone, as the server names it in its answers (every user's records of
    /// the public database are in it).
    public static let publicDefault = ZoneID(zoneName: defaultZoneName, ownerRecordName: publicDatabaseOwner)

    public var zoneName: String
    /// The owner's user record name, or nil for the caller.
    public var ownerRecordName: String?

    public init(zoneName: String, ownerRecordName: String? = nil) {
        self.zoneName = zoneName
        self.ownerRecordName = ownerRecordName
    }

    /// The same zone named without its owner, as a client names its own zones.
    public var withoutOwner: ZoneID { ZoneID(zoneName: zoneName) }

    public var isDefaultZone: Bool { zoneName == Self.defaultZoneName }

    public var description: String {
        ownerRecordName.map { "\(zoneName):\($0)" } ?? zoneName
    }

    enum CodingKeys: String, CodingKey {
        case zoneName, ownerRecordName, ownerName
    }

    /// Reads the owner as `ownerRecordName` (Apple's reference) or `ownerName` (what CloudKit
    /// clients such as MistKit send); both with different users is refused.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        zoneName = try container.decodeIfPresent(String.self, forKey: .zoneName) ?? Self.defaultZoneName
        let ownerRecordName = try container.decodeIfPresent(String.self, forKey: .ownerRecordName)
        let ownerName = try container.decodeIfPresent(String.self, forKey: .ownerName)
        if let ownerRecordName, let ownerName, ownerRecordName != ownerName {
            throw DecodingError.dataCorruptedError(
                forKey: .ownerName, in: container,
                debugDescription: "ownerRecordName and ownerName name different users: name the zone's owner once")
        }
        self.ownerRecordName = ownerRecordName ?? ownerName
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(zoneName, forKey: .zoneName)
        try container.encodeIfPresent(ownerRecordName, forKey: .ownerRecordName)
    }
}

/// Identifies a record: its name within a zone.
public struct RecordID: Hashable, Sendable, Codable, CustomStringConvertible {
    public var recordName: String
    public var zoneID: ZoneID

    public init(recordName: String, zoneID: ZoneID = .default) {
        self.recordName = recordName
        self.zoneID = zoneID
    }

    public var description: String { "\(recordName)@\(zoneID)" }
}
