import CloudStoreTesting
import Foundation
import Testing

@testable import CloudStoreWire

/// The byte reader of the hot wire types against Foundation's decoder: whatever the reader reads,
/// the decoder reads to the same value; whatever the decoder rejects, the reader declines. For
/// random records and responses, their mutations, and the edge cases of JSON one by one.
@Suite("JSON bytes reader: the same as JSONDecoder")
struct JSONBytesReaderTests {
    /// Reads `data` both ways: a value the reader reads must be the decoder's, to the byte.
    /// Answers whether the reader read it.
    @discardableResult
    static func expectSameAsDecoder<T: Codable & JSONBytesReadable>(
        _ type: T.Type, _ data: Data, _ context: @autoclosure () -> String = ""
    ) throws -> Bool {
        let read = T(jsonBytes: data)
        // The wire refuses documents nested deeper than WireCoding.maxNesting before decoding them
        // (WireNestingTests); below that, it reads what the decoder reads.
        let decoded = (try? WireCoding.checkNesting(data)) == nil ? nil : try? JSONDecoder().decode(T.self, from: data)
        let text = String(decoding: data.prefix(400), as: UTF8.self)
        guard let read else {
            // Declined: WireCoding.decode answers as the decoder does.
            let wire = try? WireCoding.decode(T.self, from: data)
            #expect((wire == nil) == (decoded == nil), "\(T.self) \(context()): \(text)")
            return false
        }
        guard let decoded else {
            Issue.record("\(T.self) read what JSONDecoder rejects \(context()): \(text)")
            return true
        }
        #expect(try WireCoding.encode(read) == WireCoding.encode(decoded), "\(T.self) \(context()): \(text)")
        return true
    }

    /// A record with only the field types the reader reads, and names from a plain alphabet
    /// with the escapes writers emit.
    static func plainRecord(_ values: inout JSONBytesTests.Values) -> Record {
        func text() -> String {
            (0..<values.int(1...8)).map { _ in ["a", "Z", "0", " ", "\"", "\\", "\n", "é", "🙂", "/", "\u{1}"][values.int(0...10)] }
                .joined()
        }
        var fields: [String: FieldValue] = [:]
        for _ in 0..<values.int(0...8) {
            fields[text()] =
                switch values.int(0...6) {
                case 0: .string(text())
                case 1: .int64(Int64(values.int(-1_000_000...1_000_000)))
                case 2: .double(values.double())
                case 3: .timestamp(Date(millisecondsSince1970: Int64(values.int(0...2_000_000_000)) * 1000))
                case 4: .bytes(Data((0..<values.int(0...40)).map { _ in UInt8(values.int(0...255)) }))
                case 5: .encryptedBytes(Data((0..<values.int(0...80)).map { _ in UInt8(values.int(0...255)) }))
                default: .null
                }
        }
        let stamp = Record.Stamp(
            timestamp: Date(millisecondsSince1970: 1_763_700_000_000), userRecordName: "_u1", deviceID: values.chance(0.5) ? text() : nil)
        return Record(
            recordName: text(), recordType: values.chance(0.9) ? "Note" : nil, recordChangeTag: values.chance(0.8) ? text() : nil,
            zoneID: values.chance(0.9) ? ZoneID(zoneName: text(), ownerRecordName: values.chance(0.5) ? "_u1" : nil) : nil,
            fields: fields, created: values.chance(0.7) ? stamp : nil, modified: values.chance(0.7) ? stamp : nil,
            deleted: values.chance(0.1))
    }

    @Test(arguments: [1, 2, 3]) func plainResponses_areReadAsTheDecoderReadsThem(seed: UInt64) throws {
        var values = JSONBytesTests.Values(generator: SeededRandomNumberGenerator(seed: 7000 + seed))
        for round in 0..<200 {
            let records = (0..<values.int(0...5)).map { _ in Self.plainRecord(&values) }
            let modify = try WireCoding.encode(
                RecordsResponse(records: records.map(RecordResult.value), syncToken: values.chance(0.5) ? "t\(round)" : nil))
            #expect(try Self.expectSameAsDecoder(RecordsResponse.self, modify, "round \(round)"))
            let page = ZoneChanges(zoneID: ZoneID(zoneName: "Notes"), syncToken: "t\(round)", moreComing: values.chance(0.5), records: records)
            let changes = try WireCoding.encode(ZoneChangesResponse(zones: [.value(page)]))
            #expect(try Self.expectSameAsDecoder(ZoneChangesResponse.self, changes, "round \(round)"))
            for record in records {
                #expect(try Self.expectSameAsDecoder(Record.self, WireCoding.encode(record), "round \(round)"))
            }
            let poll = try WireCoding.encode(Self.poll(page, &values, round: round))
            #expect(try Self.expectSameAsDecoder(NotificationsResponse.self, poll, "round \(round)"))
        }
    }

