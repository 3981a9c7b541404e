import CloudStoreTesting
import CloudStoreWire
import Foundation
import Testing

/// Every request and response type of the wire, fed random JSON and mutations of WireProtocol.md's
/// examples: each input either decodes (and then encodes and decodes again to the same bytes) or
/// throws `DecodingError`; nothing crashes or hangs. Seeded: the seed is printed, and
/// `CLOUDSTORE_FUZZ_SEED=<seed>` replays a run; `CLOUDSTORE_SOAK=1` runs 50 times as many cases.
@Suite struct WireDecodingFuzzTests {
    /// One wire type with valid examples to mutate.
    struct Target: Sendable, CustomTestStringConvertible {
        var name: String
        var examples: [String]
        var check: @Sendable (Data) throws -> Bool

        init<T: Codable & Equatable & Sendable>(_ type: T.Type, _ examples: [String]) {
            name = "\(T.self)"
            self.examples = examples
            check = { data in try Self.roundTrip(T.self, data) }
        }

        var testDescription: String { name }

        /// Decodes; when that works, the value must encode and decode again to the same bytes.
        /// Answers whether the input decoded.
        static func roundTrip<T: Codable & Equatable>(_ type: T.Type, _ data: Data) throws -> Bool {
            let value: T
            do {
                value = try WireCoding.decode(T.self, from: data)
            } catch is DecodingError {
                return false
            }
            let encoded = try WireCoding.encode(value)
            let again = try WireCoding.decode(T.self, from: encoded)
            #expect(try WireCoding.encode(again) == encoded, "\(T.self) is stable after one round trip: \(String(decoding: encoded.prefix(300), as: UTF8.self))")
            return true
        }
    }

