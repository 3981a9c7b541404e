import Foundation

// The wire types on the hot path of sync read straight from bytes: a records/modify or lookup
// response and a changes/zone page, with their records. Each reader follows its type's
// `init(from:)` and declines what it does not handle (see ``JSONBytesReadable``).

extension JSONBytesReader {
    /// A string, or nil for `null` (`decodeIfPresent`).
    package mutating func readOptionalString() throws(Declined) -> String? {
        try readNull() ? nil : readString()
    }
}

extension ZoneID: JSONBytesReadable {
    package init(from reader: inout JSONBytesReader) throws(JSONBytesReader.Declined) {
        var zoneName: String?
        var owner: String?
        var ownerName: String?
        var seen = KeysSeen()
        try reader.readObject { reader, key throws(JSONBytesReader.Declined) in
            switch key {
            case "zoneName" where seen.first(0): zoneName = try reader.readOptionalString()
            case "ownerRecordName" where seen.first(1): owner = try reader.readOptionalString()
            case "ownerName" where seen.first(2): ownerName = try reader.readOptionalString()
            default: try reader.skipValue()
            }
        }
        // Two different owners: Codable's decoder names the problem.
        if let owner, let ownerName, owner != ownerName { throw JSONBytesReader.Declined() }
        self.init(zoneName: zoneName ?? Self.defaultZoneName, ownerRecordName: owner ?? ownerName)
    }
}

extension Record.Stamp: JSONBytesReadable {
    package init(from reader: inout JSONBytesReader) throws(JSONBytesReader.Declined) {
        var timestamp: Date?
        var user: String?
        var device: String?
        var seen = KeysSeen()
        try reader.readObject { reader, key throws(JSONBytesReader.Declined) in
            switch key {
            case "timestamp" where seen.first(0): timestamp = try reader.readTimestamp()
            case "userRecordName" where seen.first(1): user = try reader.readOptionalString()
            case "deviceID" where seen.first(2): device = try reader.readOptionalString()
            default: try reader.skipValue()
            }
        }
        guard let timestamp else { throw JSONBytesReader.Declined() }
        self.init(timestamp: timestamp, userRecordName: user, deviceID: device)
    }
}

extension JSONBytesReader {
    /// A base64 string's bytes: canonical base64 straight from the bytes (``Base64Bytes``), any
    /// other string through Foundation; a string that is not base64 is declined (the decoder names it).
    mutating func readBase64() throws(Declined) -> Data {
        let start = mark()
        if let data = try readRawString(Base64Bytes.decode) { return data }
        seek(to: start)
        guard let data = Data(base64Encoded: try readString()) else { throw Declined() }
        return data
    }

    /// A `TIMESTAMP`: integer milliseconds within ``Foundation/Date/timestampRange``.
    mutating func readTimestamp() throws(Declined) -> Date {
        let milliseconds = try readInt64()
        guard Date.timestampRange.contains(milliseconds) else { throw Declined() }
        return Date(millisecondsSince1970: milliseconds)
    }
}

extension FieldValue: JSONBytesReadable {
    /// `{"type": T, "value": V}` in either order, for the scalar types `STRING`, `INT64`, `DOUBLE`,
    /// `TIMESTAMP` (integers as numbers), `BYTES` and `ENCRYPTED_BYTES` (base64), and `null`; every
    /// other type is declined.
    package init(from reader: inout JSONBytesReader) throws(JSONBytesReader.Declined) {
        var typeName: String?
        var value: Int?
        var seen = KeysSeen()
        try reader.readObject { reader, key throws(JSONBytesReader.Declined) in
            switch key {
            case "type" where seen.first(0): typeName = try reader.readOptionalString()
            case "value" where seen.first(1):
                if try !reader.readNull() {
                    value = reader.mark()
                    try reader.skipValue()
                }
            default: try reader.skipValue()
            }
        }
        guard let value else {
            self = .null
            return
        }
        let end = reader.mark()
        defer { reader.seek(to: end) }
        reader.seek(to: value)
        switch typeName.flatMap(FieldType.init(rawValue:)) {
        case .string?: self = .string(try reader.readString())
        case .int64?: self = .int64(try reader.readInt64())
        case .double?: self = .double(try reader.readDouble())
        case .timestamp?: self = .timestamp(try reader.readTimestamp())
        case .bytes?: self = .bytes(try reader.readBase64())
        case .encryptedBytes?: self = .encryptedBytes(try reader.readBase64())
        default: throw JSONBytesReader.Declined()
        }
    }
}

extension Record: JSONBytesReadable {
    /// A record without share metadata (a share record is declined).
    package init(from reader: inout JSONBytesReader) throws(JSONBytesReader.Declined) {
        try self.init(from: &reader, isResult: false)
    }

