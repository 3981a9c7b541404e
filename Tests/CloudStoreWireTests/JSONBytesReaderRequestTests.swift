import CloudStoreTesting
import Foundation
import Testing

@testable import CloudStoreWire

/// The byte reader of the requests the server decodes most (records/modify, records/lookup,
/// changes/zone) against Foundation's decoder, as `JSONBytesReaderTests` holds the responses:
/// whatever the reader reads, the decoder reads to the same value; whatever the decoder rejects,
/// the reader declines (the server then answers the decoder's error).
@Suite("JSON bytes reader: requests the same as JSONDecoder")
struct JSONBytesReaderRequestTests {
    typealias Values = JSONBytesTests.Values

    @discardableResult
    static func expectSame<T: Codable & JSONBytesReadable>(_ type: T.Type, _ data: Data, _ context: String = "") throws -> Bool {
        try JSONBytesReaderTests.expectSameAsDecoder(type, data, context)
    }

    static func modifyRequest(_ values: inout Values, records: [Record]) -> RecordsModifyRequest {
        RecordsModifyRequest(
            zoneID: values.chance(0.9) ? ZoneID(zoneName: "Notes", ownerRecordName: values.chance(0.3) ? "_u1" : nil) : nil,
            atomic: values.chance(0.5) ? values.chance(0.5) : nil,
            operations: records.map { record in
                RecordsModifyRequest.Operation(
                    RecordsModifyRequest.OperationType.allCases.randomElement(using: &values.generator)!, record,
                    desiredKeys: values.chance(0.2) ? ["title", text(&values, plain: true)] : nil)
            },
            desiredKeys: values.chance(0.2) ? [] : nil, numbersAsStrings: values.chance(0.2) ? false : nil,
            syncToken: values.chance(0.3) ? text(&values, plain: true) : nil)
    }

    /// Text of the alphabet `JSONBytesReaderTests.plainRecord` uses (escapes the reader reads), or
    /// any text (NUL and lone escapes too) when not `plain`.
    static func text(_ values: inout Values, plain: Bool) -> String {
        guard plain else { return values.text() }
        return (0..<values.int(1...8)).map { _ in ["a", "Z", "0", " ", "\"", "\\", "\n", "é", "🙂", "/", "\u{1}"][values.int(0...10)] }
            .joined()
    }

    static func zoneID(_ values: inout Values, plain: Bool) -> ZoneID {
        ZoneID(zoneName: text(&values, plain: plain), ownerRecordName: values.chance(0.5) ? text(&values, plain: plain) : nil)
    }

    static func lookupRequest(_ values: inout Values, plain: Bool = true) -> RecordsLookupRequest {
        var request = RecordsLookupRequest(
            zoneID: values.chance(0.9) ? zoneID(&values, plain: plain) : nil,
            recordNames: (0..<values.int(0...5)).map { _ in text(&values, plain: plain) },
            desiredKeys: values.chance(0.3) ? [text(&values, plain: plain)] : nil)
        request.numbersAsStrings = values.chance(0.2) ? values.chance(0.5) : nil
        for index in request.records.indices where values.chance(0.2) { request.records[index].desiredKeys = ["title"] }
        return request
    }

    static func zoneChangesRequest(_ values: inout Values, plain: Bool = true) -> ZoneChangesRequest {
        var request = ZoneChangesRequest(
            zones: (0..<values.int(0...3)).map { _ in
                ZoneChangesRequest.Zone(
                    zoneID: zoneID(&values, plain: plain), syncToken: values.chance(0.7) ? text(&values, plain: plain) : nil,
                    resultsLimit: values.chance(0.5) ? values.int(-5...100_000) : nil,
                    desiredKeys: values.chance(0.2) ? [text(&values, plain: plain)] : nil,
                    desiredRecordTypes: values.chance(0.2) ? ["Note"] : nil)
            }, resultsLimit: values.chance(0.5) ? values.int(0...500) : nil)
        request.desiredKeys = values.chance(0.2) ? [text(&values, plain: plain), text(&values, plain: plain)] : nil
        request.desiredRecordTypes = values.chance(0.2) ? [] : nil
        request.numbersAsStrings = values.chance(0.2) ? values.chance(0.5) : nil
        return request
    }

