import CloudStoreServer
import CloudStoreTesting
import CloudStoreWire
import Foundation
import Testing

/// Random and mutated bodies to every route, over HTTP: the server answers 2xx or a documented
/// 4xx JSON error with a `serverErrorCode` (never 5xx, never a crash, never a hang), and the data
/// stored before is unchanged. Seeded (`CLOUDSTORE_FUZZ_SEED`); `CLOUDSTORE_SOAK=1` sends 50 times
/// as many requests. The time limit only catches a hang: alone the CI counts take seconds, but in
/// the whole parallel run on two cores they wait minutes for their turn.
@Suite("fuzzed requests", .timeLimit(.minutes(ReliabilityRun.hangLimitMinutes)))
struct ServerFuzzTests {
    /// A route and valid bodies to mutate. Bodies name the zone `Fuzz`, so that a mutation that
    /// stays valid writes there and never to the zones whose snapshot is compared.
    struct Route: Sendable {
        var operation: DatabaseOperation?
        var examples: [String]
        var database: DatabaseScope = .private
        /// Who sends it: alice unless named (bob takes part in alice's shared `Fuzz` zone).
        var token: String? = nil
        /// A path below `/device/1/{container}/{environment}` instead of a database operation.
        var devicePath: String? = nil

        func path(_ client: CloudClient) -> String {
            if let devicePath { return "/device/1/\(client.container)/\(client.environment.rawValue)/\(devicePath)" }
            guard let operation else { return DatabaseRoute(container: client.container, environment: client.environment).schemaModifyPath }
            return client.path(database, operation)
        }
    }

    static let fuzzRecord = #"{"recordName": "F-1", "recordType": "Note", "fields": {"title": {"value": "x", "type": "STRING"}, "n": {"value": 3}, "r": {"value": {"recordName": "F-2", "action": "VALIDATE"}, "type": "REFERENCE"}}}"#

