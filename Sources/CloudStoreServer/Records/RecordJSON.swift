import CloudStoreWire
import Foundation

/// Records written into responses from the JSON stored with them: the bytes `WireCoding`'s
/// encoder writes for the same ``Record`` (keys sorted), without decoding the stored content or
/// encoding it again. A record is encoded once, when it is written (``StoredContent``).
///
/// A live record reads
/// `{"created":C,"deleted":false,"fields":F,"modified":M,"recordChangeTag":…,"recordName":…,"recordType":…,"zoneID":Z}`
/// with `C`, `F` and `M` the stored spans; a tombstone
/// `{"deleted":true,"recordChangeTag":…,"recordName":…,"recordType":…,"zoneID":Z}`.
enum RecordJSON {
    /// Where `created`, `fields` and `modified` are in a stored content's UTF-8, as this server
    /// writes it: `{"created":{…},"fields":{…},"modified":{…}}`.
    struct ContentParts: Hashable, Sendable {
        var created: Range<Int>
        var fields: Range<Int>
        var modified: Range<Int>

        /// Nil when the JSON is laid out otherwise (a response then decodes and encodes it).
        init?(_ json: String) {
            var json = json
            guard
                let parts = json.withUTF8({ bytes -> ContentParts? in
                    var index = 0
                    guard let created = Self.member("created", first: true, bytes, &index),
                        let fields = Self.member("fields", first: false, bytes, &index),
                        let modified = Self.member("modified", first: false, bytes, &index),
                        index == bytes.count - 1, bytes[index] == UInt8(ascii: "}")
                    else { return nil }
                    return ContentParts(created: created, fields: fields, modified: modified)
                })
            else { return nil }
            self = parts
        }

        private init(created: Range<Int>, fields: Range<Int>, modified: Range<Int>) {
            self.created = created
            self.fields = fields
            self.modified = modified
        }

        /// Reads `{"key":` (or `,"key":`) at `index` and the object after it; answers the
        /// object's span and moves `index` past it.
        private static func member(_ key: String, first: Bool, _ bytes: UnsafeBufferPointer<UInt8>, _ index: inout Int)
            -> Range<Int>?
        {
            let prefix = Array(((first ? "{" : ",") + "\"\(key)\":").utf8)
            guard bytes.count - index > prefix.count, bytes[index..<index + prefix.count].elementsEqual(prefix) else {
                return nil
            }
            let start = index + prefix.count
            guard let end = objectEnd(bytes, from: start) else { return nil }
            index = end
            return start..<end
        }

        /// The index just past the JSON object that starts at `start`, minding strings and escapes.
        static func objectEnd(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int? {
            guard start < bytes.count, bytes[start] == UInt8(ascii: "{") else { return nil }
            var depth = 0
            var inString = false
            var index = start
            while index < bytes.count {
                let byte = bytes[index]
                if inString {
                    if byte == UInt8(ascii: "\\") {
                        index += 1
                    } else if byte == UInt8(ascii: "\"") {
                        inString = false
                    }
                } else {
                    switch byte {
                    case UInt8(ascii: "\""): inString = true
                    case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                    case UInt8(ascii: "}"), UInt8(ascii: "]"):
                        depth -= 1
                        if depth == 0 { return index + 1 }
                    default: break
                    }
                }
                index += 1
            }
            return nil
        }
    }

