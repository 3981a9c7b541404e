import CloudStoreWire
import Foundation
import Testing

@Suite("Records, zones and operations match WireProtocol.md's JSON")
struct RecordCodingTests {
    static let protocolRecord = #"""
    {"recordName": "N-1", "recordType": "Note", "recordChangeTag": "3k",
     "zoneID": {"zoneName": "Notes", "ownerRecordName": "_u1"},
     "fields": {"title": {"value": "Hi", "type": "STRING"}},
     "created":  {"timestamp": 1763700000000, "userRecordName": "_u1", "deviceID": "dev-A"},
     "modified": {"timestamp": 1763700000000, "userRecordName": "_u1", "deviceID": "dev-A"},
     "deleted": false}
    """#

    @Test func theProtocolRecordRoundTrips() throws {
        let record = try decode(Record.self, Self.protocolRecord)
        #expect(record.recordName == "N-1")
        #expect(record.recordType == "Note")
        #expect(record.recordChangeTag == "3k")
        #expect(record.zoneID == ZoneID(zoneName: "Notes", ownerRecordName: "_u1"))
        #expect(record.fields == ["title": .string("Hi")])
        #expect(record.created?.timestamp.millisecondsSince1970 == 1_763_700_000_000)
        #expect(record.modified?.deviceID == "dev-A")
        #expect(record.deleted == false)
        #expect(try jsonObject(record) == jsonObject(Self.protocolRecord))
    }

    @Test func tombstonesWithAndWithoutRecordType() throws {
        let ours = try decode(Record.self, #"{"recordName": "N-3", "recordType": "Note", "deleted": true, "recordChangeTag": "x"}"#)
        #expect(ours.deleted && ours.recordType == "Note" && ours.fields.isEmpty)
        let apple = try decode(Record.self, #"{"recordName": "N-3", "recordType": null, "deleted": true}"#)
        #expect(apple.deleted && apple.recordType == nil)
        #expect(try jsonObject(ours) == jsonObject(#"{"recordName": "N-3", "recordType": "Note", "deleted": true, "recordChangeTag": "x"}"#))
    }

    @Test func zoneIDDefaults() throws {
        let zone = try decode(ZoneID.self, "{}")
        #expect(zone == .default)
        #expect(zone.zoneName == "_defaultZone")
        #expect(zone.ownerRecordName == nil)
        #expect(try jsonObject(ZoneID(zoneName: "Notes")) == jsonObject(#"{"zoneName": "Notes"}"#))
    }

    @Test func theProtocolModifyRequestDecodes() throws {
        let json = #"""
        {"zoneID": {"zoneName": "Notes"}, "atomic": true,
         "operations": [
           {"operationType": "create", "record": {"recordType": "Note", "recordName": "N-1", "fields": {"title": {"value": "Hi"}}}},
           {"operationType": "update", "record": {"recordName": "N-2", "recordChangeTag": "e", "fields": {"width": {"value": 18}}}},
           {"operationType": "forceDelete", "record": {"recordName": "N-3"}}]}
        """#
        let request = try decode(RecordsModifyRequest.self, json)
        #expect(request.atomic == true)
        #expect(request.operations.map(\.operationType) == [.create, .update, .forceDelete])
        #expect(request.operations[1].record.fields["width"] == .int64(18))
        #expect(request.operations[1].record.recordChangeTag == "e")
    }

    @Test func everyOperationTypeHasItsWireName() throws {
        let names = RecordsModifyRequest.OperationType.allCases.map(\.rawValue)
        #expect(names == ["create", "update", "forceUpdate", "replace", "forceReplace", "delete", "forceDelete"])
        #expect(RecordsModifyRequest.OperationType.allCases.filter(\.checksChangeTag) == [.update, .replace, .delete])
        #expect(throws: DecodingError.self) {
            try decode(RecordsModifyRequest.Operation.self, #"{"operationType": "upsert", "record": {"recordName": "x"}}"#)
        }
    }

    @Test func theAtomicFailureShapeDecodes() throws {
        let json = #"""
        {"records":[{"recordName":"OLD","serverErrorCode":"ATOMIC_ERROR","reason":"atomic"},
                    {"recordName":"N-2","serverErrorCode":"CONFLICT","reason":"etag",
                     "serverRecord": {"recordName": "N-2", "recordType": "Note", "recordChangeTag": "f", "fields": {}}},
                    {"recordName":"N-3","deleted":true}]}
        """#
        let response = try decode(RecordsResponse.self, json)
        #expect(response.records[0].error?.serverErrorCode == .atomicError)
        #expect(response.records[1].error?.serverErrorCode == .conflict)
        #expect(response.records[1].error?.serverRecord?.recordChangeTag == "f")
        #expect(response.records[2].value?.deleted == true)
        #expect(response.records[2].value?.recordName == "N-3")
    }

    @Test func zoneResults() throws {
        let json = #"""
        {"zones": [{"zoneID": {"zoneName": "Notes", "ownerRecordName": "_u1"}, "syncToken": "abc"},
                   {"zoneID": {"zoneName": "Old"}, "deleted": true},
                   {"zoneID": {"zoneName": "X"}, "serverErrorCode": "ZONE_NOT_FOUND", "reason": "no such zone"}]}
        """#
        let response = try decode(ZonesResponse.self, json)
        #expect(response.zones[0].value?.syncToken == "abc")
        #expect(response.zones[1].value?.isDeleted == true)
        #expect(response.zones[2].error?.serverErrorCode == .zoneNotFound)
        #expect(response.zones[2].error?.zoneID?.zoneName == "X")
        let modify = ZonesModifyRequest(operations: [.init(.create, ZoneID(zoneName: "Notes"))])
        #expect(try jsonObject(modify) == jsonObject(#"{"operations": [{"operationType": "create", "zone": {"zoneID": {"zoneName": "Notes"}}}]}"#))
    }

    @Test func changesResponses() throws {
        let database = try decode(DatabaseChangesResponse.self, #"""
        {"syncToken": "d2", "moreComing": false,
         "zones": [{"zoneID": {"zoneName": "Notes"}, "syncToken": "z1"},
                   {"zoneID": {"zoneName": "Old"}, "deleted": true, "reason": "purged"}]}
        """#)
        #expect(database.zones[1].reason == .purged)
        let zone = try decode(ZoneChangesResponse.self, #"""
        {"zones": [{"zoneID": {"zoneName": "Notes"}, "syncToken": "t", "moreComing": true,
                    "records": [{"recordName": "N-3", "recordType": "Note", "deleted": true, "recordChangeTag": "x"}]},
                   {"zoneID": {"zoneName": "Gone"}, "serverErrorCode": "ZONE_NOT_FOUND"}]}
        """#)
        guard case .value(let changes) = zone.zones[0], case .error(let error) = zone.zones[1] else {
            Issue.record("wrong result kinds")
            return
        }
        #expect(changes.moreComing && changes.records[0].deleted)
        #expect(error.serverErrorCode == .zoneNotFound)
    }

    @Test func requestLevelErrors() throws {
        let error = try decode(ServerError.self, #"{"uuid": "u", "serverErrorCode": "THROTTLED", "reason": "slow down", "retryAfter": 3}"#)
        #expect(error.serverErrorCode == .throttled)
        #expect(error.retryAfter == 3)
        #expect(error.serverErrorCode.httpStatus == 429)
        #expect(error.serverErrorCode.isTransient)
        let unknown = try decode(ServerError.self, #"{"serverErrorCode": "SOMETHING_NEW"}"#)
        #expect(unknown.serverErrorCode.rawValue == "SOMETHING_NEW")
        #expect(!unknown.serverErrorCode.isTransient)
    }

    @Test func httpStatusesFollowTheTable() {
        let expected: [ServerErrorCode: Int] = [
            .accessDenied: 403, .atomicError: 400, .authenticationFailed: 401, .authenticationRequired: 421,
            .badRequest: 400, .conflict: 409, .exists: 409, .internalError: 500, .notFound: 404,
            .quotaExceeded: 413, .throttled: 429, .tryAgainLater: 503, .validatingReferenceError: 412,
            .zoneNotFound: 404, .limitExceeded: 413, .changeTokenExpired: 410, .uniqueFieldError: 409,
        ]
        for code in ServerErrorCode.allKnown {
            #expect(code.httpStatus == expected[code], "\(code)")
        }
    }

    /// A record type's uniqueness constraints travel as lists of field names, and are absent when
    /// the type has none (WireProtocol.md §3, Uniqueness constraints).
    @Test func uniquenessConstraints_travelAsListsOfFieldNames_absentWhenNone() throws {
        let json = #"{"recordTypes": [{"name": "List", "fields": [{"name": "title", "type": "STRING"}], "uniquenessConstraints": [["title"]]}]}"#
        let schema = try decode(CloudSchema.self, json)
        #expect(schema.recordType(named: "List")?.uniquenessConstraints == [["title"]])
        #expect(try jsonObject(schema) == jsonObject(json))
        let plain = CloudSchema(recordTypes: [.init(name: "Note", fields: [.init(name: "title", type: .string)])])
        #expect(!String(decoding: try WireCoding.encode(plain), as: UTF8.self).contains("uniquenessConstraints"))
        #expect(try decode(CloudSchema.self, #"{"recordTypes": [{"name": "Note", "fields": []}]}"#).recordTypes[0].uniquenessConstraints == nil)
    }

    @Test func routes() {
        let route = DatabaseRoute(container: "iCloud.com.example.notes", environment: .development)
        #expect(route.path(.private, .recordsModify) == "/database/1/iCloud.com.example.notes/development/private/records/modify")
        #expect(route.schemaModifyPath == "/database/1/iCloud.com.example.notes/development/schema/modify")
        #expect(DatabaseRoute.isValidContainer("iCloud.com.example-app_1"))
        #expect(!DatabaseRoute.isValidContainer(""))
        #expect(!DatabaseRoute.isValidContainer("a/b"))
        #expect(!DatabaseRoute.isValidContainer(String(repeating: "a", count: 129)))
        #expect(DatabaseOperation.zonesList.method == "GET")
        #expect(DatabaseOperation.recordsModify.method == "POST")
    }

    @Test func signatureMessage() throws {
        let date = try #require(ServerToServerSignature.date(from: "2026-01-25T22:15:43Z"))
        #expect(ServerToServerSignature.dateString(date) == "2026-01-25T22:15:43Z")
        #expect(ServerToServerSignature.message(date: "2026-01-25T22:15:43Z", bodySHA256Base64: "h", path: "/p")
            == "2026-01-25T22:15:43Z:h:/p")
        #expect(ServerToServerSignature.date(from: "yesterday") == nil)
    }

    @Test func decodingErrorsNameTheirPlace() throws {
        let json = #"{"operations": [{"operationType": "create", "record": {"recordName": "a", "fields": {"f": {"value": "**", "type": "BYTES"}}}}]}"#
        let error = #expect(throws: DecodingError.self) { try decode(RecordsModifyRequest.self, json) }
        #expect(WireCoding.describe(error!) == "operations[0].record.fields.f.value: BYTES value is not valid base64")
        let garbage = #expect(throws: DecodingError.self) { try decode(RecordsModifyRequest.self, "{nope") }
        #expect(WireCoding.describe(garbage!).hasPrefix("body is not valid JSON"))
    }
}
