import CloudStoreWire
import Foundation
import Testing

/// Values the fuzzers found: each used to decode into something that could not be encoded again,
/// so the server trapped (timestamps) or misreported the record's size (doubles) when answering.
@Suite struct FieldValueRangeTests {
    @Test(arguments: [#""1e400""#, #""-1e400""#, #""nan""#, #""inf""#, "1e400", "-1e400"])
    func double_notFiniteIsADecodingError(_ value: String) throws {
        #expect(throws: DecodingError.self) { try decode(FieldValue.self, #"{"value": \#(value), "type": "DOUBLE"}"#) }
        #expect(throws: DecodingError.self) { try decode(FieldValue.self, #"{"value": [\#(value)], "type": "DOUBLE_LIST"}"#) }
        if !value.hasPrefix("\"") {
            #expect(throws: DecodingError.self) { try decode(FieldValue.self, #"{"value": \#(value)}"#) }
        }
    }

    @Test(arguments: ["9223372036854775807", "-9223372036854775808", "8640000000000001", "1e18"])
    func timestamp_outOfRangeIsADecodingErrorNotACrash(_ milliseconds: String) throws {
        #expect(throws: DecodingError.self) {
            try decode(FieldValue.self, #"{"value": \#(milliseconds), "type": "TIMESTAMP"}"#)
        }
        #expect(throws: DecodingError.self) {
            try decode(Record.self, #"{"recordName": "r", "created": {"timestamp": \#(milliseconds)}}"#)
        }
    }

    @Test func timestamp_atTheEdgesOfTheRangeRoundTripsExactly() throws {
        for milliseconds in [Date.timestampRange.lowerBound, -1, 0, 1_763_700_000_123, Date.timestampRange.upperBound] {
            let value = try decode(FieldValue.self, #"{"value": \#(milliseconds), "type": "TIMESTAMP"}"#)
            guard case .timestamp(let date) = value else {
                Issue.record("\(value)")
                continue
            }
            #expect(date.millisecondsSince1970 == milliseconds)
            #expect(try decode(FieldValue.self, String(decoding: WireCoding.encode(value), as: UTF8.self)) == value)
        }
    }

    @Test func millisecondsSince1970_ofADateBeyond64BitsSaturates() {
        #expect(Date(timeIntervalSince1970: 1e300).millisecondsSince1970 == .max)
        #expect(Date(timeIntervalSince1970: -1e300).millisecondsSince1970 == .min)
        #expect(Date(millisecondsSince1970: .max).millisecondsSince1970 == .max)
    }
}