    /// Appends a row as the wire shows it with every field and numbers as numbers; false (and
    /// nothing appended) when the stored content is not laid out as expected.
    static func append(_ row: StoredRecord, zoneJSON: [UInt8], to out: inout [UInt8]) -> Bool {
        guard let content = row.content else {
            out.append(contentsOf: #"{"deleted":true,"#.utf8)
            appendIdentity(row, zoneJSON: zoneJSON, to: &out)
            return true
        }
        guard let parts = content.parts else { return false }
        var json = content.json
        json.withUTF8 { bytes in
            out.append(contentsOf: #"{"created":"#.utf8)
            out.append(contentsOf: bytes[parts.created])
            out.append(contentsOf: #","deleted":false,"fields":"#.utf8)
            out.append(contentsOf: bytes[parts.fields])
            out.append(contentsOf: #","modified":"#.utf8)
            out.append(contentsOf: bytes[parts.modified])
        }
        out.append(UInt8(ascii: ","))
        appendIdentity(row, zoneJSON: zoneJSON, to: &out)
        return true
    }

    /// `"recordChangeTag":…,"recordName":…,"recordType":…,"zoneID":Z}`
    private static func appendIdentity(_ row: StoredRecord, zoneJSON: [UInt8], to out: inout [UInt8]) {
        out.append(contentsOf: #""recordChangeTag":"#.utf8)
        appendString(row.changeTag, to: &out)
        out.append(contentsOf: #","recordName":"#.utf8)
        appendString(row.name, to: &out)
        out.append(contentsOf: #","recordType":"#.utf8)
        appendString(row.type, to: &out)
        out.append(contentsOf: #","zoneID":"#.utf8)
        out.append(contentsOf: zoneJSON)
        out.append(UInt8(ascii: "}"))
    }

    /// A JSON string as `WireCoding`'s encoder writes it: `"` and `\` escaped, control characters
    /// as `\b`, `\f`, `\n`, `\r`, `\t` or `\u00XX`, everything else (`/` and non-ASCII included)
    /// as it is.
    static func appendString(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { bytes in
            var runStart = 0
            for (index, byte) in bytes.enumerated() where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                out.append(contentsOf: bytes[runStart..<index])
                runStart = index + 1
                switch byte {
                case UInt8(ascii: "\""): out.append(contentsOf: #"\""#.utf8)
                case UInt8(ascii: "\\"): out.append(contentsOf: #"\\"#.utf8)
                case 0x08: out.append(contentsOf: #"\b"#.utf8)
                case 0x0C: out.append(contentsOf: #"\f"#.utf8)
                case 0x0A: out.append(contentsOf: #"\n"#.utf8)
                case 0x0D: out.append(contentsOf: #"\r"#.utf8)
                case 0x09: out.append(contentsOf: #"\t"#.utf8)
                default:
                    let hex = Array("0123456789abcdef".utf8)
                    out.append(contentsOf: #"\u00"#.utf8)
                    out.append(hex[Int(byte >> 4)])
                    out.append(hex[Int(byte & 0x0F)])
                }
            }
            out.append(contentsOf: bytes[runStart...])
        }
        out.append(UInt8(ascii: "\""))
    }
}

/// Writes the records of one response in one zone: from the stored JSON when the caller wants
/// every field with numbers as numbers (the sync path), through the encoder when it asked for
/// some fields (`desiredKeys`) or for numbers as strings.
struct RecordWriter {
    let zone: ZoneAddress
    private let encoder: JSONEncoder
    private let numbersAsStrings: Bool
    private let zoneJSON: [UInt8]

    init(zone: ZoneAddress, numbersAsStrings: Bool) throws {
        self.zone = zone
        self.numbersAsStrings = numbersAsStrings
        encoder = WireCoding.makeEncoder(numbersAsStrings: numbersAsStrings)
        zoneJSON = Array(try encoder.encode(zone.zoneID))
    }

    /// A stored row (live or tombstone) as a record of the response.
    func json(_ row: StoredRecord, desiredKeys: [String]? = nil) throws -> [UInt8] {
        if desiredKeys == nil && !numbersAsStrings {
            var out: [UInt8] = []
            if RecordJSON.append(row, zoneJSON: zoneJSON, to: &out) { return out }
        }
        return Array(try encoder.encode(try row.presented(in: zone, desiredKeys: desiredKeys)))
    }

    /// Any other item of a response (an error, a delete's result).
    func json(_ result: RecordResult) throws -> [UInt8] {
        Array(try encoder.encode(result))
    }
}
