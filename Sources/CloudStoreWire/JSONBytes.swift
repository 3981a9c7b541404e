import Foundation

/// A wire value that writes its JSON straight to bytes, without Codable's machinery.
///
/// The Codable conformance stays the definition of the wire shape; a type conforms here only on
/// the hot path of sync (records, their fields and stamps, a records/modify request), and
/// `JSONBytesTests` holds both to the same bytes for every such type. ``WireCoding/encode(_:numbersAsStrings:)``
/// uses this path when the value has it.
public protocol JSONBytesWritable {
    /// Appends the value's JSON, as `WireCoding`'s encoder writes it.
    func write(to json: inout JSONBytes) throws
}

/// JSON being written as UTF-8 bytes, the way `WireCoding`'s `JSONEncoder` writes it: no
/// whitespace, object keys in sorted order (each writer emits its members sorted), slashes not
/// escaped, integers and doubles as Foundation prints them.
public struct JSONBytes {
    public private(set) var bytes: [UInt8] = []
    /// Write `INT64` field values as strings, as a request's `numbersAsStrings: true` asks.
    public let numbersAsStrings: Bool
    /// Whether the next member of the object being written is its first.
    private var first = true

    public init(numbersAsStrings: Bool = false, capacity: Int = 256) {
        self.numbersAsStrings = numbersAsStrings
        bytes.reserveCapacity(capacity)
    }

    // MARK: Objects and arrays

    /// Writes an object; `body` writes its members with ``member(_:)`` in sorted key order.
    public mutating func object(_ body: (inout JSONBytes) throws -> Void) rethrows {
        bytes.append(UInt8(ascii: "{"))
        let outer = first
        first = true
        try body(&self)
        first = outer
        bytes.append(UInt8(ascii: "}"))
    }

