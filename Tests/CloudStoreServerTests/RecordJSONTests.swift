import CloudStoreTesting
import CloudStoreWire
import Foundation
import Testing

@testable import CloudStoreServer

/// Records written from their stored JSON must be the very bytes the wire encoder writes for the
/// same record: the sync path splices, everything else encodes, and clients cannot tell.
@Suite("Records spliced from stored JSON")
struct RecordJSONTests {
    let stamp = Record.Stamp(timestamp: Date(timeIntervalSince1970: 1_800_000_000.123), userRecordName: "_u1", deviceID: "d")

    /// Characters that need escaping, or look as if they might: every control character, quotes,
    /// backslashes, slashes, non-ASCII, and text that looks like the JSON around it.
    static let troublesome: [String] = {
        var texts = (0..<0x20).map { String(UnicodeScalar(UInt8($0))) }
        texts += ["\"", "\\", "/", "\u{7F}", "é", "日本", "🙂", "\u{2028}", "\u{FEFF}", "\"records\":[]", "\\\"", "}", "{\"created\":"]
        return texts
    }()

    static func text(_ generator: inout SeededRandomNumberGenerator) -> String {
        let count = Int.random(in: 0...6, using: &generator)
        return (0..<count).map { _ in
            generator.chance(0.5) ? troublesome.randomElement(using: &generator)! : String("abcXYZ09 _.-".randomElement(using: &generator)!)
        }.joined()
    }

