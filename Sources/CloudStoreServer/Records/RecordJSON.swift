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

    /// Appends a row as the wire shows it with every field and numbers as numbers, its assets'
    /// download paths made `assetURLs`' URLs; false (and nothing appended) when the stored content
    /// is not laid out as expected.
    static func append(
        _ row: StoredRecord, zoneJSON: [UInt8], assetURLs: AssetDownloadURLs? = nil, to json: inout JSONBytes
    ) -> Bool {
        guard let content = row.content else {
            json.object { json in
                json.member("deleted", bool: true)
                appendIdentity(row, zoneJSON: zoneJSON, to: &json)
            }
            return true
        }
        guard let parts = content.parts else { return false }
        var text = content.json
        text.withUTF8 { bytes in
            json.object { json in
                json.member("created")
                json.raw(bytes[parts.created])
                json.member("deleted", bool: false)
                json.member("fields")
                if let assetURLs {
                    assetURLs.appendFields(bytes[parts.fields], to: &json)
                } else {
                    json.raw(bytes[parts.fields])
                }
                json.member("modified")
                json.raw(bytes[parts.modified])
                appendIdentity(row, zoneJSON: zoneJSON, to: &json)
            }
        }
        return true
    }

    /// The members `recordChangeTag`, `recordName`, `recordType` and `zoneID`.
    private static func appendIdentity(_ row: StoredRecord, zoneJSON: [UInt8], to json: inout JSONBytes) {
        json.member("recordChangeTag", string: row.changeTag)
        json.member("recordName", string: row.name)
        json.member("recordType", string: row.type)
        json.member("zoneID")
        json.raw(zoneJSON)
    }
}

/// Writes the records of one response in one zone: from the stored JSON when the caller wants
/// every field with numbers as numbers (the sync path), through the encoder when it asked for
/// some fields (`desiredKeys`) or for numbers as strings, and for the zone's share record, which
/// carries the share (WireProtocol.md §6) with `currentUserParticipant` for the caller.
struct RecordWriter {
    let zone: ZoneAddress
    private let numbersAsStrings: Bool
    private let zoneJSON: [UInt8]
    private let share: StoredShare?
    private let caller: String
    private let assetURLs: AssetDownloadURLs?

    /// - Parameters:
    ///   - share: the zone's share, when the response may hold its share record.
    ///   - caller: the userRecordName the share's `currentUserParticipant` is computed for.
    ///   - assetURLs: how the records' asset download URLs read (the call's); nil leaves the
    ///     stored paths.
    init(
        zone: ZoneAddress, numbersAsStrings: Bool, share: StoredShare? = nil, caller: String = "",
        assetURLs: AssetDownloadURLs? = nil
    ) throws {
        self.zone = zone
        self.numbersAsStrings = numbersAsStrings
        self.share = share
        self.caller = caller
        self.assetURLs = assetURLs
        zoneJSON = try WireCoding.encodedBytes(zone.zoneID)
    }

    /// A record as this answer shows it: its asset download URLs made the call's.
    private func presenting(_ record: Record) -> Record {
        assetURLs?.presenting(record) ?? record
    }

    /// A stored row (live or tombstone) as a record of the response.
    func json(_ row: StoredRecord, desiredKeys: [String]? = nil) throws -> [UInt8] {
        if let share, row.isLiveShareRecord {
            var record = presenting(try row.presented(in: zone, desiredKeys: desiredKeys))
            record.share = share.metadata(for: caller)
            return try WireCoding.encodedBytes(record, numbersAsStrings: numbersAsStrings)
        }
        if desiredKeys == nil && !numbersAsStrings {
            var json = JSONBytes(capacity: (row.content?.json.utf8.count ?? 0) + 160)
            if RecordJSON.append(row, zoneJSON: zoneJSON, assetURLs: assetURLs, to: &json) { return json.bytes }
        }
        return try WireCoding.encodedBytes(
            presenting(try row.presented(in: zone, desiredKeys: desiredKeys)), numbersAsStrings: numbersAsStrings)
    }

    /// Any other item of a response (an error, with a conflict's `serverRecord`; a delete's result).
    func json(_ result: RecordResult) throws -> [UInt8] {
        var result = result
        if case .error(var error) = result, let record = error.serverRecord {
            error.serverRecord = presenting(record)
            result = .error(error)
        }
        return try WireCoding.encodedBytes(result, numbersAsStrings: numbersAsStrings)
    }
}