    /// Starts a member of the current object: its key and the colon. The value follows.
    public mutating func member(_ key: StaticString) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        first = false
        bytes.append(UInt8(ascii: "\""))
        key.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
    }

    /// A string member, left out when nil (`encodeIfPresent`).
    public mutating func member(_ key: StaticString, string value: String?) {
        guard let value else { return }
        member(key)
        string(value)
    }

    /// A double member, left out when nil.
    public mutating func member(_ key: StaticString, double value: Double?) throws {
        guard let value else { return }
        member(key)
        try double(value)
    }

    /// An integer member, left out when nil.
    public mutating func member(_ key: StaticString, int value: Int64?) {
        guard let value else { return }
        member(key)
        int(value)
    }

    /// A member off the hot path (a share's participants), written by `WireCoding`'s encoder, left
    /// out when nil.
    public mutating func member(_ key: StaticString, encoded value: (some Encodable)?) throws {
        guard let value else { return }
        member(key)
        raw(try WireCoding.makeEncoder(numbersAsStrings: numbersAsStrings).encode(value))
    }

    /// A member written by its own writer, left out when nil.
    public mutating func member(_ key: StaticString, value: (some JSONBytesWritable)?) throws {
        guard let value else { return }
        member(key)
        try value.write(to: &self)
    }

    /// A member that is an array of strings, left out when nil.
    public mutating func member(_ key: StaticString, strings value: [String]?) {
        guard let value else { return }
        member(key)
        array(value) { json, text in json.string(text) }
    }

    /// A boolean member, left out when nil.
    public mutating func member(_ key: StaticString, bool value: Bool?) {
        guard let value else { return }
        member(key)
        bool(value)
    }

    /// Starts a member whose key is not known in advance (a field name).
    public mutating func member(dynamic key: String) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        first = false
        string(key)
        bytes.append(UInt8(ascii: ":"))
    }

    /// Writes an array of `elements`.
    public mutating func array<Element>(_ elements: some Sequence<Element>, _ write: (inout JSONBytes, Element) throws -> Void)
        rethrows
    {
        bytes.append(UInt8(ascii: "["))
        var isFirst = true
        for element in elements {
            if !isFirst { bytes.append(UInt8(ascii: ",")) }
            isFirst = false
            try write(&self, element)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// Writes a dictionary as an object with its keys sorted as `JSONEncoder`'s `.sortedKeys` sorts them.
    public mutating func dictionary<Value>(_ dictionary: [String: Value], _ write: (inout JSONBytes, Value) throws -> Void)
        rethrows
    {
        // A concrete `[Int]` of positions sorted by key: sorting anything generic over `Value`
        // here ran the standard library's unspecialized sort, and sorting the keys alone hashed
        // each one again to find its value.
        var keys: [String] = []
        var values: [Value] = []
        keys.reserveCapacity(dictionary.count)
        values.reserveCapacity(dictionary.count)
        for (key, value) in dictionary {
            keys.append(key)
            values.append(value)
        }
        var order = Array(keys.indices)
        order.sort { Self.keyOrder(keys[$0], keys[$1]) }
        try object { json in
            for position in order {
                json.member(dynamic: keys[position])
                try write(&json, values[position])
            }
        }
    }

    /// `.sortedKeys` order: the keys' UTF-8 bytes compared lexicographically (with `memcmp` when
    /// both strings hold their UTF-8 contiguously, as native strings do).
    static func keyOrder(_ a: String, _ b: String) -> Bool {
        let compared = a.utf8.withContiguousStorageIfAvailable { a in
            b.utf8.withContiguousStorageIfAvailable { b in
                let common = min(a.count, b.count)
                let order = common == 0 ? 0 : memcmp(a.baseAddress!, b.baseAddress!, common)
                return order != 0 ? order < 0 : a.count < b.count
            }
        }
        return (compared ?? nil) ?? a.utf8.lexicographicallyPrecedes(b.utf8)
    }

    // MARK: Scalars

    public mutating func null() {
        bytes.append(contentsOf: [UInt8(ascii: "n"), UInt8(ascii: "u"), UInt8(ascii: "l"), UInt8(ascii: "l")])
    }

    public mutating func bool(_ value: Bool) {
        let text: StaticString = value ? "true" : "false"
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    public mutating func int(_ value: Int64) {
        bytes.append(contentsOf: String(value).utf8)
    }

    /// A finite double as Foundation's encoder prints it (`description`, without a trailing `.0`);
    /// JSON cannot carry infinities or NaN.
    ///
    /// With `keepingFraction` a whole value keeps its `.0` (`2.0`, not `2`): a `DOUBLE` field's
    /// value is written so, because typed clients (MistKit, Codable models) read `2` as an integer.
    /// Foundation's encoder cannot write `2.0`; this is the one place the two paths differ.
    public mutating func double(_ value: Double, keepingFraction: Bool = false) throws {
        guard value.isFinite else {
            throw EncodingError.invalidValue(value, EncodingError.Context(codingPath: [], debugDescription: "JSON cannot carry \(value)"))
        }
        var text = value.description
        if !keepingFraction, text.hasSuffix(".0") { text.removeLast(2) }
        bytes.append(contentsOf: text.utf8)
    }

    /// A string with `"` and `\` escaped, control characters as `\b`, `\f`, `\n`, `\r`, `\t` or
    /// `\u00XX`, everything else (`/` and non-ASCII included) as it is.
    public mutating func string(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { utf8 in
            var runStart = 0
            for index in utf8.indices {
                let byte = utf8[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                bytes.append(contentsOf: utf8[runStart..<index])
                runStart = index + 1
                switch byte {
                case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
                case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
                case 0x08: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "b")])
                case 0x0C: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "f")])
                case 0x0A: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
                case 0x0D: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
                case 0x09: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
                default:
                    let hex = Array("0123456789abcdef".utf8)
                    bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                    bytes.append(hex[Int(byte >> 4)])
                    bytes.append(hex[Int(byte & 0x0F)])
                }
            }
            bytes.append(contentsOf: utf8[runStart...])
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// `data` as a base64 string, as `data.base64EncodedString()` writes it.
    public mutating func base64(_ data: Data) {
        bytes.append(UInt8(ascii: "\""))
        Base64Bytes.encode(data, into: &bytes)
        bytes.append(UInt8(ascii: "\""))
    }

    /// Bytes that are already JSON (a stored record's content).
    public mutating func raw(_ json: some Sequence<UInt8>) {
        bytes.append(contentsOf: json)
    }

    /// Any other value through its writer.
    public mutating func value(_ value: some JSONBytesWritable) throws {
        try value.write(to: &self)
    }
}

// MARK: - The wire types on the hot path

extension Dictionary: JSONBytesWritable where Key == String, Value: JSONBytesWritable {
    /// An object with the keys sorted, as `.sortedKeys` writes a `[String: Value]`.
    public func write(to json: inout JSONBytes) throws {
        try json.dictionary(self) { json, value in try json.value(value) }
    }
}

extension ZoneID: JSONBytesWritable {
    public func write(to json: inout JSONBytes) throws {
        json.object { json in
            json.member("ownerRecordName", string: ownerRecordName)
            json.member("zoneName", string: zoneName)
        }
    }
}

extension Record.Stamp: JSONBytesWritable {
    public func write(to json: inout JSONBytes) throws {
        json.object { json in
            json.member("deviceID", string: deviceID)
            json.member("timestamp", int: timestamp.millisecondsSince1970)
            json.member("userRecordName", string: userRecordName)
        }
    }
}

extension Reference: JSONBytesWritable {
    public func write(to json: inout JSONBytes) throws {
        try json.object { json in
            json.member("action", string: action.rawValue)
            json.member("recordName", string: recordName)
            try json.member("zoneID", value: zoneID)
        }
    }
}