    static func value(_ generator: inout SeededRandomNumberGenerator, depth: Int = 0) -> FieldValue {
        switch Int.random(in: 0..<(depth == 0 ? 9 : 8), using: &generator) {
        case 0: .string(text(&generator))
        case 1: .int64(Int64.random(in: Int64.min...Int64.max, using: &generator))
        case 2: .double(Double.random(in: -1e12...1e12, using: &generator))
        case 3: .timestamp(Date(timeIntervalSince1970: Double(Int64.random(in: 0...4_000_000_000_000, using: &generator)) / 1000))
        case 4: .bytes(Data((0..<Int.random(in: 0...20, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }))
        case 5: .reference(Reference(recordName: text(&generator).isEmpty ? "R" : "R" + text(&generator), action: .deleteSelf))
        case 6: .location(Location(latitude: 1.5, longitude: -2.25))
        case 7: .asset(Asset(fileChecksum: text(&generator), size: 12, downloadURL: "/d/" + text(&generator)))
        default: .list((0..<Int.random(in: 1...3, using: &generator)).map { _ in .int64(Int64.random(in: -9...9, using: &generator)) })
        }
    }

    func row(
        _ generator: inout SeededRandomNumberGenerator, zone: ZoneAddress, tombstone: Bool = false
    ) throws -> StoredRecord {
        var fields: [String: FieldValue] = [:]
        for index in 0..<Int.random(in: 0...6, using: &generator) {
            fields["f\(index)\(["", "_x", ".y"].randomElement(using: &generator)!)"] = Self.value(&generator)
        }
        var created = stamp
        created.userRecordName = generator.chance(0.2) ? nil : "_" + Self.text(&generator)
        created.deviceID = generator.chance(0.3) ? nil : Self.text(&generator)
        let content = try StoredContent(RecordContent(fields: fields, created: created, modified: stamp))
        return StoredRecord(
            name: "N-" + Self.text(&generator), type: "Note", seq: Int64.random(in: 1...1_000_000, using: &generator),
            content: tombstone ? nil : content, deletedAt: tombstone ? Date(timeIntervalSince1970: 1_800_000_000) : nil)
    }

    @Test func liveRowsAndTombstones_areTheEncodersBytes() throws {
        var generator = SeededRandomNumberGenerator(seed: 20261124)
        let partition = DatabasePartition(container: "c", environment: .development, scope: .private, owner: "_o\"w/n\u{1}")
        for round in 0..<400 {
            let zone = partition.zone(round % 2 == 0 ? "Notes" : "Z \\ \"q\" é")
            let writer = try RecordWriter(zone: zone, numbersAsStrings: false)
            let row = try row(&generator, zone: zone, tombstone: round % 7 == 0)
            let expected = Array(try WireCoding.encode(try row.presented(in: zone)))
            let written = try writer.json(row)
            #expect(String(decoding: written, as: UTF8.self) == String(decoding: expected, as: UTF8.self), "round \(round)")
            #expect(written == expected, "round \(round)")
            #expect(try WireCoding.decode(Record.self, from: Data(written)) == row.presented(in: zone))
        }
    }

    @Test func numbersAsStringsAndDesiredKeys_goThroughTheEncoder() throws {
        var generator = SeededRandomNumberGenerator(seed: 7)
        let zone = DatabasePartition(container: "c", environment: .development, scope: .private, owner: "_o").zone("Notes")
        for _ in 0..<50 {
            let row = try row(&generator, zone: zone)
            let asStrings = try RecordWriter(zone: zone, numbersAsStrings: true).json(row)
            #expect(asStrings == Array(try WireCoding.makeEncoder(numbersAsStrings: true).encode(row.presented(in: zone))))
            let some = try RecordWriter(zone: zone, numbersAsStrings: false).json(row, desiredKeys: ["f0", "f2"])
            #expect(some == Array(try WireCoding.encode(row.presented(in: zone, desiredKeys: ["f0", "f2"]))))
        }
    }

    /// Content stored in another layout (whitespace, another key order) is decoded and encoded.
    @Test func contentInAnotherLayout_isEncodedAfresh() throws {
        let zone = DatabasePartition(container: "c", environment: .development, scope: .private, owner: "_o").zone("Notes")
        let json = #"{ "modified": {"timestamp": 5}, "fields": {"a": {"type": "INT64", "value": 1}}, "created": {"timestamp": 4} }"#
        #expect(RecordJSON.ContentParts(json) == nil)
        let row = StoredRecord(name: "N", type: "Note", seq: 3, content: StoredContent(json: json), deletedAt: nil)
        let written = try RecordWriter(zone: zone, numbersAsStrings: false).json(row)
        #expect(written == Array(try WireCoding.encode(try row.presented(in: zone))))
        #expect(try WireCoding.decode(Record.self, from: Data(written)).fields["a"] == .int64(1))
    }

    @Test func contentParts_findTheThreeObjects() throws {
        let content = RecordContent(
            fields: ["t": .string("}\"{\\"), "l": .list([.int64(1)])], created: stamp, modified: stamp)
        let stored = try StoredContent(content)
        let parts = try #require(stored.parts)
        let bytes = Array(stored.json.utf8)
        #expect(Array(bytes[parts.fields]) == Array(try WireCoding.encode(content.fields)))
        #expect(Array(bytes[parts.created]) == Array(try WireCoding.encode(stamp)))
        for broken in ["", "{", #"{"created":{}"#, #"{"created":{},"fields":{},"modified":{}} "#, #"{"created":{"a":"}"#] {
            #expect(RecordJSON.ContentParts(broken) == nil, "\(broken)")
        }
    }

    /// A whole response spliced from its parts equals the response encoded in one piece.
    @Test func splicedResponses_equalTheEncodedResponse() throws {
        var generator = SeededRandomNumberGenerator(seed: 99)
        let partition = DatabasePartition(container: "c", environment: .development, scope: .private, owner: "_o")
        var results: [ZoneChangesResult] = []
        var shells: [ZoneChangesResult] = []
        var lists: [[[UInt8]]] = []
        for index in 0..<4 {
            let zone = partition.zone("Z\(index)")
            if index == 2 {
                let error = ServerError(.zoneNotFound, reason: "\"records\":[] is not here", zoneID: zone.zoneID)
                results.append(.error(error))
                shells.append(.error(error))
                continue
            }
            let writer = try RecordWriter(zone: zone, numbersAsStrings: false)
            let rows = try (0..<index * 2).map { _ in try row(&generator, zone: zone, tombstone: generator.chance(0.2)) }
            let changes = ZoneChanges(zoneID: zone.zoneID, syncToken: "t\(index)", moreComing: index == 1, records: [])
            var full = changes
            full.records = try rows.map { try $0.presented(in: zone) }
            results.append(.value(full))
            shells.append(.value(changes))
            lists.append(try rows.map { try writer.json($0) })
        }
        let shell = Array(try WireCoding.encode(ZoneChangesResponse(zones: shells)))
        let spliced = try JSONResponse.splice(lists, into: shell)
        #expect(spliced == Array(try WireCoding.encode(ZoneChangesResponse(zones: results))))
        #expect(throws: JSONResponse.SpliceMismatch.self) { try JSONResponse.splice(lists + [[]], into: shell) }
        #expect(throws: JSONResponse.SpliceMismatch.self) { try JSONResponse.splice(Array(lists.dropLast()), into: shell) }
    }
}
