import CloudStoreWire
import Foundation
import Testing

@Suite("Field values encode and decode as WireProtocol.md §2 says")
struct FieldValueCodingTests {
    @Test("each scalar type has its documented JSON form", arguments: [
        (FieldValue.string("Hi"), #"{"value": "Hi", "type": "STRING"}"#),
        (.int64(42), #"{"value": 42, "type": "INT64"}"#),
        (.int64(-9_223_372_036_854_775_808), #"{"value": -9223372036854775808, "type": "INT64"}"#),
        (.double(0.5), #"{"value": 0.5, "type": "DOUBLE"}"#),
        (.timestamp(Date(millisecondsSince1970: 1_763_700_000_123)), #"{"value": 1763700000123, "type": "TIMESTAMP"}"#),
        (.bytes(Data("Hello".utf8)), #"{"value": "SGVsbG8=", "type": "BYTES"}"#),
        (.reference(Reference(recordName: "F-1", zoneID: ZoneID(zoneName: "Notes"), action: .deleteSelf)),
         #"{"value": {"recordName": "F-1", "zoneID": {"zoneName": "Notes"}, "action": "DELETE_SELF"}, "type": "REFERENCE"}"#),
        (.location(Location(latitude: 37.3, longitude: -122.0, horizontalAccuracy: 5)),
         #"{"value": {"latitude": 37.3, "longitude": -122.0, "horizontalAccuracy": 5}, "type": "LOCATION"}"#),
        (.asset(Asset(fileChecksum: "abc", size: 12)),
         #"{"value": {"fileChecksum": "abc", "size": 12}, "type": "ASSETID"}"#),
    ])
    func scalarForms(value: FieldValue, json: String) throws {
        #expect(try jsonObject(value) == jsonObject(json))
        #expect(try decode(FieldValue.self, json) == value)
    }

    @Test("lists are X_LIST arrays and an empty list is UNKNOWN_LIST", arguments: [
        (FieldValue.list(["a", "b"]), #"{"value": ["a", "b"], "type": "STRING_LIST"}"#),
        (.list([1, 2, 3]), #"{"value": [1, 2, 3], "type": "INT64_LIST"}"#),
        (.list([.double(1.5)]), #"{"value": [1.5], "type": "DOUBLE_LIST"}"#),
        (.list([.timestamp(Date(millisecondsSince1970: 1000))]), #"{"value": [1000], "type": "TIMESTAMP_LIST"}"#),
        (.list([.bytes(Data([1, 2]))]), #"{"value": ["AQI="], "type": "BYTES_LIST"}"#),
        (.list([.reference(Reference(recordName: "T-1"))]),
         #"{"value": [{"recordName": "T-1", "action": "NONE"}], "type": "REFERENCE_LIST"}"#),
        (.list([.location(Location(latitude: 1, longitude: 2))]),
         #"{"value": [{"latitude": 1, "longitude": 2}], "type": "LOCATION_LIST"}"#),
        (.list([]), #"{"value": [], "type": "UNKNOWN_LIST"}"#),
    ])
    func listForms(value: FieldValue, json: String) throws {
        #expect(try jsonObject(value) == jsonObject(json))
        #expect(try decode(FieldValue.self, json) == value)
    }

    @Test func booleansTravelAsInt64() throws {
        #expect(FieldValue.bool(true) == .int64(1))
        #expect(try jsonObject(FieldValue.bool(false)) == jsonObject(#"{"value": 0, "type": "INT64"}"#))
        let inferred = try decode(FieldValue.self, #"{"value": true}"#)
        #expect(inferred == .int64(1))
    }

    @Test func nullClearsAField() throws {
        #expect(try decode(FieldValue.self, #"{"value": null}"#) == .null)
        #expect(try decode(FieldValue.self, #"{"value": null, "type": "STRING"}"#) == .null)
        #expect(try decode(FieldValue.self, #"{}"#) == .null)
        #expect(try jsonObject(FieldValue.null) == jsonObject(#"{"value": null}"#))
    }

    @Test func numbersAsStrings() throws {
        #expect(try jsonObject(FieldValue.int64(7), numbersAsStrings: true) == jsonObject(#"{"value": "7", "type": "INT64"}"#))
        #expect(try decode(FieldValue.self, #"{"value": "9007199254740993", "type": "INT64"}"#) == .int64(9_007_199_254_740_993))
    }

    @Test("a value sent without a type is inferred", arguments: [
        (#"{"value": "x"}"#, FieldValue.string("x")),
        (#"{"value": 18}"#, .int64(18)),
        (#"{"value": 1.25}"#, .double(1.25)),
        (#"{"value": ["a"]}"#, .list(["a"])),
        (#"{"value": {"recordName": "N-1"}}"#, .reference(Reference(recordName: "N-1"))),
        (#"{"value": {"latitude": 1, "longitude": 2}}"#, .location(Location(latitude: 1, longitude: 2))),
    ])
    func inference(json: String, value: FieldValue) throws {
        #expect(try decode(FieldValue.self, json) == value)
    }

    @Test func unknownTypesSurviveARoundTrip() throws {
        let json = #"{"value": {"w": 1, "x": 0, "y": 0, "z": 0}, "type": "QUATERNION"}"#
        let value = try decode(FieldValue.self, json)
        #expect(value == .unknown(type: "QUATERNION", value: .object(["w": .number(1), "x": .number(0), "y": .number(0), "z": .number(0)])))
        #expect(try jsonObject(value) == jsonObject(json))
    }

    /// CloudKit's encrypted values' type is a known one (WireProtocol.md §9): opaque bytes.
    @Test func encryptedBytes_areKnown() throws {
        let json = #"{"value": "c2VjcmV0", "type": "ENCRYPTED_BYTES"}"#
        let value = try decode(FieldValue.self, json)
        #expect(value == .encryptedBytes(Data("secret".utf8)))
        #expect(try jsonObject(value) == jsonObject(json))
    }

    @Test("wrong values for a type are errors that name the problem", arguments: [
        (#"{"value": "abc", "type": "INT64"}"#, "is not an integer"),
        (#"{"value": "%%%", "type": "BYTES"}"#, "not valid base64"),
        (#"{"value": ["a", 1]}"#, "one scalar type"),
        (#"{"value": {"x": 1}}"#, "send \"type\""),
    ])
    func wrongValues(json: String, message: String) throws {
        let error = #expect(throws: DecodingError.self) { try decode(FieldValue.self, json) }
        #expect(WireCoding.describe(error!).contains(message))
    }

    @Test func timestampsKeepMilliseconds() throws {
        let date = Date(millisecondsSince1970: 1_763_700_000_999)
        #expect(date.millisecondsSince1970 == 1_763_700_000_999)
        let value = try decode(FieldValue.self, #"{"value": 1763700000999, "type": "TIMESTAMP"}"#)
        #expect(value == .timestamp(date))
    }

    @Test func nonFiniteDoublesCannotBeEncoded() {
        #expect(throws: EncodingError.self) { try WireCoding.encode(FieldValue.double(.nan)) }
    }

    @Test func fieldTypeNames() {
        for name in ["STRING", "INT64", "DOUBLE", "TIMESTAMP", "BYTES", "REFERENCE", "LOCATION", "ASSETID",
                     "STRING_LIST", "REFERENCE_LIST", "UNKNOWN_LIST"] {
            #expect(FieldType(rawValue: name)?.rawValue == name)
        }
        #expect(FieldType(rawValue: "STRING_LIST_LIST") == nil)
        #expect(FieldType(rawValue: "BOOLEAN") == nil)
    }
}

/// The decoder never sees a document nested deeper than the wire allows: Foundation's decoder, given
/// hundreds of levels, can exhaust a thread's stack (the server fuzzer crashed the server with one).
@Suite struct WireNestingTests {
    @Test func aDocumentNestedTooDeep_isRefusedWithAClearErrorBeforeDecoding() {
        for depth in [WireCoding.maxNesting + 1, 600, 5_000] {
            let nested = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
            let body = Data(#"{"operations": "#.utf8) + Data(nested.utf8) + Data("}".utf8)
            do {
                _ = try WireCoding.decode(RecordsModifyRequest.self, from: body)
                Issue.record("a document nested \(depth) deep decoded")
            } catch {
                #expect(WireCoding.describe(error).contains("nested more than"), "\(WireCoding.describe(error))")
            }
        }
    }

    @Test func bracketsInsideStrings_doNotCount() throws {
        let title = String(repeating: "[{", count: 500) + #"\""# + String(repeating: "]}", count: 500)
        let json = #"{"recordName": "N-1", "fields": {"title": {"value": "\#(title)", "type": "STRING"}}}"#
        let record = try WireCoding.decode(Record.self, from: Data(json.utf8))
        #expect(record.fields["title"] == .string(String(repeating: "[{", count: 500) + "\"" + String(repeating: "]}", count: 500)))
    }
}