    /// Requests as devices send them (plain records): read, and read as the decoder reads them.
    @Test(arguments: [1, 2, 3]) func plainRequests_areReadAsTheDecoderReadsThem(seed: UInt64) throws {
        var values = Values(generator: SeededRandomNumberGenerator(seed: 9000 + seed))
        for round in 0..<200 {
            let records = (0..<values.int(0...5)).map { _ in JSONBytesReaderTests.plainRecord(&values) }
            let modify = try WireCoding.encode(Self.modifyRequest(&values, records: records))
            #expect(try Self.expectSame(RecordsModifyRequest.self, modify, "round \(round)"))
            #expect(try Self.expectSame(RecordsLookupRequest.self, WireCoding.encode(Self.lookupRequest(&values)), "round \(round)"))
            #expect(try Self.expectSame(ZoneChangesRequest.self, WireCoding.encode(Self.zoneChangesRequest(&values)), "round \(round)"))
        }
    }

    /// Every field type, shares, and any text (NUL, lone surrogates' escapes): what the reader
    /// reads is the decoder's value; the rest is left to the decoder.
    @Test(arguments: [1, 2, 3]) func randomRequests_areReadAsTheDecoderReadsThemOrDeclined(seed: UInt64) throws {
        var values = Values(generator: SeededRandomNumberGenerator(seed: 9100 + seed))
        for round in 0..<200 {
            let records = (0..<values.int(0...4)).map { _ in values.record() }
            try Self.expectSame(RecordsModifyRequest.self, WireCoding.encode(Self.modifyRequest(&values, records: records)), "round \(round)")
            try Self.expectSame(RecordsLookupRequest.self, WireCoding.encode(Self.lookupRequest(&values, plain: false)), "round \(round)")
            try Self.expectSame(
                ZoneChangesRequest.self, WireCoding.encode(Self.zoneChangesRequest(&values, plain: false)), "round \(round)")
        }
    }

    /// Mutated requests (truncated, bytes flipped, values swapped): never read unless the decoder
    /// reads them too, to the same value.
    @Test(arguments: [1, 2, 3, 4]) func mutatedRequests_areNeverReadDifferently(seed: UInt64) throws {
        var values = Values(generator: SeededRandomNumberGenerator(seed: 9200 + seed))
        var fuzzer = JSONFuzzer(seed: 9200 + seed)
        fuzzer.maxNesting = 200
        fuzzer.maxStringLength = 1_000
        for round in 0..<400 {
            let records = (0..<values.int(1...3)).map { _ in JSONBytesReaderTests.plainRecord(&values) }
            let modify = try WireCoding.encode(Self.modifyRequest(&values, records: records))
            try Self.expectSame(RecordsModifyRequest.self, fuzzer.mutate(modify), "round \(round)")
            try Self.expectSame(RecordsLookupRequest.self, fuzzer.mutate(WireCoding.encode(Self.lookupRequest(&values))), "round \(round)")
            try Self.expectSame(
                ZoneChangesRequest.self, fuzzer.mutate(WireCoding.encode(Self.zoneChangesRequest(&values))), "round \(round)")
        }
    }