    /// Fuzzed first: the subscriptions they leave fire on the fuzzed writes to `Fuzz` that follow.
    static let subscriptionRoutes: [Route] = [
        Route(operation: .subscriptionsModify, examples: [
            #"{"operations": [{"operationType": "create", "subscription": {"subscriptionID": "fz", "subscriptionType": "zone", "zoneID": {"zoneName": "Fuzz"}}}, {"operationType": "create", "subscription": {"subscriptionID": "q", "subscriptionType": "query", "query": {"recordType": "Note", "filterBy": [{"comparator": "BEGINS_WITH", "fieldName": "title", "fieldValue": {"value": "x", "type": "STRING"}}]}, "firesOn": ["create", "update", "delete"], "firesOnce": false, "zoneWide": false, "zoneID": {"zoneName": "Fuzz"}, "notificationInfo": {"alertBody": "b", "shouldBadge": true}}}]}"#,
            #"{"operations": [{"operationType": "update", "subscription": {"subscriptionID": "q", "subscriptionType": "database"}}, {"operationType": "delete", "subscription": {"subscriptionID": "fz"}}]}"#,
        ]),
        Route(operation: .subscriptionsModify, examples: [
            #"{"operations": [{"operationType": "create", "subscription": {"subscriptionID": "pub", "subscriptionType": "query", "query": {"recordType": "Note", "filterBy": [{"comparator": "IN", "fieldName": "n", "fieldValue": {"value": [1, 2], "type": "INT64_LIST"}}]}, "firesOn": ["create"], "firesOnce": true}}]}"#,
        ], database: .public),
        Route(operation: .subscriptionsModify, examples: [
            #"{"operations": [{"operationType": "create", "subscription": {"subscriptionID": "shared", "subscriptionType": "zone", "zoneID": {"zoneName": "Fuzz", "ownerRecordName": "_alice"}}}]}"#,
        ], database: .shared, token: "bob-token"),
        Route(operation: .subscriptionsLookup, examples: [#"{"subscriptions": [{"subscriptionID": "q"}, {"subscriptionID": "none"}]}"#]),
        Route(operation: .subscriptionsList, examples: ["{}"], database: .public),
        Route(examples: [#"{"apnsEnvironment": "development"}"#], devicePath: "tokens/create"),
        Route(
            examples: [#"{"apnsEnvironment": "production", "apnsToken": "Zm9vZm9vZm9vZm9vZm9vZm9vZm9vZm9vZm9vZm9v+/=="}"#],
            devicePath: "tokens/register"),
    ]

    static let routes: [Route] = [
        Route(operation: .zonesModify, examples: [#"{"operations": [{"operationType": "create", "zone": {"zoneID": {"zoneName": "Fuzz"}}}]}"#]),
        Route(operation: .zonesLookup, examples: [#"{"zones": [{"zoneName": "Fuzz"}, {"zoneName": "Notes"}]}"#]),
        Route(operation: .recordsModify, examples: [
            #"{"zoneID": {"zoneName": "Fuzz"}, "atomic": true, "operations": [{"operationType": "create", "record": \#(fuzzRecord)}, {"operationType": "forceDelete", "record": {"recordName": "F-3"}}]}"#,
            #"{"zoneID": {"zoneName": "Fuzz"}, "atomic": false, "operations": [{"operationType": "forceUpdate", "record": \#(fuzzRecord)}, {"operationType": "update", "record": {"recordName": "F-4", "recordChangeTag": "1", "fields": {}}}]}"#,
        ]),
        Route(operation: .recordsModify, examples: [#"{"operations": [{"operationType": "forceReplace", "record": \#(fuzzRecord)}]}"#], database: .public),
        // Records of a type with uniqueness constraints (declared before the fuzzing, ``uniqueSchema``).
        Route(operation: .recordsModify, examples: [
            #"{"zoneID": {"zoneName": "Fuzz"}, "atomic": false, "operations": [{"operationType": "create", "record": {"recordName": "U-1", "recordType": "Fuzzed", "fields": {"title": {"value": "same", "type": "STRING"}, "n": {"value": 1}, "r": {"value": {"recordName": "F-1"}, "type": "REFERENCE"}}}}, {"operationType": "forceUpdate", "record": {"recordName": "U-2", "recordType": "Fuzzed", "fields": {"title": {"value": "same"}, "n": {"value": 1}}}}, {"operationType": "forceDelete", "record": {"recordName": "U-1"}}]}"#,
        ]),
        Route(operation: .recordsLookup, examples: [#"{"zoneID": {"zoneName": "Fuzz"}, "records": [{"recordName": "F-1"}], "desiredKeys": ["title"]}"#]),
        Route(operation: .recordsQuery, examples: [#"{"zoneID": {"zoneName": "Fuzz"}, "resultsLimit": 5, "query": {"recordType": "Note", "filterBy": [{"comparator": "BEGINS_WITH", "fieldName": "title", "fieldValue": {"value": "x"}}, {"comparator": "IN", "systemFieldName": "recordName", "fieldValue": {"value": ["F-1"], "type": "STRING_LIST"}}], "sortBy": [{"fieldName": "n", "ascending": false}]}}"#]),
        Route(operation: .assetsUpload, examples: [#"{"zoneID": {"zoneName": "Fuzz"}, "tokens": [{"recordName": "F-1", "recordType": "Note", "fieldName": "photo"}, {"recordName": "F-2", "fieldName": "scan"}]}"#]),
        Route(operation: .recordsModify, examples: [
            #"{"zoneID": {"zoneName": "Fuzz"}, "operations": [{"operationType": "forceUpdate", "record": {"recordName": "F-1", "recordType": "Note", "fields": {"photo": {"type": "ASSETID", "value": {"fileChecksum": "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=", "size": 0, "receipt": "r-1"}}, "scans": {"type": "ASSETID_LIST", "value": [{"fileChecksum": "x", "size": 3}]}}}}]}"#,
        ]),
        Route(operation: .changesDatabase, examples: [#"{"resultsLimit": 10}"#]),
        Route(operation: .changesZone, examples: [#"{"zones": [{"zoneID": {"zoneName": "Fuzz"}, "resultsLimit": 10, "desiredRecordTypes": ["Note"], "desiredKeys": ["title"]}]}"#]),
        Route(operation: nil, examples: [
            #"{"recordTypes": [{"name": "Fuzzed", "fields": [{"name": "title", "type": "STRING", "queryable": true}]}]}"#,
            uniqueSchema,
        ]),
        Route(operation: .recordsModify, examples: [
            #"{"zoneID": {"zoneName": "Fuzz"}, "atomic": false, "operations": [{"operationType": "forceUpdate", "record": {"recordName": "cloudkit.zoneshare", "recordType": "cloudKit.share", "fields": {"title": {"value": "t"}}, "publicPermission": "READ_ONLY", "participants": [{"userIdentity": {"lookupInfo": {"userRecordName": "_bob"}}, "permission": "READ_WRITE"}, {"userIdentity": {"lookupInfo": {"emailAddress": "x@y"}}, "permission": "READ_ONLY", "acceptanceStatus": "REMOVED", "type": "USER"}]}}]}"#,
        ]),
        Route(operation: .recordsAccept, examples: [#"{"shortGUIDs": [{"value": "AAAAAAAAAAAAAAAAAAAAAA"}, {"value": "x"}]}"#], database: .public),
        Route(operation: .recordsResolve, examples: [#"{"shortGUIDs": [{"value": "AAAAAAAAAAAAAAAAAAAAAA"}]}"#], database: .public, token: "bob-token"),
        Route(operation: .recordsModify, examples: [
            #"{"zoneID": {"zoneName": "Fuzz", "ownerRecordName": "_alice"}, "atomic": false, "operations": [{"operationType": "forceUpdate", "record": \#(fuzzRecord)}, {"operationType": "forceDelete", "record": {"recordName": "cloudkit.zoneshare"}}]}"#,
        ], database: .shared, token: "bob-token"),
        Route(operation: .changesZone, examples: [#"{"zones": [{"zoneID": {"zoneName": "Fuzz", "ownerRecordName": "_alice"}, "resultsLimit": 10}]}"#], database: .shared, token: "bob-token"),
        Route(operation: .recordsChanges, examples: [#"{"zoneID": {"zoneName": "Fuzz", "ownerName": "_alice"}, "resultsLimit": 10, "desiredKeys": ["title"], "syncToken": null}"#]),
        Route(operation: .recordsChanges, examples: [#"{"zoneID": {"zoneName": "Fuzz", "ownerName": "_alice"}, "resultsLimit": 10}"#], database: .shared, token: "bob-token"),
        Route(operation: .zonesChanges, examples: [#"{"metaSyncToken": null, "resultsLimit": 10}"#]),
        Route(operation: .zonesChanges, examples: [#"{"syncToken": null}"#], database: .shared, token: "bob-token"),
        Route(operation: .changesDatabase, examples: [#"{"resultsLimit": 10}"#], database: .shared, token: "bob-token"),
        Route(operation: .zonesLookup, examples: [#"{"zones": [{"zoneName": "Fuzz", "ownerRecordName": "_alice"}, {"zoneName": "Notes"}]}"#], database: .shared, token: "bob-token"),
    ]

    /// A record type with uniqueness constraints, declared before the fuzzing and fuzzed as a
    /// schema/modify body.
    static let uniqueSchema = #"{"recordTypes": [{"name": "Fuzzed", "fields": [{"name": "title", "type": "STRING"}, {"name": "n", "type": "INT64"}, {"name": "r", "type": "REFERENCE"}], "uniquenessConstraints": [["title"], ["r", "n"]]}]}"#

    static func declareUniqueSchema(_ client: CloudClient) async throws {
        let path = DatabaseRoute(container: client.container, environment: client.environment).schemaModifyPath
        let declared = try await client.send(.POST, path, body: Data(uniqueSchema.utf8))
        try #require(declared.status == 200, "\(declared.text)")
    }

    static var requestsPerRoute: Int { ReliabilityRun.count(ci: 40, soak: 2_000) }

    static let seed = ReliabilityRun.seed(fixed: 20_260_125)

    @Test(arguments: Backend.all)
    func everyRoute_answersADocumentedErrorAndChangesNothingStored(_ backend: Backend) async throws {
        let seed = Self.seed
        // Printed first, so a run that crashes the process can be replayed with CLOUDSTORE_FUZZ_SEED.
        print("fuzz: server (\(backend.testDescription)) seed \(seed) starting")
        var fuzzer = JSONFuzzer(seed: seed)
        fuzzer.maxStringLength = 100_000
        try await withServer(backend) { _, alice in
            let bob = alice.asUser("bob-token", device: "device-B")
            try await alice.createZone("Fuzz")
            try await Snapshot.storeBaseline(alice: alice, bob: bob)
            try await Self.declareUniqueSchema(alice)
            let share = try await alice.share("Fuzz", [("_bob", .readWrite)])
            _ = try await bob.accept([try #require(share.share?.shortGUID)])
            let before = try await Snapshot(alice: alice, bob: bob)

            var statuses: [Int: Int] = [:]
            var client = alice
            client.requestTimeout = .seconds(20)
            for route in Self.subscriptionRoutes + Self.routes {
                let examples = route.examples.map { Data($0.utf8) }
                for _ in 0..<Self.requestsPerRoute {
                    let body = fuzzer.next(from: examples)
                    let sender = route.token.map { client.asUser($0) } ?? client
                    let answer = try await sender.send(.POST, route.path(sender), body: body)
                    statuses[answer.status, default: 0] += 1
                    Self.checkDocumented(answer, route: route, body: body, seed: seed)
                }
            }
            for courierID in [String(repeating: "0", count: 64), "x", String(repeating: "f", count: 65), "%2e%2e"] {
                let answer = try await client.asUser(nil).send(
                    .GET, "/device/1/\(client.container)/\(client.environment.rawValue)/courier/\(courierID)?timeout=0")
                statuses[answer.status, default: 0] += 1
                Self.checkDocumented(answer, route: Route(examples: [], devicePath: "courier"), body: Data(courierID.utf8), seed: seed)
            }
            for query in Self.fuzzedNotificationQueries(&fuzzer) {
                let answer = try await client.send(.GET, client.path(.private, .notifications) + query)
                statuses[answer.status, default: 0] += 1
                Self.checkDocumented(answer, route: Route(operation: .notifications, examples: []), body: Data(query.utf8), seed: seed)
            }

            let after = try await Snapshot(alice: alice, bob: bob)
            #expect(after.keepsEverything(of: before), "seed \(seed): nothing stored outside the Fuzz zone changed")
            try await alice.save([note("N-after")])
            let total = statuses.values.reduce(0, +)
            let summary = statuses.sorted { $0.key < $1.key }.map { "\($0.key) \(ReportFormat.count($0.value))" }.joined(separator: ", ")
            print("fuzz: server (\(backend.testDescription)) seed \(seed), requests \(ReportFormat.count(total)) (\(summary)), 5xx \(statuses.filter { $0.key >= 500 }.values.reduce(0, +)), crashes 0")
        }
    }

    /// Every field type with every troublesome value, saved without atomicity: each record is saved
    /// or refused on its own, and the zone's records can all be read back (a value that decoded but
    /// could not be encoded again would make the server fail when answering).
    @Test(arguments: Backend.all)
    func fieldValues_everyTypeWithTroublesomeValuesIsSavedOrRefusedAndReadsBack(_ backend: Backend) async throws {
        let types = ["STRING", "INT64", "DOUBLE", "TIMESTAMP", "BYTES", "REFERENCE", "LOCATION", "ASSETID", "STRING_LIST",
                     "INT64_LIST", "TIMESTAMP_LIST", "REFERENCE_LIST", "UNKNOWN_LIST", "QUATERNION", nil]
        let values = [
            "9223372036854775807", "-9223372036854775808", "9223372036854775808", "8640000000000000", "1e308", "-1e308",
            "4.9e-324", "1e400", "1.5", "-0", "0", "\"\"", "\"abc\"", "\"9223372036854775807\"", "\"1e400\"", "\"aGk=\"", "\"%%%\"",
            "true", "[]", "[1, \"a\"]", "[[1]]", "[9223372036854775807, -9223372036854775808]", "{}",
            #"{"recordName": "N-1", "action": "DELETE_SELF"}"#, #"{"recordName": ""}"#, #"{"latitude": 1e308, "longitude": -1e308}"#,
            #"{"fileChecksum": "x", "size": 1e308}"#, "\"\\ud800\"", "\"\\u0000\"",
        ]
        try await withServer(backend) { _, client in
            try await client.createZone("Values")
            var saved = 0
            var refused = 0
            for (typeIndex, type) in types.enumerated() {
                for (index, value) in values.enumerated() {
                    let typed = type.map { #", "type": "\#($0)""# } ?? ""
                    let record = #"{"recordName": "V-\#(typeIndex)-\#(index)", "recordType": "Value", "fields": {"v\#(typeIndex)": {"value": \#(value)\#(typed)}}}"#
                    let body = #"{"zoneID": {"zoneName": "Values"}, "atomic": false, "operations": [{"operationType": "create", "record": \#(record)}]}"#
                    let answer = try await client.call(.private, .recordsModify, json: body)
                    let what = "\(type ?? "no type") \(value): HTTP \(answer.status) \(answer.text.prefix(300))"
                    #expect(answer.status == 200 || answer.status == 400, "\(what)")
                    let result = try? WireCoding.decode(RecordsResponse.self, from: answer.body).records.first
                    if answer.status == 200, result?.value != nil {
                        saved += 1
                    } else {
                        #expect((answer.error ?? result?.error)?.serverErrorCode == .badRequest, "\(what)")
                        refused += 1
                    }
                }
            }
            let stored = try await client.allZoneChanges("Values").records
            #expect(stored.count == saved, "every saved record reads back")
            print("fuzz: field values (\(backend.testDescription)) types \(types.count), values \(values.count), saved \(saved), refused \(refused), 5xx 0")
        }
    }

    /// A 2xx, or a 4xx whose body is a protocol error (or an atomic failure's `records`).
    static func checkDocumented(_ answer: Answer, route: Route, body: Data, seed: UInt64) {
        let input = String(decoding: body.prefix(200), as: UTF8.self)
        let what = "\(route.operation?.rawValue ?? "schema/modify") seed \(seed): HTTP \(answer.status) \(answer.text.prefix(300)) for \(input)"
        #expect(answer.status < 500, "\(what)")
        guard answer.status >= 400 else { return }
        let documented = [400, 403, 404, 405, 409, 410, 412, 413, 421, 429]
        #expect(documented.contains(answer.status), "\(what)")
        if let error = answer.error {
            #expect(error.serverErrorCode.httpStatus == answer.status || answer.status == 405, "\(what)")
            #expect(error.uuid != nil && error.reason?.isEmpty == false, "\(what)")
        } else {
            let atomic = try? WireCoding.decode(RecordsResponse.self, from: answer.body)
            #expect(answer.status == 400 && atomic?.records.isEmpty == false, "\(what): neither an error body nor an atomic failure")
        }
    }

    /// Bad `since` and `timeout` parameters; every query answers at once (timeout 0 or an error).
    static func fuzzedNotificationQueries(_ fuzzer: inout JSONFuzzer) -> [String] {
        let timeouts = ["-1", "nan", "inf", "-inf", "1e999", "abc", "", "0x10", "%00", "0"]
        var queries = timeouts.map { "?timeout=\($0)&since=x" } + timeouts.filter { !["0", "1e999", "0x10"].contains($0) }.map { "?timeout=\($0)" }
        for _ in 0..<20 {
            let since = String(decoding: fuzzer.randomDocument(depth: 1).prefix(200), as: UTF8.self)
            queries.append("?timeout=0&since=\(HTTPQuery.encode(since))")
        }
        return queries
    }
}

/// Everything alice and bob stored before the fuzzing, outside the `Fuzz` zone.
struct Snapshot: Equatable {
    var aliceZones: [String]
    var aliceNotes: [Record]
    var bobNotes: [Record]
    var publicRecords: [Record]

    /// Reads what alice and bob have stored.
    init(alice: CloudClient, bob: CloudClient) async throws {
        let zones = try await alice.send(.GET, alice.path(.private, .zonesList)).decode(ZonesResponse.self)
        aliceZones = zones.zones.compactMap { $0.value?.zoneID.zoneName }.filter { $0 != "Fuzz" }.sorted()
        aliceNotes = try await alice.allZoneChanges("Notes").records
        bobNotes = try await bob.allZoneChanges("Notes").records
        let query = try await alice.call(.public, .recordsQuery, RecordsQueryRequest(query: .init(recordType: "Kept")))
        publicRecords = try query.decode(RecordsQueryResponse.self).records.compactMap(\.value)
    }

    /// Whether everything `before` held is still there, unchanged. New zones may have appeared: a
    /// fuzzed `zones/modify` whose zone name was mutated is a valid request that creates one.
    func keepsEverything(of before: Snapshot) -> Bool {
        var same = self
        same.aliceZones = aliceZones.filter(before.aliceZones.contains)
        return same == before
    }

    /// Stores a Notes zone with two records for each, and a public record.
    static func storeBaseline(alice: CloudClient, bob: CloudClient) async throws {
        for client in [alice, bob] {
            try await client.createZone("Notes")
            try await client.save([note("N-1", title: "one"), note("N-2", title: "two")])
        }
        let (status, _) = try await alice.modify(
            ZoneID.defaultZoneName, [.init(.create, Record(recordName: "P-1", recordType: "Kept", fields: ["k": "v"]))],
            in: .public)
        try #require(status == 200)
    }
}

/// Query-string encoding for tests that build URLs by hand.
enum HTTPQuery {
    static func encode(_ value: String) -> String {
        let allowed = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }
}