    /// A record; as a result of `records/modify` or `records/lookup` (`isResult`), one with a
    /// `serverErrorCode` is an error result, declined.
    init(from reader: inout JSONBytesReader, isResult: Bool) throws(JSONBytesReader.Declined) {
        var record = Record(recordName: "")
        var seen = KeysSeen()
        try reader.readObject { reader, key throws(JSONBytesReader.Declined) in
            switch key {
            case "recordName" where seen.first(0): record.recordName = try reader.readString()
            case "recordType" where seen.first(1): record.recordType = try reader.readOptionalString()
            case "recordChangeTag" where seen.first(2): record.recordChangeTag = try reader.readOptionalString()
            case "zoneID" where seen.first(3): record.zoneID = try reader.readNull() ? nil : ZoneID(from: &reader)
            case "fields" where seen.first(4):
                guard try !reader.readNull() else { return }
                var pairs: [(String, FieldValue)] = []
                try reader.readObject { reader, name throws(JSONBytesReader.Declined) in
                    pairs.append((name, try FieldValue(from: &reader)))
                }
                // Sized once, one hash per field; in reverse, so that of a name given twice the
                // first value stays (as Foundation's decoder keeps it).
                var fields = [String: FieldValue](minimumCapacity: pairs.count)
                for (name, value) in pairs.reversed() { fields[name] = value }
                record.fields = fields
            case "created" where seen.first(5): record.created = try reader.readNull() ? nil : Record.Stamp(from: &reader)
            case "modified" where seen.first(6): record.modified = try reader.readNull() ? nil : Record.Stamp(from: &reader)
            case "deleted" where seen.first(7): record.deleted = try reader.readNull() ? false : reader.readBool()
            case "shortGUID", "publicPermission", "owner", "participants", "currentUserParticipant":
                throw JSONBytesReader.Declined()
            case "serverErrorCode" where isResult: throw JSONBytesReader.Declined()
            default: try reader.skipValue()
            }
        }
        guard seen.contains(0) else { throw JSONBytesReader.Declined() }
        self = record
    }
}

extension JSONBytesReader {
    /// An array of records; as results (`isResult`), an error result is declined.
    mutating func readRecords(isResult: Bool) throws(Declined) -> [Record] {
        var records: [Record] = []
        try readArray { reader throws(Declined) in records.append(try Record(from: &reader, isResult: isResult)) }
        return records
    }
}

extension RecordsResponse: JSONBytesReadable {
    /// A response whose results are all records; one with an error result is declined.
    package init(from reader: inout JSONBytesReader) throws(JSONBytesReader.Declined) {
        var records: [Record]?
        var syncToken: String?
        var seen = KeysSeen()
        try reader.readObject { reader, key throws(JSONBytesReader.Declined) in
            switch key {
            case "records" where seen.first(0): records = try reader.readRecords(isResult: true)
            case "syncToken" where seen.first(1): syncToken = try reader.readOptionalString()
            default: try reader.skipValue()
            }
        }
        guard let records else { throw JSONBytesReader.Declined() }
        self.init(records: records.map(RecordResult.value), syncToken: syncToken)
    }
}

extension ZoneChanges: JSONBytesReadable {
    package init(from reader: inout JSONBytesReader) throws(JSONBytesReader.Declined) {
        var zoneID: ZoneID?
        var syncToken: String?
        var moreComing: Bool?
        var records: [Record]?
        var seen = KeysSeen()
        try reader.readObject { reader, key throws(JSONBytesReader.Declined) in
            switch key {
            case "zoneID" where seen.first(0): zoneID = try ZoneID(from: &reader)
            case "syncToken" where seen.first(1): syncToken = try reader.readString()
            case "moreComing" where seen.first(2): moreComing = try reader.readBool()
            case "records" where seen.first(3): records = try reader.readRecords(isResult: false)
            case "serverErrorCode": throw JSONBytesReader.Declined()
            default: try reader.skipValue()
            }
        }
        guard let zoneID, let syncToken, let moreComing, let records else { throw JSONBytesReader.Declined() }
        self.init(zoneID: zoneID, syncToken: syncToken, moreComing: moreComing, records: records)
    }
}

extension ZoneChangesResponse: JSONBytesReadable {
    /// A response whose zones are all pages of changes; one with an error result is declined.
    package init(from reader: inout JSONBytesReader) throws(JSONBytesReader.Declined) {
        var zones: [ZoneChangesResult]?
        try reader.readObject { reader, key throws(JSONBytesReader.Declined) in
            guard key == "zones" && zones == nil else { return try reader.skipValue() }
            var results: [ZoneChangesResult] = []
            try reader.readArray { reader throws(JSONBytesReader.Declined) in
                results.append(.value(try ZoneChanges(from: &reader)))
            }
            zones = results
        }
        guard let zones else { throw JSONBytesReader.Declined() }
        self.init(zones: zones)
    }
}

extension NotificationsResponse: JSONBytesReadable {
    /// A long poll's answer: the pages of zone changes it carries read as a `changes/zone` answer's
    /// are, its zones, notifications and database changes (a few small values) by the decoder.
    package init(from reader: inout JSONBytesReader) throws(JSONBytesReader.Declined) {
        var changed: Bool?
        var syncToken: String?
        var zones: [ZoneReference]?
        var notifications: [PushNotification]?
        var databaseChanges: DatabaseChangesResponse?
        var zoneChanges: [ZoneChanges]?
        var seen = KeysSeen()
        try reader.readObject { reader, key throws(JSONBytesReader.Declined) in
            switch key {
            case "changed" where seen.first(0): changed = try reader.readBool()
            case "syncToken" where seen.first(1): syncToken = try reader.readString()
            case "zones" where seen.first(2): zones = try reader.readDecoded([ZoneReference].self)
            case "notifications" where seen.first(3):
                notifications = try reader.readNull() ? nil : reader.readDecoded([PushNotification].self)
            case "databaseChanges" where seen.first(4):
                databaseChanges = try reader.readNull() ? nil : reader.readDecoded(DatabaseChangesResponse.self)
            case "zoneChanges" where seen.first(5):
                guard try !reader.readNull() else { return }
                var pages: [ZoneChanges] = []
                try reader.readArray { reader throws(JSONBytesReader.Declined) in pages.append(try ZoneChanges(from: &reader)) }
                zoneChanges = pages
            default: try reader.skipValue()
            }
        }
        guard let changed, let syncToken, let zones else { throw JSONBytesReader.Declined() }
        self.init(
            changed: changed, syncToken: syncToken, zones: zones, notifications: notifications, databaseChanges: databaseChanges,
            zoneChanges: zoneChanges)
    }
}
