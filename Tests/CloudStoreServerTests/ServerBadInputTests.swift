import CloudStoreServer
import CloudStoreTesting
import CloudStoreWire
import Foundation
import NIOHTTP1
import Testing

/// Bad input never crashes the server or corrupts stored data; each gets the documented error.
@Suite("bad input")
struct ServerBadInputTests {
    /// Found by the server fuzzer: a body nested hundreds of levels deep, at the top or inside a
    /// field's value, is a 400 on every route that decodes one, never a crash of the server.
    @Test(arguments: Backend.all)
    func deeplyNestedBodies_areBadRequestsNotCrashes(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            try await client.createZone("Notes")
            for depth in [600, 5_000] {
                let arrays = String(repeating: "[", count: depth) + "1" + String(repeating: "]", count: depth)
                let objects = String(repeating: #"{"a":"#, count: depth) + "1" + String(repeating: "}", count: depth)
                for nested in [arrays, objects] {
                    let inField = #"{"zoneID": {"zoneName": "Notes"}, "operations": [{"operationType": "create", "record": {"recordName": "x", "recordType": "Note", "fields": {"f": {"value": "# + nested + #", "type": "STRING"}}}}]}"#
                    let inRecords = #"{"zoneID": {"zoneName": "Notes"}, "records": [{"recordName": "# + nested + "}]}"
                    let cases: [(DatabaseOperation, String)] = [
                        (.recordsModify, nested), (.recordsModify, inField), (.recordsLookup, inRecords),
                        (.recordsQuery, nested), (.changesZone, nested), (.changesDatabase, nested), (.zonesModify, nested),
                    ]
                    for (operation, json) in cases {
                        let answer = try await client.call(.private, operation, json: json)
                        #expect(answer.status == 400, "\(operation) nested \(depth) deep")
                    }
                }
            }
        }
    }

