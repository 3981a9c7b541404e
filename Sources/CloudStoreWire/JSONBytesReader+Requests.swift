import Foundation

// The requests on the hot path of the server read straight from bytes: records/modify (with its
// records), records/lookup and changes/zone. Each reader follows its type's synthesized
// `init(from:)` (optionals through `decodeIfPresent`, so `null` reads as nil) and declines what it
// does not handle; the server then decodes the body with `JSONDecoder`, whose error names the
// problem (see ``JSONBytesReadable``).

extension JSONBytesReader {
    /// A boolean, or nil for `null`.
    mutating func readOptionalBool() throws(Declined) -> Bool? {
        try readNull() ? nil : readBool()
    }

    /// An integer written as plain digits (``readInt64()``), or nil for `null`.
    mutating func readOptionalInt() throws(Declined) -> Int? {
        try readNull() ? nil : Int(readInt64())
    }

    /// A value its type reads, or nil for `null`.
    mutating func readOptional<Value: JSONBytesReadable>(_ type: Value.Type) throws(Declined) -> Value? {
        try readNull() ? nil : Value(from: &self)
    }

    /// An array of values their type reads.
    mutating func readArray<Element: JSONBytesReadable>(of type: Element.Type) throws(Declined) -> [Element] {
        var elements: [Element] = []
        try readArray { reader throws(Declined) in elements.append(try Element(from: &reader)) }
        return elements
    }

    /// An array of strings (`desiredKeys`), or nil for `null`.
    mutating func readOptionalStrings() throws(Declined) -> [String]? {
        guard try !readNull() else { return nil }
        var strings: [String] = []
        try readArray { reader throws(Declined) in strings.append(try reader.readString()) }
        return strings
    }
}

extension RecordsModifyRequest.Operation: JSONBytesReadable {
    package init(from reader: inout JSONBytesReader) throws(JSONBytesReader.Declined) {
        var operationType: RecordsModifyRequest.OperationType?
        var record: Record?
        var desiredKeys: [String]?
        var seen = KeysSeen()
        try reader.readObject { reader, key throws(JSONBytesReader.Declined) in
            switch key {
            case "operationType" where seen.first(0):
                guard let type = RecordsModifyRequest.OperationType(rawValue: try reader.readString()) else {
                    throw JSONBytesReader.Declined()
                }
                operationType = type
            case "record" where seen.first(1): record = try Record(from: &reader)
            case "desiredKeys" where seen.first(2): desiredKeys = try reader.readOptionalStrings()
            default: try reader.skipValue()
            }
        }
        guard let operationType, let record else { throw JSONBytesReader.Declined() }
        self.init(operationType, record, desiredKeys: desiredKeys)
    }
}

extension RecordsModifyRequest: JSONBytesReadable {
    /// A request whose records are all of the shapes ``Record``'s reader reads (no share record).
    package init(from reader: inout JSONBytesReader) throws(JSONBytesReader.Declined) {
        var request = RecordsModifyRequest(operations: [])
        var seen = KeysSeen()
        try reader.readObject { reader, key throws(JSONBytesReader.Declined) in
            switch key {
            case "zoneID" where seen.first(0): request.zoneID = try reader.readOptional(ZoneID.self)
            case "atomic" where seen.first(1): request.atomic = try reader.readOptionalBool()
            case "operations" where seen.first(2): request.operations = try reader.readArray(of: Operation.self)
            case "desiredKeys" where seen.first(3): request.desiredKeys = try reader.readOptionalStrings()
            case "numbersAsStrings" where seen.first(4): request.numbersAsStrings = try reader.readOptionalBool()
            case "syncToken" where seen.first(5): request.syncToken = try reader.readOptionalString()
            default: try reader.skipValue()
            }
        }
        guard seen.contains(2) else { throw JSONBytesReader.Declined() }
        self = request
    }
}

extension RecordsLookupRequest.Item: JSONBytesReadable {
    package init(from reader: inout JSONBytesReader) throws(JSONBytesReader.Declined) {
        var recordName: String?
        var desiredKeys: [String]?
        var seen = KeysSeen()
        try reader.readObject { reader, key throws(JSONBytesReader.Declined) in
            switch key {
            case "recordName" where seen.first(0): recordName = try reader.readString()
            case "desiredKeys" where seen.first(1): desiredKeys = try reader.readOptionalStrings()
            default: try reader.skipValue()
            }
        }
        guard let recordName else { throw JSONBytesReader.Declined() }
        self.init(recordName: recordName, desiredKeys: desiredKeys)
    }
}

extension RecordsLookupRequest: JSONBytesReadable {
    package init(from reader: inout JSONBytesReader) throws(JSONBytesReader.Declined) {
        var request = RecordsLookupRequest(recordNames: [])
        var seen = KeysSeen()
        try reader.readObject { reader, key throws(JSONBytesReader.Declined) in
            switch key {
            case "zoneID" where seen.first(0): request.zoneID = try reader.readOptional(ZoneID.self)
            case "records" where seen.first(1): request.records = try reader.readArray(of: Item.self)
            case "desiredKeys" where seen.first(2): request.desiredKeys = try reader.readOptionalStrings()
            case "numbersAsStrings" where seen.first(3): request.numbersAsStrings = try reader.readOptionalBool()
            default: try reader.skipValue()
            }
        }
        guard seen.contains(1) else { throw JSONBytesReader.Declined() }
        self = request
    }
}

extension ZoneChangesRequest.Zone: JSONBytesReadable {
    package init(from reader: inout JSONBytesReader) throws(JSONBytesReader.Declined) {
        var zoneID: ZoneID?
        var zone = ZoneChangesRequest.Zone(zoneID: .default)
        var seen = KeysSeen()
        try reader.readObject { reader, key throws(JSONBytesReader.Declined) in
            switch key {
            case "zoneID" where seen.first(0): zoneID = try ZoneID(from: &reader)
            case "syncToken" where seen.first(1): zone.syncToken = try reader.readOptionalString()
            case "resultsLimit" where seen.first(2): zone.resultsLimit = try reader.readOptionalInt()
            case "desiredKeys" where seen.first(3): zone.desiredKeys = try reader.readOptionalStrings()
            case "desiredRecordTypes" where seen.first(4): zone.desiredRecordTypes = try reader.readOptionalStrings()
            default: try reader.skipValue()
            }
        }
        guard let zoneID else { throw JSONBytesReader.Declined() }
        zone.zoneID = zoneID
        self = zone
    }
}

extension ZoneChangesRequest: JSONBytesReadable {
    package init(from reader: inout JSONBytesReader) throws(JSONBytesReader.Declined) {
        var request = ZoneChangesRequest(zones: [])
        var seen = KeysSeen()
        try reader.readObject { reader, key throws(JSONBytesReader.Declined) in
            switch key {
            case "zones" where seen.first(0): request.zones = try reader.readArray(of: Zone.self)
            case "resultsLimit" where seen.first(1): request.resultsLimit = try reader.readOptionalInt()
            case "desiredKeys" where seen.first(2): request.desiredKeys = try reader.readOptionalStrings()
            case "desiredRecordTypes" where seen.first(3): request.desiredRecordTypes = try reader.readOptionalStrings()
            case "numbersAsStrings" where seen.first(4): request.numbersAsStrings = try reader.readOptionalBool()
            default: try reader.skipValue()
            }
        }
        guard seen.contains(0) else { throw JSONBytesReader.Declined() }
        self = request
    }
}
