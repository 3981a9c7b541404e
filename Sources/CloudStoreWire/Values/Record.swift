import Foundation

/// A record: a typed bag of fields with a name, a zone and a change tag.
///
/// On the wire:
/// ```json
/// {"recordName": "N-1", "recordType": "Note", "recordChangeTag": "3k",
///  "zoneID": {"zoneName": "Notes", "ownerRecordName": "_u1"},
///  "fields": {"title": {"value": "Hi", "type": "STRING"}},
///  "created":  {"timestamp": 1763700000000, "userRecordName": "_u1", "deviceID": "dev-A"},
///  "modified": {"timestamp": 1763700000000, "userRecordName": "_u1", "deviceID": "dev-A"},
///  "deleted": false}
/// ```
/// The same type carries a tombstone in a change feed (`deleted: true`, no fields) and a
/// successful delete in a modify response (`{"recordName": "N-3", "deleted": true}`).
public struct Record: Hashable, Sendable {
    /// Who wrote a record and when.
    public struct Stamp: Hashable, Sendable, Codable {
        public var timestamp: Date
        public var userRecordName: String?
        public var deviceID: String?

        public init(timestamp: Date, userRecordName: String? = nil, deviceID: String? = nil) {
            self.timestamp = timestamp
            self.userRecordName = userRecordName
            self.deviceID = deviceID
        }

        enum CodingKeys: String, CodingKey {
            case timestamp, userRecordName, deviceID
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            timestamp = try FieldValue.decodeTimestamp(from: container.superDecoder(forKey: .timestamp))
            userRecordName = try container.decodeIfPresent(String.self, forKey: .userRecordName)
            deviceID = try container.decodeIfPresent(String.self, forKey: .deviceID)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(timestamp.millisecondsSince1970, forKey: .timestamp)
            try container.encodeIfPresent(userRecordName, forKey: .userRecordName)
            try container.encodeIfPresent(deviceID, forKey: .deviceID)
        }
    }

    public var recordName: String
    /// The record type; nil in some requests (an update names only the record) and in tombstones
    /// from servers that do not send it.
    public var recordType: String?
    /// Opaque; changes on every write of the record.
    public var recordChangeTag: String?
    /// The record's zone, when the wire carried it.
    public var zoneID: ZoneID?
    public var fields: [String: FieldValue]
    public var created: Stamp?
    public var modified: Stamp?
    /// True for a tombstone or a delete result.
    public var deleted: Bool
    /// A share record's `shortGUID`, `publicPermission`, `owner`, `participants` and
    /// `currentUserParticipant`, flat on the record's dictionary on the wire; nil for other records.
    public var share: ShareMetadata?

    public init(
        recordName: String, recordType: String? = nil, recordChangeTag: String? = nil,
        zoneID: ZoneID? = nil, fields: [String: FieldValue] = [:], created: Stamp? = nil,
        modified: Stamp? = nil, deleted: Bool = false, share: ShareMetadata? = nil
    ) {
        self.recordName = recordName
        self.recordType = recordType
        self.recordChangeTag = recordChangeTag
        self.zoneID = zoneID
        self.fields = fields
        self.created = created
        self.modified = modified
        self.deleted = deleted
        self.share = share
    }

    /// A new record of a type in a zone, with no change tag yet.
    public init(recordType: String, recordID: RecordID, fields: [String: FieldValue] = [:]) {
        self.init(
            recordName: recordID.recordName, recordType: recordType, zoneID: recordID.zoneID, fields: fields)
    }

    /// The record's ID; a record without a zone is in the default zone.
    public var recordID: RecordID {
        RecordID(recordName: recordName, zoneID: zoneID ?? .default)
    }

    public subscript(field: String) -> FieldValue? {
        get { fields[field] }
        set { fields[field] = newValue }
    }
}

extension Record: Codable {
    enum CodingKeys: String, CodingKey {
        case recordName, recordType, recordChangeTag, zoneID, fields, created, modified, deleted
        case shortGUID, publicPermission, owner, participants, currentUserParticipant
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        recordName = try container.decode(String.self, forKey: .recordName)
        recordType = try container.decodeIfPresent(String.self, forKey: .recordType)
        recordChangeTag = try container.decodeIfPresent(String.self, forKey: .recordChangeTag)
        zoneID = try container.decodeIfPresent(ZoneID.self, forKey: .zoneID)
        fields = try container.decodeIfPresent([String: FieldValue].self, forKey: .fields) ?? [:]
        created = try container.decodeIfPresent(Stamp.self, forKey: .created)
        modified = try container.decodeIfPresent(Stamp.self, forKey: .modified)
        deleted = try container.decodeIfPresent(Bool.self, forKey: .deleted) ?? false
        let share = ShareMetadata(
            shortGUID: try container.decodeIfPresent(String.self, forKey: .shortGUID),
            publicPermission: try container.decodeIfPresent(SharePermission.self, forKey: .publicPermission),
            owner: try container.decodeIfPresent(ShareParticipant.self, forKey: .owner),
            participants: try container.decodeIfPresent([ShareParticipant].self, forKey: .participants),
            currentUserParticipant: try container.decodeIfPresent(ShareParticipant.self, forKey: .currentUserParticipant))
        self.share = share.isEmpty ? nil : share
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(recordName, forKey: .recordName)
        try container.encodeIfPresent(recordType, forKey: .recordType)
        try container.encodeIfPresent(recordChangeTag, forKey: .recordChangeTag)
        try container.encodeIfPresent(zoneID, forKey: .zoneID)
        if !deleted || !fields.isEmpty {
            try container.encode(fields, forKey: .fields)
        }
        try container.encodeIfPresent(created, forKey: .created)
        try container.encodeIfPresent(modified, forKey: .modified)
        try container.encode(deleted, forKey: .deleted)
        if let share {
            try container.encodeIfPresent(share.shortGUID, forKey: .shortGUID)
            try container.encodeIfPresent(share.publicPermission, forKey: .publicPermission)
            try container.encodeIfPresent(share.owner, forKey: .owner)
            try container.encodeIfPresent(share.participants, forKey: .participants)
            try container.encodeIfPresent(share.currentUserParticipant, forKey: .currentUserParticipant)
        }
    }
}
