import CloudStoreTesting
import CloudStoreWire
import Foundation
import Testing

@Suite("records/query")
struct ServerQueryTests {
    typealias Query = RecordsQueryRequest.Query

    func query(_ client: CloudClient, _ query: Query, limit: Int? = nil, marker: String? = nil) async throws
        -> RecordsQueryResponse
    {
        let answer = try await client.call(
            .private, .recordsQuery,
            RecordsQueryRequest(zoneID: ZoneID(zoneName: "Notes"), query: query, resultsLimit: limit, continuationMarker: marker))
        try #require(answer.status == 200, "\(answer.text)")
        return try answer.decode(RecordsQueryResponse.self)
    }

    @Test(arguments: Backend.all)
    func comparators_filterAndSort(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            try await client.createZone("Notes")
            try await client.save([
                note("A", title: "apple", extra: ["rank": 3.0, "tags": .list(["x", "y"])]),
                note("B", title: "banana", extra: ["rank": 1.0]),
                note("C", title: "avocado", extra: ["rank": 2.5]),
                Record(recordName: "F", recordType: "Folder", fields: ["title": "apple"]),
            ])
            func names(_ filters: [RecordsQueryRequest.Filter], sort: [RecordsQueryRequest.Sort]? = nil) async throws -> [String] {
                try await query(client, Query(recordType: "Note", filterBy: filters, sortBy: sort)).records.compactMap(\.value?.recordName)
            }
            #expect(try await names([.init("title", .equals, "apple")]) == ["A"])
            #expect(try await names([.init("title", .notEquals, "apple")]) == ["B", "C"])
            #expect(try await names([.init("rank", .lessThan, 3)], sort: [.init(fieldName: "rank")]) == ["B", "C"])
            #expect(try await names([.init("rank", .lessThanOrEquals, 3)], sort: [.init(fieldName: "rank", ascending: false)]) == ["A", "C", "B"])
            #expect(try await names([.init("rank", .greaterThan, 1)]) == ["A", "C"])
            #expect(try await names([.init("rank", .greaterThanOrEquals, 2.5)]) == ["A", "C"])
            #expect(try await names([.init("title", .in, .list(["banana", "avocado"]))]) == ["B", "C"])
            #expect(try await names([.init("title", .beginsWith, "a")], sort: [.init(fieldName: "title")]) == ["A", "C"])
            #expect(try await names([.init("tags", .listContains, "y")]) == ["A"])
            #expect(try await names([.init(systemFieldName: "recordName", .equals, "B")]) == ["B"])
            #expect(try await names([], sort: [.init(fieldName: "tags")]) == ["A", "B", "C"], "records without the field sort last")
        }
    }

    @Test(arguments: Backend.all)
    func paging_continuationMarkerWalksAllResults(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            try await client.createZone("Notes")
            try await client.save((0..<7).map { note(String(format: "N-%02d", $0)) })
            var marker: String?
            var seen: [String] = []
            repeat {
                let page = try await query(client, Query(recordType: "Note"), limit: 3, marker: marker)
                seen += page.records.compactMap(\.value?.recordName)
                marker = page.continuationMarker
            } while marker != nil
            #expect(seen == (0..<7).map { String(format: "N-%02d", $0) })

            let bad = try await client.call(
                .private, .recordsQuery,
                RecordsQueryRequest(zoneID: ZoneID(zoneName: "Notes"), query: Query(recordType: "Folder"), continuationMarker: "bm9wZQ=="))
            #expect(bad.status == 400)
        }
    }

    @Test(arguments: Backend.all)
    func badQueries_areBadRequests(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            try await client.createZone("Notes")
            let unknownSystem = try await client.call(
                .private, .recordsQuery,
                RecordsQueryRequest(
                    zoneID: ZoneID(zoneName: "Notes"),
                    query: Query(recordType: "Note", filterBy: [.init(systemFieldName: "secret", .equals, "x")])))
            #expect(unknownSystem.status == 400)
            let unknownComparator = try await client.call(
                .private, .recordsQuery,
                json: #"{"zoneID": {"zoneName": "Notes"}, "query": {"recordType": "Note", "filterBy": [{"comparator": "NEAR", "fieldName": "x", "fieldValue": {"value": 1}}]}}"#)
            #expect(unknownComparator.status == 400)
            #expect(unknownComparator.error?.reason?.contains("comparator") == true)
        }
    }

    /// An end-to-end encrypted field (`ENCRYPTED_BYTES`, WireProtocol.md §9) is stored and served
    /// byte for byte; a query that filters or sorts on it is 400 naming it, and one on other
    /// fields still runs.
    @Test(arguments: Backend.all)
    func encryptedFields_areOpaque_andNotQueryable(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            try await client.createZone("Notes")
            let ciphertext = Data((0..<77).map { UInt8(($0 * 37) % 256) })
            try await client.save([note("A", title: "apple", extra: ["body": .encryptedBytes(ciphertext)])])
            let records = try await query(client, Query(recordType: "Note", filterBy: [.init("title", .equals, "apple")])).records
            #expect(records.first?.value?.fields["body"] == .encryptedBytes(ciphertext))
            // Sent without a type, base64 text takes the type the schema declares, as for BYTES.
            let untyped = try await client.call(
                .private, .recordsModify,
                json: #"{"zoneID": {"zoneName": "Notes"}, "operations": [{"operationType": "create", "record": {"recordName": "B", "recordType": "Note", "fields": {"title": {"value": "banana"}, "body": {"value": "\#(ciphertext.base64EncodedString())"}}}}]}"#)
            #expect(untyped.status == 200, "\(untyped.text)")
            let banana = try await query(client, Query(recordType: "Note", filterBy: [.init("title", .equals, "banana")])).records
            #expect(banana.first?.value?.fields["body"] == .encryptedBytes(ciphertext))
            for refused in [
                Query(recordType: "Note", filterBy: [.init("body", .equals, .encryptedBytes(ciphertext))]),
                Query(recordType: "Note", filterBy: [.init("body", .equals, "apple")]),
                Query(recordType: "Note", sortBy: [.init(fieldName: "body")]),
            ] {
                let answer = try await client.call(.private, .recordsQuery, RecordsQueryRequest(zoneID: ZoneID(zoneName: "Notes"), query: refused))
                #expect(answer.status == 400)
                #expect(answer.error?.reason?.contains("body") == true && answer.error?.reason?.contains("encrypted") == true, "\(answer.text)")
            }
        }
    }
}