    /// The edges of the requests' decoders, one by one.
    @Test(arguments: [
        // Read
        #"{"operations":[]}"#, #"{"operations":[],"zoneID":null,"atomic":null,"desiredKeys":null,"numbersAsStrings":null}"#,
        #"{"zoneID":{"zoneName":"Notes"},"atomic":false,"operations":[{"operationType":"forceDelete","record":{"recordName":"N-3"}}]}"#,
        #"{"operations":[{"record":{"recordName":"a","fields":{"t":{"value":"x","type":"STRING"}}},"operationType":"create","desiredKeys":["t"]}]}"#,
        #"{"operations":[{"operationType":"update","record":{"recordName":"a","recordChangeTag":"1"},"desiredKeys":null}],"future":{}}"#,
        #"{"records":[]}"#, #"{"records":[{"recordName":"a"},{"recordName":"b","desiredKeys":[]}],"zoneID":{}}"#,
        #"{"zones":[]}"#, #"{"zones":[{"zoneID":{"zoneName":"Z"},"syncToken":null,"resultsLimit":200}],"resultsLimit":-1}"#,
        #"{"zones":[{"zoneID":{},"desiredKeys":["a"],"desiredRecordTypes":null}],"desiredKeys":[],"numbersAsStrings":true}"#,
        // Declined (the decoder accepts some and rejects others)
        #"{}"#, #"[]"#, "", #"{"operations":null}"#, #"{"operations":{}}"#, #"{"operations":[null]}"#,
        #"{"operations":[{"operationType":"upsert","record":{"recordName":"a"}}]}"#,
        #"{"operations":[{"operationType":"create"}]}"#, #"{"operations":[{"record":{"recordName":"a"}}]}"#,
        #"{"operations":[{"operationType":"create","record":null}]}"#,
        #"{"operations":[{"operationType":"create","operationType":"delete","record":{"recordName":"a"}}]}"#,
        #"{"operations":[],"operations":[{"operationType":"create","record":{"recordName":"a"}}]}"#,
        #"{"operations":[],"atomic":"true"}"#, #"{"operations":[],"atomic":1}"#, #"{"operations":[],"desiredKeys":"title"}"#,
        #"{"operations":[],"desiredKeys":[1]}"#, #"{"operations":[],"desiredKeys":[null]}"#, #"{"operations":[],"zoneID":"Notes"}"#,
        #"{"operations":[{"operationType":"create","record":{"recordName":"a","fields":{"t":{"type":"INT64","value":"1"}}}}],"numbersAsStrings":true}"#,
        #"{"operations":[{"operationType":"create","record":{"recordName":"a","shortGUID":"g"}}]}"#,
        #"{"operations":[{"operationType":"create","record":{"recordName":"a","fields":{"t":{"type":"REFERENCE","value":{"recordName":"b"}}}}}]}"#,
        #"{"operations":[]} x"#, #"{"operations":[],}"#, #"{"operations":[1,]}"#,
        #"{"records":null}"#, #"{"records":[{"recordName":null}]}"#, #"{"records":[{}]}"#, #"{"records":[{"recordName":5}]}"#,
        #"{"records":[{"recordName":"a","recordName":"b"}]}"#, #"{"records":[{"recordName":"a","desiredKeys":{}}]}"#,
        #"{"zones":null}"#, #"{"zones":[{}]}"#, #"{"zones":[{"zoneID":null}]}"#, #"{"zones":[{"zoneID":{},"resultsLimit":1.5}]}"#,
        #"{"zones":[{"zoneID":{},"resultsLimit":1e2}]}"#, #"{"zones":[{"zoneID":{},"resultsLimit":"5"}]}"#,
        #"{"zones":[{"zoneID":{},"resultsLimit":-0}]}"#, #"{"zones":[{"zoneID":{},"resultsLimit":99999999999999999999}]}"#,
        #"{"zones":[{"zoneID":{},"syncToken":5}]}"#, #"{"zones":[{"zoneID":{"zoneName":null}}],"resultsLimit":null}"#,
        #"{"zones":[{"zoneID":{},"zoneID":null}]}"#,
    ])
    func edgeCases_areReadAsTheDecoderReadsThemOrDeclined(json: String) throws {
        let data = Data(json.utf8)
        try Self.expectSame(RecordsModifyRequest.self, data)
        try Self.expectSame(RecordsLookupRequest.self, data)
        try Self.expectSame(ZoneChangesRequest.self, data)
    }

    /// A request a device sends, read, whatever its size.
    @Test func aFullRequestOfPlainRecords_isRead() throws {
        var values = Values(generator: SeededRandomNumberGenerator(seed: 9300))
        let records = (0..<200).map { _ in JSONBytesReaderTests.plainRecord(&values) }
        let request = RecordsModifyRequest(
            zoneID: ZoneID(zoneName: "Notes"), atomic: false,
            operations: records.enumerated().map { index, record in
                var record = record
                record.recordName = "N-\(index)"
                return RecordsModifyRequest.Operation(.create, record)
            })
        let read = try #require(RecordsModifyRequest(jsonBytes: WireCoding.encode(request)))
        #expect(read == request)
    }
}