    static let record = #"""
        {"recordName": "N-1", "recordType": "Note", "recordChangeTag": "3k",
         "zoneID": {"zoneName": "Notes", "ownerRecordName": "_u1"},
         "fields": {"title": {"value": "Hi", "type": "STRING"}, "n": {"value": 7, "type": "INT64"},
                    "d": {"value": 1.5, "type": "DOUBLE"}, "t": {"value": 1763700000000, "type": "TIMESTAMP"},
                    "b": {"value": "aGk=", "type": "BYTES"}, "l": {"value": ["a", "b"], "type": "STRING_LIST"},
                    "r": {"value": {"recordName": "F-1", "zoneID": {"zoneName": "Notes"}, "action": "DELETE_SELF"}, "type": "REFERENCE"},
                    "loc": {"value": {"latitude": 1, "longitude": 2}, "type": "LOCATION"},
                    "u": {"value": [], "type": "UNKNOWN_LIST"}, "x": {"value": null}, "i": {"value": 5}},
         "created":  {"timestamp": 1763700000000, "userRecordName": "_u1", "deviceID": "dev-A"},
         "modified": {"timestamp": 1763700000000, "userRecordName": "_u1", "deviceID": "dev-A"},
         "deleted": false}
        """#
    static let error = #"{"uuid": "u-1", "serverErrorCode": "CONFLICT", "reason": "stale", "retryAfter": 3, "recordName": "N-1", "zoneID": {"zoneName": "Notes"}, "serverRecord": \#(record)}"#

    static let targets: [Target] = [
        Target(Record.self, [record, #"{"recordName": "N-3", "recordType": "Note", "deleted": true, "recordChangeTag": "9"}"#]),
        Target(FieldValue.self, [#"{"value": 7, "type": "INT64"}"#, #"{"value": "7", "type": "INT64"}"#, #"{"value": [1, 2]}"#]),
        Target(ServerError.self, [error]),
        Target(ZonesModifyRequest.self, [#"{"operations": [{"operationType": "create", "zone": {"zoneID": {"zoneName": "Notes"}}}, {"operationType": "delete", "zone": {"zoneID": {"zoneName": "Old", "ownerRecordName": "_u1"}}}]}"#]),
        Target(ZonesLookupRequest.self, [#"{"zones": [{"zoneName": "Notes"}, {}]}"#]),
        Target(ZonesResponse.self, [#"{"zones": [{"zoneID": {"zoneName": "Notes", "ownerRecordName": "_u1"}, "syncToken": "z1"}, {"zoneID": {"zoneName": "Old"}, "deleted": true}, \#(error)]}"#]),
        Target(RecordsModifyRequest.self, [#"""
            {"zoneID": {"zoneName": "Notes"}, "atomic": true, "numbersAsStrings": false, "desiredKeys": ["title"],
             "operations": [
               {"operationType": "create", "record": \#(record)},
               {"operationType": "update", "record": {"recordName": "N-2", "recordChangeTag": "e", "fields": {"title": {"value": "x"}}}},
               {"operationType": "forceDelete", "record": {"recordName": "N-3"}}]}
            """#]),
        Target(RecordsResponse.self, [#"{"records": [\#(record), {"recordName": "N-3", "deleted": true}, \#(error)]}"#]),
        Target(RecordsLookupRequest.self, [#"{"zoneID": {"zoneName": "Notes"}, "records": [{"recordName": "N-1"}, {"recordName": "N-2", "desiredKeys": ["a"]}], "desiredKeys": null}"#]),
        Target(RecordsQueryRequest.self, [#"""
            {"zoneID": {"zoneName": "Notes"}, "resultsLimit": 10, "continuationMarker": "abc",
             "query": {"recordType": "Note", "filterBy": [{"comparator": "EQUALS", "fieldName": "title", "fieldValue": {"value": "Hi"}},
                        {"comparator": "IN", "systemFieldName": "recordName", "fieldValue": {"value": ["a", "b"], "type": "STRING_LIST"}}],
                       "sortBy": [{"fieldName": "title", "ascending": false}]}}
            """#]),
        Target(RecordsQueryResponse.self, [#"{"records": [\#(record)], "continuationMarker": "m1"}"#]),
        Target(DatabaseChangesRequest.self, [#"{"syncToken": "d1", "resultsLimit": 200}"#, "{}"]),
        Target(DatabaseChangesResponse.self, [#"{"syncToken": "d2", "moreComing": false, "zones": [{"zoneID": {"zoneName": "Notes"}, "syncToken": "z"}, {"zoneID": {"zoneName": "Old"}, "deleted": true, "reason": "purged"}]}"#]),
        Target(ZoneChangesRequest.self, [#"{"zones": [{"zoneID": {"zoneName": "Notes"}, "syncToken": "z1", "resultsLimit": 200, "desiredKeys": null, "desiredRecordTypes": ["Note"]}], "numbersAsStrings": true}"#]),
        Target(ZoneChangesResponse.self, [#"{"zones": [{"zoneID": {"zoneName": "Notes"}, "syncToken": "z2", "moreComing": true, "records": [\#(record), {"recordName": "N-3", "recordType": "Note", "deleted": true, "recordChangeTag": "t"}]}, \#(error)]}"#]),
        Target(NotificationsResponse.self, [#"{"changed": true, "syncToken": "d3", "zones": [{"zoneID": {"zoneName": "Notes"}}]}"#]),
        Target(CloudSchema.self, [
            #"{"recordTypes": [{"name": "Note", "fields": [{"name": "title", "type": "STRING", "queryable": true}, {"name": "tags", "type": "STRING_LIST"}]}], "version": 3}"#,
            #"{"recordTypes": [{"name": "List", "fields": [{"name": "title", "type": "STRING"}, {"name": "owner", "type": "REFERENCE"}], "uniquenessConstraints": [["title"], ["owner", "title"]]}]}"#,
        ]),
        Target(CallerResponse.self, [#"{"userRecordName": "_u1", "users": [{"userRecordName": "_u1"}]}"#]),
    ]

    static var casesPerType: Int { ReliabilityRun.count(ci: 400, soak: 20_000) }

    static let seed = ReliabilityRun.seed(fixed: 20_260_125)

    @Test func everyWireType_decodesOrThrowsDecodingError() async throws {
        let seed = Self.seed
        var fuzzer = JSONFuzzer(seed: seed)
        var cases = 0
        var decoded = 0
        for target in Self.targets {
            let examples = target.examples.map { Data($0.utf8) }
            for example in examples {
                #expect(try target.check(example), "\(target.name): the example itself decodes")
            }
            for index in 0..<Self.casesPerType {
                if index % 25 == 0 { await Task.yield() }  // CPU-bound: let other tests run on the shared pool
                let input = fuzzer.next(from: examples)
                cases += 1
                do {
                    if try target.check(input) { decoded += 1 }
                } catch {
                    Issue.record("\(target.name) (seed \(seed)): \(type(of: error)) \(error) for \(String(decoding: input.prefix(300), as: UTF8.self))")
                }
            }
        }
        print("fuzz: wire decoders seed \(seed), types \(Self.targets.count), cases \(ReportFormat.count(cases)), decoded \(ReportFormat.count(decoded)), rejected \(ReportFormat.count(cases - decoded)), crashes 0")
    }

    @Test func deepNesting_isRejectedWithoutExhaustingTheStack() throws {
        for depth in [1_000, 100_000] {
            let arrays = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
            let objects = String(repeating: #"{"value":"#, count: depth) + "1" + String(repeating: "}", count: depth)
            for json in [arrays, #"{"fields": {"f": {"value": \#(arrays)}}}"#, objects] {
                #expect(throws: DecodingError.self) { try WireCoding.decode(Record.self, from: Data(json.utf8)) }
                #expect(throws: DecodingError.self) { try WireCoding.decode(FieldValue.self, from: Data(json.utf8)) }
            }
        }
    }
}