    /// A long poll's answer carrying `page`, with or without notifications and database changes.
    static func poll(_ page: ZoneChanges, _ values: inout JSONBytesTests.Values, round: Int) -> NotificationsResponse {
        let zone = NotificationsResponse.ZoneReference(zoneID: page.zoneID)
        let notification = PushNotification(
            ck: PushNotification.CloudKitInfo(
                containerIdentifier: "iCloud.example", notificationID: "n\(round)",
                zone: PushNotification.ZoneInfo(subscriptionID: "s", zoneName: "Notes", zoneOwner: "_u1", database: .private)))
        return NotificationsResponse(
            changed: values.chance(0.8), syncToken: "d\(round)", zones: values.chance(0.5) ? [zone] : [],
            notifications: values.chance(0.5) ? [notification] : nil,
            databaseChanges: values.chance(0.5)
                ? DatabaseChangesResponse(syncToken: "d\(round)", moreComing: false, zones: [Zone(zoneID: page.zoneID, syncToken: "z")]) : nil,
            zoneChanges: values.chance(0.7) ? [page] : nil)
    }

    /// Every field type, shares and error results: what the reader reads is the decoder's value,
    /// and everything else goes to the decoder.
    @Test(arguments: [1, 2, 3]) func randomResponses_areReadAsTheDecoderReadsThemOrDeclined(seed: UInt64) throws {
        var values = JSONBytesTests.Values(generator: SeededRandomNumberGenerator(seed: 8000 + seed))
        var read = 0
        for round in 0..<200 {
            let results = (0..<values.int(0...4)).map { _ in
                values.chance(0.1) ? RecordResult.error(ServerError(.conflict, recordName: "r")) : .value(values.record())
            }
            if try Self.expectSameAsDecoder(RecordsResponse.self, WireCoding.encode(RecordsResponse(records: results)), "round \(round)") {
                read += 1
            }
            try Self.expectSameAsDecoder(Record.self, WireCoding.encode(values.record()), "round \(round)")
            try Self.expectSameAsDecoder(FieldValue.self, WireCoding.encode(values.field()), "round \(round)")
        }
        #expect(read > 0)
    }

    /// Mutated documents (truncated, bytes flipped, values swapped): never read unless the decoder
    /// reads them too, to the same value.
    @Test(arguments: [1, 2, 3, 4]) func mutatedDocuments_areNeverReadDifferently(seed: UInt64) throws {
        var values = JSONBytesTests.Values(generator: SeededRandomNumberGenerator(seed: 6000 + seed))
        var fuzzer = JSONFuzzer(seed: 6000 + seed)
        fuzzer.maxNesting = 200
        fuzzer.maxStringLength = 1_000
        for round in 0..<400 {
            let records = (0..<values.int(1...3)).map { _ in Self.plainRecord(&values) }
            let modify = try WireCoding.encode(RecordsResponse(records: records.map(RecordResult.value), syncToken: "t\(round)"))
            try Self.expectSameAsDecoder(RecordsResponse.self, fuzzer.mutate(modify), "round \(round)")
            let page = ZoneChanges(zoneID: ZoneID(zoneName: "Notes"), syncToken: "t", moreComing: false, records: records)
            let changes = try WireCoding.encode(ZoneChangesResponse(zones: [.value(page)]))
            try Self.expectSameAsDecoder(ZoneChangesResponse.self, fuzzer.mutate(changes), "round \(round)")
            try Self.expectSameAsDecoder(Record.self, fuzzer.mutate(WireCoding.encode(records[0])), "round \(round)")
            let poll = try WireCoding.encode(Self.poll(page, &values, round: round))
            try Self.expectSameAsDecoder(NotificationsResponse.self, fuzzer.mutate(poll), "round \(round)")
        }
    }

