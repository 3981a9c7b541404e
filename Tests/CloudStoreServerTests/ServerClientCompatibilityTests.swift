@testable import CloudStoreServer
import CloudStoreTesting
import CloudStoreWire
import Foundation
import NIOHTTP1
import Testing

/// What CloudKit Web Services clients written for Apple's service (MistKit, CloudKit JS) send and
/// expect, over HTTP with JSON literals as they write them: the older changes endpoints, the
/// owner as `ownerName`, an asset upload without a zone.
@Suite("CloudKit client compatibility")
struct ServerClientCompatibilityTests {
    @Test(arguments: Backend.all)
    func recordsChanges_pagesAZoneLikeChangesZoneAndSharesItsTokens(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            try await client.createZone("Notes")
            let saved = try await client.save((0..<200).map { note("N-\($0)") }) + client.save((200..<250).map { note("N-\($0)") })
            _ = try await client.modify([.init(.delete, Record(recordName: "N-7", recordChangeTag: saved[7].recordChangeTag))])

            var records: [Record] = []
            var token: String?
            var pages = 0
            repeat {
                // As MistKit writes it: the owner as ownerName, the token only after the first page.
                let tokenMember = token.map { #","syncToken":"\#($0)""# } ?? ""
                let answer = try await client.call(
                    .private, .recordsChanges,
                    json: #"{"zoneID":{"zoneName":"Notes","ownerName":"_alice"},"resultsLimit":100\#(tokenMember)}"#)
                try #require(answer.status == 200, "\(answer.text)")
                let page = try answer.decode(ZoneChanges.self)
                #expect(page.zoneID.zoneName == "Notes")
                records += page.records
                token = page.syncToken
                pages += 1
                if !page.moreComing { break }
            } while pages < 10
            #expect(pages == 3)
            #expect(records.count == 250)
            #expect(Set(records.map(\.recordName)).count == 250, "each record once")
            let tombstone = try #require(records.first { $0.recordName == "N-7" })
            #expect(tombstone.deleted)
            #expect(records.filter { !$0.deleted }.allSatisfy { $0.fields["title"] == "Hi" })

            // One token space with changes/zone, both ways.
            let caughtUp = try await client.allZoneChanges(token: token)
            #expect(caughtUp.records.isEmpty)
            #expect(caughtUp.token == token)
            try await client.save([note("N-250")])
            let next = try await client.call(
                .private, .recordsChanges, RecordChangesRequest(.init(zoneID: ZoneID(zoneName: "Notes"), syncToken: caughtUp.token)))
            #expect(try next.decode(ZoneChanges.self).records.map(\.recordName) == ["N-250"])
        }
    }

    @Test(arguments: Backend.all)
    func recordsChanges_zoneAndTokenProblemsAnswerForTheRequest(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            let missing = try await client.call(.private, .recordsChanges, json: #"{"zoneID":{"zoneName":"Nowhere"}}"#)
            #expect(missing.status == 404)
            #expect(missing.error?.serverErrorCode == .zoneNotFound)
            #expect(missing.error?.reason?.contains("Nowhere") == true)

            try await client.createZone("Notes")
            let garbage = try await client.call(
                .private, .recordsChanges, json: #"{"zoneID":{"zoneName":"Notes"},"syncToken":"garbage!!"}"#)
            #expect(garbage.status == 400)
            #expect(garbage.error?.serverErrorCode == .badRequest)

            let noZone = try await client.call(.private, .recordsChanges, json: #"{"resultsLimit":10}"#)
            #expect(noZone.status == 400, "zoneID is required: \(noZone.text)")
            #expect(noZone.error?.reason?.contains("zoneID") == true)

            let twoOwners = try await client.call(
                .private, .recordsChanges, json: #"{"zoneID":{"zoneName":"Notes","ownerName":"_alice","ownerRecordName":"_bob"}}"#)
            #expect(twoOwners.status == 400)
            #expect(twoOwners.error?.reason?.contains("ownerName") == true)

            let bobs = try await client.asUser("bob-token").call(
                .private, .recordsChanges, json: #"{"zoneID":{"zoneName":"Notes","ownerName":"_alice"}}"#)
            #expect(bobs.status == 403, "another user's private zone: \(bobs.text)")
        }
    }

    @Test(arguments: Backend.all)
    func zonesChanges_listsChangedZonesUnderEitherTokenName(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            try await client.createZone("Notes")
            try await client.createZone("Other")

            let first = try await client.call(.private, .zonesChanges, json: "{}")
            try #require(first.status == 200, "\(first.text)")
            let json = first.json
            let token = try #require(json["syncToken"] as? String)
            #expect(json["metaSyncToken"] as? String == token, "the token under both names")
            let page = try first.decode(ZonesChangesResponse.self).changes
            #expect(Set(page.zones.map(\.zoneID.zoneName)) == ["Notes", "Other"])
            #expect(page.moreComing == false)

            let quiet = try await client.call(.private, .zonesChanges, json: #"{"metaSyncToken":"\#(token)"}"#)
            #expect(try quiet.decode(ZonesChangesResponse.self).changes.zones.isEmpty, "\(quiet.text)")

            try await client.save("Other", [note("O-1")])
            let changed = try await client.call(.private, .zonesChanges, ZonesChangesRequest(syncToken: token))
            #expect(try changed.decode(ZonesChangesResponse.self).changes.zones.map(\.zoneID.zoneName) == ["Other"])

            // The tokens are changes/database tokens.
            let database = try await client.databaseChanges(token: token)
            #expect(database.zones.map(\.zoneID.zoneName) == ["Other"])

            let conflicting = try await client.call(
                .private, .zonesChanges, json: #"{"syncToken":"\#(token)","metaSyncToken":"other"}"#)
            #expect(conflicting.status == 400)
            #expect(conflicting.error?.reason?.contains("metaSyncToken") == true)
        }
    }

    /// MistKit sends `INT64` and `STRING` without a type; CloudKit JS sends most scalars so.
    @Test(arguments: Backend.all)
    func untypedValues_takeTheSchemasTypeAndOnlyWhatCannotBeItIsRefused(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            let schema = CloudSchema(recordTypes: [
                .init(
                    name: "Event",
                    fields: [
                        .init(name: "title", type: .string, queryable: true), .init(name: "count", type: .int64, queryable: true),
                        .init(name: "starts", type: .timestamp, queryable: true), .init(name: "ratio", type: .double, queryable: true),
                        .init(name: "blob", type: .bytes, queryable: false), .init(name: "reminders", type: .list(.timestamp), queryable: false),
                    ])
            ])
            let declared = try await client.send(.POST, client.basePath + "/schema/modify", body: try WireCoding.encode(schema))
            try #require(declared.status == 200, "\(declared.text)")
            try await client.createZone("Notes")

            func save(_ name: String, _ fields: String) async throws -> RecordResult {
                let answer = try await client.call(
                    .private, .recordsModify,
                    json: #"{"zoneID":{"zoneName":"Notes"},"atomic":false,"operations":[{"operationType":"forceUpdate","record":{"recordName":"\#(name)","recordType":"Event","fields":{\#(fields)}}}]}"#)
                try #require(answer.status == 200, "\(answer.text)")
                return try #require(try answer.decode(RecordsResponse.self).records.first)
            }

            let saved = try await save(
                "E-1",
                #""title":{"value":"Launch"},"count":{"value":9223372036854775807},"starts":{"value":1767225600000},"ratio":{"value":2},"blob":{"value":"aGk="},"reminders":{"value":[1767225000000,1767225300000]},"new":{"value":3}"#)
            let fields = try #require(saved.value?.fields, "\(saved)")
            #expect(fields["title"] == .string("Launch"))
            #expect(fields["count"] == .int64(.max), "an untyped INT64 keeps every digit")
            #expect(fields["starts"] == .timestamp(Date(millisecondsSince1970: 1_767_225_600_000)))
            #expect(fields["ratio"] == .double(2))
            #expect(fields["blob"] == .bytes(Data("hi".utf8)))
            #expect(
                fields["reminders"]
                    == .list([.timestamp(Date(millisecondsSince1970: 1_767_225_000_000)), .timestamp(Date(millisecondsSince1970: 1_767_225_300_000))]))
            #expect(fields["new"] == .int64(3), "a field the schema does not declare is typed by its JSON, as before")
            let stored = try #require(try await client.lookup(["E-1"]).first?.value)
            #expect(stored.fields == fields, "stored as typed")

            for (json, field) in [
                (#""blob":{"value":"%%%"}"#, "Event.blob"), (#""count":{"value":"12"}"#, "Event.count"),
                (#""count":{"value":2.5}"#, "Event.count"), (#""starts":{"value":"tomorrow"}"#, "Event.starts"),
                (#""reminders":{"value":[1e300]}"#, "Event.reminders"),
            ] {
                let refused = try await save("E-2", json)
                #expect(refused.code == .badRequest, "\(json)")
                #expect(refused.error?.reason?.contains(field) == true, "\(refused)")
            }
            let typedWrong = try await save("E-2", #""starts":{"value":1767225600000,"type":"INT64"}"#)
            #expect(typedWrong.code == .badRequest, "a value sent with another type is still refused")
            #expect(typedWrong.error?.reason?.contains("TIMESTAMP in the schema, not INT64") == true, "\(typedWrong)")
            #expect(try await client.lookup(["E-2"]).first?.code == .notFound, "nothing refused was stored")
        }
    }

    /// As MistKit uploads: `assets/upload` without a zone, then a plain POST of the bytes to the
    /// URL as it is, without credentials; the receipt then saves the record.
    @Test(arguments: Backend.all)
    func assetsUpload_absoluteURLWithoutZoneTakesTheBytesWithoutCredentials(_ backend: Backend) async throws {
        try await withServer(backend) { server, client in
            let answer = try await client.call(
                .public, .assetsUpload, json: #"{"tokens":[{"recordName":"A-1","recordType":"Artwork","fieldName":"image"}]}"#)
            try #require(answer.status == 200, "\(answer.text)")
            let url = try #require(try answer.decode(AssetUploadResponse.self).tokens.first?.url)
            let path = client.basePath + "/public/assets/upload/"
            #expect(url.hasPrefix(server.baseURL.absoluteString + path), "absolute, on the host the client used: \(url)")

            let anonymous = client.asUser(nil)
            let bytes = Data((0..<1000).map { UInt8($0 % 251) })
            let bob = try await client.asUser("bob-token").send(.POST, url, body: bytes)
            #expect(bob.status == 403, "with credentials, only the caller it was issued to: \(bob.text)")
            let unknown = try await anonymous.send(.POST, path + String(repeating: "0", count: 32), body: bytes)
            #expect(unknown.status == 404, "\(unknown.text)")
            #expect(unknown.error?.reason?.contains("upload URL is unknown") == true)
            let uploaded = try await anonymous.send(.POST, url, body: bytes, headers: [("Content-Type", "application/octet-stream")])
            try #require(uploaded.status == 200, "\(uploaded.text)")
            let file = try uploaded.decode(AssetUploadResult.self).singleFile
            #expect(file.size == 1000)

            let saved = try await client.call(
                .public, .recordsModify,
                json: #"{"operations":[{"operationType":"create","record":{"recordName":"A-1","recordType":"Artwork","fields":{"image":{"type":"ASSETID","value":{"fileChecksum":"\#(file.fileChecksum)","size":1000,"receipt":"\#(file.receipt)"}}}}}]}"#)
            #expect(saved.status == 200, "the receipt belongs to alice, who asked for the URL: \(saved.text)")
        }
    }

    @Test(arguments: Backend.all)
    func users_discoverAndLookupAnswerKnownUsersOnly(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            let discovered = try await client.call(
                .public, .usersDiscover,
                json: #"{"lookupInfos":[{"userRecordName":"_bob"},{"userRecordName":"_nobody"},{"emailAddress":"bob@example.com"}]}"#)
            try #require(discovered.status == 200, "\(discovered.text)")
            #expect(try discovered.decode(UsersResponse.self).users.map(\.userRecordName) == ["_bob"])
            let byID = try await client.call(.public, .usersLookupID, json: #"{"users":[{"userRecordName":"_alice"}]}"#)
            #expect(try byID.decode(UsersResponse.self).users.first?.lookupInfo?.userRecordName == "_alice")
            let contacts = try await client.send(.GET, client.path(.public, .usersDiscover))
            #expect(try contacts.decode(UsersResponse.self).users.isEmpty, "no one's contacts are known")
            let empty = try await client.call(.public, .usersDiscover, json: "{}")
            #expect(empty.status == 400)
        }
    }

    /// Documented endpoints the server does not serve yet say so, rather than 404.
    @Test(arguments: Backend.all)
    func unsupportedEndpoints_answerADocumentedErrorNot404(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            let base = client.basePath
            let path = base + "/private/assets/rereference"
            let answer = try await client.send(.POST, path, body: Data("{}".utf8))
            #expect(answer.status == 400, "\(path): \(answer.text)")
            #expect(answer.error?.reason?.contains("not supported by this server yet") == true, "\(path)")
            let anonymous = try await client.asUser(nil).send(.POST, path, body: Data("{}".utf8))
            #expect(anonymous.status == 421, "credentials are checked first")
        }
    }

    /// `?ckAPIToken=` alone reads the public database as CloudKit's anonymous users do; anything
    /// else needs a user. An unknown or revoked token is refused whatever else comes with it.
    @Test(arguments: Backend.all)
    func apiToken_aloneReadsThePublicDatabaseOnly(_ backend: Backend) async throws {
        try await withServer(backend) { server, alice in
            let readable = try await alice.call(
                .public, .recordsModify, RecordsModifyRequest(operations: [.init(.create, note("P-1", title: "for everyone"))]))
            try #require(readable.status == 200, "\(readable.text)")
            // Before the container has API tokens, ckAPIToken is ignored, as before they existed.
            let anonymous = alice.asUser(nil)
            let query = client(anonymous, .public, .recordsQuery, apiToken: "web-secret")
            let ignored = try await anonymous.send(.POST, query, body: Data(#"{"query":{"recordType":"Note"}}"#.utf8))
            #expect(ignored.status == 421, "\(ignored.text)")

            server.server.replaceAPITokens(["iCloud.test": ["website": "web-secret"], "iCloud.test.sync": ["x": "other-secret"]])
            let read = try await anonymous.send(.POST, query, body: Data(#"{"query":{"recordType":"Note"}}"#.utf8))
            try #require(read.status == 200, "\(read.text)")
            #expect(try read.decode(RecordsQueryResponse.self).records.compactMap(\.value?.recordName) == ["P-1"])
            let lookup = try await anonymous.send(
                .POST, client(anonymous, .public, .recordsLookup, apiToken: "web-secret"),
                body: Data(#"{"records":[{"recordName":"P-1"}]}"#.utf8))
            #expect(lookup.status == 200, "\(lookup.text)")

            for (database, operation, body) in [
                (DatabaseScope.public, DatabaseOperation.recordsModify, #"{"operations":[{"operationType":"create","record":{"recordName":"P-2","recordType":"Note"}}]}"#),
                (.public, .assetsUpload, #"{"tokens":[{"recordName":"P-2","fieldName":"f"}]}"#),
                (.private, .recordsQuery, #"{"query":{"recordType":"Note"}}"#),
                (.public, .usersCaller, ""),
            ] {
                let path = client(anonymous, database, operation, apiToken: "web-secret")
                let answer = try await anonymous.send(
                    operation.method == "GET" ? .GET : .POST, path, body: body.isEmpty ? nil : Data(body.utf8))
                #expect(answer.status == 421, "\(operation.rawValue) in \(database): \(answer.text)")
                #expect(answer.error?.serverErrorCode == .authenticationRequired)
            }

            // With a user's token the request acts as the user.
            let asAlice = try await alice.send(
                .POST, client(alice, .public, .recordsModify, apiToken: "web-secret"),
                body: Data(#"{"operations":[{"operationType":"create","record":{"recordName":"P-3","recordType":"Note"}}]}"#.utf8))
            #expect(asAlice.status == 200, "\(asAlice.text)")
            for token in ["wrong", "other-secret"] {
                let refused = try await alice.send(
                    .POST, client(alice, .public, .recordsQuery, apiToken: token), body: Data(#"{"query":{"recordType":"Note"}}"#.utf8))
                #expect(refused.status == 401, "\(token): \(refused.text)")
                #expect(refused.error?.reason?.contains("API token") == true)
            }

            server.server.replaceAPITokens(["iCloud.test": ["website-2": "web-secret-2"]])
            let revoked = try await anonymous.send(.POST, query, body: Data(#"{"query":{"recordType":"Note"}}"#.utf8))
            #expect(revoked.status == 401, "a revoked token is refused at once: \(revoked.text)")
        }
    }

    func client(_ client: CloudClient, _ database: DatabaseScope, _ operation: DatabaseOperation, apiToken: String) -> String {
        client.path(database, operation) + "?ckAPIToken=" + apiToken
    }

    @Test
    func apiTokenAccess_allowsReadsOfThePublicDatabaseOnly() {
        let base = "/database/1/iCloud.test/development"
        #expect(APITokenAccess.allows(.post, path: base + "/public/records/query"))
        #expect(APITokenAccess.allows(.get, path: base + "/public/assets/download/" + String(repeating: "a", count: 32)))
        #expect(!APITokenAccess.allows(.post, path: base + "/public/records/modify"))
        #expect(!APITokenAccess.allows(.post, path: base + "/private/records/query"))
        #expect(!APITokenAccess.allows(.post, path: base + "/public/assets/upload"))
        #expect(!APITokenAccess.allows(.post, path: base + "/schema/modify"))
        #expect(!APITokenAccess.allows(.get, path: "/console/public/records/query"))
    }

    @Test
    func requestOrigin_prefersTheProxysHeadersAndRefusesWhatIsNotAHost() {
        #expect(RequestOrigin.origin(scheme: nil, forwardedHost: nil, host: "127.0.0.1:8080") == "http://127.0.0.1:8080")
        #expect(
            RequestOrigin.origin(scheme: "https, http", forwardedHost: "cloud.example.com, 10.0.0.1", host: "cloudstore")
                == "https://cloud.example.com")
        #expect(RequestOrigin.origin(scheme: "gopher", forwardedHost: nil, host: "[::1]:80") == "http://[::1]:80")
        #expect(RequestOrigin.origin(scheme: nil, forwardedHost: nil, host: nil) == nil)
        for bad in ["evil.com/path", "a b", "x@y", "", "ex\u{e4}mple.com", String(repeating: "a", count: 256)] {
            #expect(RequestOrigin.origin(scheme: nil, forwardedHost: bad, host: nil) == nil, "\(bad)")
        }
    }
}