    @Test(arguments: Backend.all)
    func malformedBodies_areBadRequestsNamingWhere(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            try await client.createZone("Notes")
            let saved = try await client.save([note("N-1")])

            let cases: [(json: String, mentions: String)] = [
                ("{not json", "not valid JSON"),
                ("", "not valid JSON"),
                ("[]", "body"),
                (#"{"operations": 5}"#, "operations"),
                (#"{"operations": [{"operationType": "explode", "record": {"recordName": "x"}}]}"#, "operations[0].operationType"),
                (#"{"operations": [{"operationType": "create", "record": {"recordName": 7}}]}"#, "operations[0].record.recordName"),
                (#"{"operations": [{"operationType": "create"}]}"#, "operations[0].record"),
                (#"{"zoneID": {"zoneName": "Notes"}, "operations": [{"operationType": "create", "record": {"recordName": "x", "recordType": "Note", "fields": {"n": {"value": "abc", "type": "INT64"}}}}]}"#, "fields.n"),
                (#"{"zoneID": {"zoneName": "Notes"}, "operations": [{"operationType": "create", "record": {"recordName": "x", "recordType": "Note", "fields": {"b": {"value": "%%%", "type": "BYTES"}}}}]}"#, "base64"),
                (#"{"atomic": "yes", "operations": []}"#, "atomic"),
            ]
            for (json, mentions) in cases {
                let answer = try await client.call(.private, .recordsModify, json: json)
                #expect(answer.status == 400, "\(json)")
                #expect(answer.error?.serverErrorCode == .badRequest, "\(json)")
                #expect(answer.error?.reason?.contains(mentions) == true, "\(json): \(answer.error?.reason ?? "")")
                #expect(answer.error?.uuid != nil)
            }
            let unknownType = try await client.call(
                .private, .recordsModify,
                json: #"{"zoneID": {"zoneName": "Notes"}, "atomic": false, "operations": [{"operationType": "create", "record": {"recordName": "x", "recordType": "Note", "fields": {"f": {"value": 1, "type": "QUATERNION"}}}}]}"#)
            #expect(try unknownType.decode(RecordsResponse.self).records.first?.code == .badRequest)

            let intact = try await client.lookup(["N-1"])
            #expect(intact.first?.value == saved[0], "nothing stored was touched")
        }
    }

    @Test(arguments: Backend.all)
    func badNames_areRefused(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            try await client.createZone("Notes")
            let (_, results) = try await client.modify(
                [
                    .init(.create, note("")),
                    .init(.create, note(String(repeating: "x", count: 300))),
                    .init(.create, Record(recordName: "t", recordType: "9Bad", fields: [:])),
                    .init(.create, Record(recordName: "f", recordType: "Note", fields: ["bad name": "x"])),
                    .init(.create, Record(recordName: "z", recordType: "Note", zoneID: ZoneID(zoneName: "Other"))),
                ], atomic: false)
            #expect(results.map(\.code) == [.badRequest, .badRequest, .badRequest, .badRequest, .badRequest])
        }
    }

    @Test(arguments: Backend.all)
    func paths_invalidContainerEnvironmentDatabaseOperationAndMethod(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            let cases: [(method: HTTPMethodName, path: String, status: Int)] = [
                (.POST, "/database/1/bad!container/development/private/records/modify", 400),
                (.POST, "/database/1/\(String(repeating: "c", count: 129))/development/private/records/modify", 400),
                (.POST, "/database/1/a%20b/development/private/records/modify", 400),
                (.POST, "/database/1/ok/staging/private/records/modify", 400),
                (.POST, "/database/1/ok/development/secret/records/modify", 400),
                (.POST, "/database/1/ok/development/private/records/explode", 404),
                (.POST, "/database/2/ok/development/private/records/modify", 404),
                (.GET, "/nothing/here", 404),
                (.GET, "/database/1/ok/development/private/records/modify", 405),
                (.DELETE, "/database/1/ok/development/private/zones/list", 405),
            ]
            for (method, path, status) in cases {
                let answer = try await client.send(method.nio, path, body: Data("{}".utf8))
                #expect(answer.status == status, "\(method) \(path): \(answer.text)")
                #expect(answer.error?.uuid != nil, "\(path) answers a JSON error body")
                #expect(answer.headers.first(name: "Content-Type")?.hasPrefix("application/json") == true)
            }
        }
    }

    @Test(arguments: Backend.all)
    func resultsLimit_hugeIsClampedAndZeroOrNegativeIsBadRequest(_ backend: Backend) async throws {
        try await withServer(backend, limits: ServerLimits(maxResultsLimit: 5)) { _, client in
            try await client.createZone("Notes")
            try await client.save((0..<8).map { note("N-\($0)") })
            let huge = try await client.call(
                .private, .changesZone,
                json: #"{"zones": [{"zoneID": {"zoneName": "Notes"}, "resultsLimit": 1000000000000}]}"#)
            guard case .value(let page)? = try huge.decode(ZoneChangesResponse.self).zones.first else {
                Issue.record("expected changes"); return
            }
            #expect(page.records.count == 5)
            #expect(page.moreComing)
            for limit in ["0", "-3"] {
                let answer = try await client.call(
                    .private, .changesZone,
                    json: #"{"zones": [{"zoneID": {"zoneName": "Notes"}, "resultsLimit": \#(limit)}]}"#)
                #expect(answer.status == 400)
                #expect(answer.error?.reason?.contains("resultsLimit") == true)
            }
            let notNumber = try await client.call(.private, .changesDatabase, json: #"{"resultsLimit": "lots"}"#)
            #expect(notNumber.status == 400)
        }
    }

    @Test(arguments: Backend.all)
    func concurrentGarbage_leavesServerServing(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            try await client.createZone("Notes")
            try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<40 {
                    group.addTask {
                        let junk = Data((0..<(index * 37)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) })
                        return try await client.send(.POST, client.path(.private, .recordsModify), body: junk).status
                    }
                }
                for try await status in group { #expect(status == 400) }
            }
            try await client.save([note("after-garbage")])
        }
    }
}

/// HTTP methods by name, so test tables read well.
enum HTTPMethodName: String, CustomStringConvertible {
    case GET, POST, DELETE

    var nio: NIOHTTP1.HTTPMethod { NIOHTTP1.HTTPMethod(rawValue: rawValue) }
    var description: String { rawValue }
}

extension ServerBadInputTests {
    /// Found by the soak's fuzzer (seed 17421786263495993395): a NUL in a looked-up record name or in
    /// a desired record type reached PostgreSQL, which refuses NUL in text, and answered 500. Names
    /// are checked before any storage sees them, on both backends alike.
    @Test(arguments: Backend.all)
    func namesWithControlCharacters_areBadRequestsNeverReachingStorage(_ backend: Backend) async throws {
        try await withServer(backend) { _, alice in
            try await alice.createZone("Notes")
            try await alice.save([note("N-1")])
            let lookup = try await alice.call(
                .private, .recordsLookup,
                RecordsLookupRequest(zoneID: ZoneID(zoneName: "Notes"), recordNames: ["-\u{0}_", "N-1"]))
            #expect(lookup.status == 200, "\(lookup.text)")
            let items = try lookup.decode(RecordsResponse.self).records
            #expect(items.first?.code == .badRequest)
            #expect(items.last?.value?.recordName == "N-1", "the valid name is still answered")

            let changes = try await alice.call(
                .private, .changesZone,
                ZoneChangesRequest(zones: [.init(zoneID: ZoneID(zoneName: "Notes"), desiredRecordTypes: ["€\u{0}éb_"])]))
            #expect(changes.status == 400, "\(changes.text)")
            #expect(changes.error?.reason?.contains("desired record type") == true)

            // Found by the soak's fuzzer on PostgreSQL: a VALIDATE reference's target is looked up.
            for action in [Reference.Action.validate, .deleteSelf, .none] {
                var referring = note("N-2")
                referring.fields["r"] = .reference(Reference(recordName: ".\u{0}X€/", action: action))
                let (status, results) = try await alice.modify([.init(.create, referring)], atomic: false)
                #expect(status == 200)
                #expect(results.first?.code == .badRequest, "\(action): \(results)")
                #expect(results.first?.error?.reason?.contains("field r: the reference's record name") == true, "\(results)")
            }
            #expect(try await alice.lookup(["N-2"]).first?.code == .notFound, "nothing was stored")
        }
    }
}