    /// The edges of JSON and of the types' decoders, one by one.
    @Test(arguments: [
        // Read
        #"{"recordName":"a"}"#, #" {"recordName" : "a" , "deleted" : null } "#, #"{"recordName":"a","fields":null,"zoneID":null}"#,
        #"{"recordName":"a","fields":{"t":{"value":"x","type":"STRING"}}}"#,
        #"{"recordName":"a","fields":{"t":{"type":"INT64","value":-12}}}"#,
        #"{"recordName":"a","fields":{"t":{"type":"DOUBLE","value":1.5e-3}}}"#,
        #"{"recordName":"a","fields":{"t":{"type":"DOUBLE","value":-0}}}"#,
        #"{"recordName":"a","fields":{"t":{"type":"TIMESTAMP"}}}"#, #"{"recordName":"a","fields":{"t":{"value":null}}}"#,
        #"{"recordName":"a","fields":{"t":{"value":null,"type":"BYTES"}}}"#,
        #"{"recordName":"a","fields":{"t":{"type":"BYTES","value":"QUJD"},"u":{"type":"ENCRYPTED_BYTES","value":"QQ=="}}}"#,
        #"{"recordName":"a","fields":{"t":{"type":"BYTES","value":"QUI="},"u":{"type":"BYTES","value":""}}}"#,
        // Base64 the byte reader leaves to Foundation: not canonical, escaped, or not base64.
        #"{"recordName":"a","fields":{"t":{"type":"BYTES","value":"QR=="}}}"#, #"{"recordName":"a","fields":{"t":{"type":"BYTES","value":"QQ"}}}"#,
        #"{"recordName":"a","fields":{"t":{"type":"BYTES","value":"Q==="}}}"#, #"{"recordName":"a","fields":{"t":{"type":"BYTES","value":"QU\/D"}}}"#,
        #"{"recordName":"a","fields":{"t":{"type":"BYTES","value":"QUJD QUJD"}}}"#, #"{"recordName":"a","fields":{"t":{"type":"BYTES","value":"-_8="}}}"#,
        #"{"recordName":"a","fields":{"t":{"type":"ENCRYPTED_BYTES","value":"QQ==QQ=="}}}"#,
        #"{"recordName":"a\"\\\/\b\f\n\r\t\u00e9\u0041"}"#, #"{"recordName":"a","future":[1,{"x":[true,false,null]},"s",-1.5E+2]}"#,
        #"{"recordName":"a","zoneID":{},"created":{"timestamp":0,"deviceID":null}}"#,
        #"{"records":[]}"#, #"{"zones":[]}"#, #"{"zones":[{"zoneID":{"zoneName":"Z"},"syncToken":"t","moreComing":true,"records":[]}]}"#,
        // Declined (the decoder accepts some and rejects others), or read as the decoder reads them
        #"{"recordName":"a","fields":{"t":{"type":"INT64","value":1.0}}}"#,
        #"{"recordName":"a","fields":{"t":{"type":"INT64","value":"12"}}}"#,
        #"{"recordName":"a","fields":{"t":{"type":"INT64","value":-0}}}"#,
        #"{"recordName":"a","fields":{"t":{"type":"INT64","value":01}}}"#,
        #"{"recordName":"a","fields":{"t":{"type":"INT64","value":9223372036854775807}}}"#,
        #"{"recordName":"a","fields":{"t":{"type":"INT64","value":9223372036854775808}}}"#,
        #"{"recordName":"a","fields":{"t":{"type":"DOUBLE","value":1e400}}}"#,
        #"{"recordName":"a","fields":{"t":{"type":"DOUBLE","value":2e-324}}}"#,
        #"{"recordName":"a","fields":{"t":{"type":"DOUBLE","value":-1.5e-400}}}"#,
        #"{"recordName":"a","fields":{"t":{"type":"DOUBLE","value":0e-400}}}"#,
        #"{"recordName":"a","fields":{"t":{"type":"DOUBLE","value":3e-324}}}"#,
        #"{"recordName":"a","fields":{"t":{"type":"DOUBLE","value":1.7976931348623159e308}}}"#,
        #"{"recordName":"a","fields":{"t":{"type":"DOUBLE","value":"1.5"}}}"#,
        #"{"recordName":"a","fields":{"t":{"type":"DOUBLE","value":.5}}}"#,
        #"{"recordName":"a","fields":{"t":{"type":"TIMESTAMP","value":8640000000000001}}}"#,
        #"{"recordName":"a","fields":{"t":{"type":"TIMESTAMP","value":1.5}}}"#,
        #"{"recordName":"a","fields":{"t":{"type":"STRING","value":5}}}"#,
        #"{"recordName":"a","fields":{"t":{"type":5,"value":"x"}}}"#, #"{"recordName":"a","fields":{"t":{"value":"x"}}}"#,
        #"{"recordName":"a","fields":{"t":{"type":"FUTURE","value":"x"}}}"#,
        #"{"recordName":"a","fields":{"t":{"type":"STRING_LIST","value":["x"]}}}"#,
        #"{"recordName":"a","fields":{"t":{"type":"STRING","value":"x","type":"STRING"}}}"#,
        #"{"recordName":"a","fields":{"t":{"type":"STRING","value":"x"},"t":{"type":"STRING","value":"y"}}}"#,
        #"{"recordName":"a","fields":{"t":{"type":"STRING","value":"x"},"u":{"value":1},"t":{"type":"INT64","value":2}}}"#,
        #"{"recordName":"a","fields":{"t":{"type":"STRING","value":"x"},"t":5}}"#,
        #"{"recordName":"a","recordName":"b"}"#, #"{"recordName":null}"#, #"{"recordType":"a"}"#, #"{"recordName":5}"#,
        #"{"recordName":"a","recordType":null,"recordType":"Note","zoneID":{"zoneName":"A","zoneName":"B"}}"#,
        #"{"recordName":"a","created":{"timestamp":1,"timestamp":"x"},"fields":{"t":{"type":"STRING","value":"x","value":5}}}"#,
        #"{"recordName":"a","future":1e400,"other":"\ud83d"}"#,
        #"{"recordName":"a","deleted":"true"}"#, #"{"recordName":"a","deleted":tru}"#, #"{"recordName":"a"} x"#, #"{"recordName":"a",}"#,
        #"{"recordName":"a" "x":1}"#, #"{"recordName":"\ud83d\ude00"}"#, #"{"recordName":"\ud83d"}"#, #"{"recordName":"\u0000"}"#,
        #"{"recordName":"\x"}"#, #"{"recordName":"\u12"}"#, "{\"recordName\":\"a\tb\"}", "{\"recordName\":\"a\u{0}\"}",
        "\u{FEFF}{\"recordName\":\"a\"}", "{\"recordName\":\"a\"}\u{0}",
        #"{"recordName":"a","created":{"deviceID":"d"}}"#, #"{"recordName":"a","created":{"timestamp":"5"}}"#,
        #"{"recordName":"a","shortGUID":"g"}"#, #"{"recordName":"a","owner":null}"#, #"{"recordName":"a","future":[1,]}"#,
        #"{"recordName":"a","future":01}"#, #"{"recordName":"a","future":1.}"#, #"{"recordName":"a","future":-}"#,
        #"{"records":[{"recordName":"a","serverErrorCode":"CONFLICT"}]}"#, #"{"records":null}"#, #"{}"#, #"[]"#, "",
        #"{"zones":[{"zoneID":{"zoneName":"Z"},"serverErrorCode":"ZONE_NOT_FOUND"}]}"#,
        #"{"zones":[{"zoneID":null,"syncToken":"t","moreComing":true,"records":[]}]}"#,
        #"{"zones":[{"zoneID":{},"syncToken":"t","moreComing":true}]}"#,
    ])
    func edgeCases_areReadAsTheDecoderReadsThemOrDeclined(json: String) throws {
        let data = Data(json.utf8)
        try Self.expectSameAsDecoder(Record.self, data)
        try Self.expectSameAsDecoder(RecordsResponse.self, data)
        try Self.expectSameAsDecoder(ZoneChangesResponse.self, data)
        if let fields = try? JSONSerialization.jsonObject(with: data) as? [String: Any], let field = (fields["fields"] as? [String: Any])?["t"] as? [String: Any] {
            try Self.expectSameAsDecoder(FieldValue.self, JSONSerialization.data(withJSONObject: field))
        }
    }

    /// Bytes that are not UTF-8, in a string that is read and in one that is skipped.
    @Test func invalidUTF8_isDeclined() throws {
        for invalid: [UInt8] in [[0xFF], [0xC3], [0xED, 0xA0, 0x80], [0xF8, 0x88, 0x80, 0x80, 0x80]] {
            for prefix in [#"{"recordName":""#, #"{"recordName":"a","future":""#] {
                let bytes = Array(prefix.utf8) + invalid + Array(#""}"#.utf8)
                #expect(Record(jsonBytes: Data(bytes)) == nil)
            }
        }
    }

    /// Nesting deeper than the reader goes is left to the decoder, up to the wire's limit.
    @Test func deepNesting_isDeclined() throws {
        let deep = #"{"recordName":"a","future":"# + String(repeating: "[", count: 90) + String(repeating: "]", count: 90) + "}"
        #expect(Record(jsonBytes: Data(deep.utf8)) == nil)
        #expect(try WireCoding.decode(Record.self, from: Data(deep.utf8)).recordName == "a")
    }
}