extension Location: JSONBytesWritable {
    public func write(to json: inout JSONBytes) throws {
        try json.object { json in
            try json.member("altitude", double: altitude)
            try json.member("course", double: course)
            try json.member("horizontalAccuracy", double: horizontalAccuracy)
            try json.member("latitude", double: latitude)
            try json.member("longitude", double: longitude)
            try json.member("speed", double: speed)
            json.member("timestamp", int: timestamp)
            try json.member("verticalAccuracy", double: verticalAccuracy)
        }
    }
}

extension Asset: JSONBytesWritable {
    public func write(to json: inout JSONBytes) throws {
        json.object { json in
            json.member("downloadURL", string: downloadURL)
            json.member("fileChecksum", string: fileChecksum)
            json.member("receipt", string: receipt)
            json.member("size", int: size)
        }
    }
}

extension JSONValue: JSONBytesWritable {
    public func write(to json: inout JSONBytes) throws {
        switch self {
        case .null: json.null()
        case .bool(let value): json.bool(value)
        case .number(let value): try json.double(value)
        case .string(let value): json.string(value)
        case .array(let values): try json.array(values) { json, value in try json.value(value) }
        case .object(let members): try json.dictionary(members) { json, value in try json.value(value) }
        }
    }
}

extension FieldValue: JSONBytesWritable {
    public func write(to json: inout JSONBytes) throws {
        try json.object { json in
            guard self != .null else {
                json.member("value")
                json.null()
                return
            }
            json.member("type", string: typeName)
            json.member("value")
            try writeValue(to: &json)
        }
    }

    private func writeValue(to json: inout JSONBytes) throws {
        switch self {
        case .string(let value): json.string(value)
        case .int64(let value):
            if json.numbersAsStrings { json.string(String(value)) } else { json.int(value) }
        case .double(let value): try json.double(value, keepingFraction: true)
        case .timestamp(let date): json.int(date.millisecondsSince1970)
        case .bytes(let data), .encryptedBytes(let data): json.base64(data)
        case .reference(let reference): try json.value(reference)
        case .location(let location): try json.value(location)
        case .asset(let asset): try json.value(asset)
        case .unknown(_, let value): try json.value(value)
        case .list(let values): try json.array(values) { json, value in try value.writeValue(to: &json) }
        case .null: json.null()
        }
    }
}

extension Record: JSONBytesWritable {
    public func write(to json: inout JSONBytes) throws {
        try json.object { json in
            try json.member("created", value: created)
            try json.member("currentUserParticipant", encoded: share?.currentUserParticipant)
            json.member("deleted", bool: deleted)
            if !deleted || !fields.isEmpty {
                try json.member("fields", value: fields)
            }
            try json.member("modified", value: modified)
            try json.member("owner", encoded: share?.owner)
            try json.member("participants", encoded: share?.participants)
            json.member("publicPermission", string: share?.publicPermission?.rawValue)
            json.member("recordChangeTag", string: recordChangeTag)
            json.member("recordName", string: recordName)
            json.member("recordType", string: recordType)
            json.member("shortGUID", string: share?.shortGUID)
            try json.member("zoneID", value: zoneID)
        }
    }
}

extension ServerError: JSONBytesWritable {
    public func write(to json: inout JSONBytes) throws {
        try json.object { json in
            json.member("reason", string: reason)
            json.member("recordName", string: recordName)
            json.member("redirectURL", string: redirectURL)
            try json.member("retryAfter", double: retryAfter)
            json.member("serverErrorCode", string: serverErrorCode.rawValue)
            try json.member("serverRecord", value: serverRecord)
            json.member("subscriptionID", string: subscriptionID)
            json.member("uuid", string: uuid)
            try json.member("zoneID", value: zoneID)
        }
    }
}

/// An item of an answer that carries records, so that a `CONFLICT`'s `serverRecord` is written as
/// every record is (a whole `DOUBLE` as `2.0`).
extension WireResult: JSONBytesWritable where Value: JSONBytesWritable {
    public func write(to json: inout JSONBytes) throws {
        switch self {
        case .value(let value): try value.write(to: &json)
        case .error(let error): try error.write(to: &json)
        }
    }
}

extension RecordsModifyRequest.Operation: JSONBytesWritable {
    public func write(to json: inout JSONBytes) throws {
        try json.object { json in
            json.member("desiredKeys", strings: desiredKeys)
            json.member("operationType", string: operationType.rawValue)
            try json.member("record", value: record)
        }
    }
}

extension RecordsModifyRequest: JSONBytesWritable {
    public func write(to json: inout JSONBytes) throws {
        try json.object { json in
            json.member("atomic", bool: atomic)
            json.member("desiredKeys", strings: desiredKeys)
            json.member("numbersAsStrings", bool: numbersAsStrings)
            json.member("operations")
            try json.array(operations) { json, operation in try json.value(operation) }
            json.member("syncToken", string: syncToken)
            try json.member("zoneID", value: zoneID)
        }
    }
}
