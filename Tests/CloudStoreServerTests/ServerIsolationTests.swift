import CloudStoreServer
import CloudStoreTesting
import CloudStoreWire
import Crypto
import Foundation
import Testing

/// One user cannot read, write, list or long-poll another user's private zones through any
/// endpoint; tokens never reach logs below `.trace` or error bodies; names that look like SQL are
/// data; limits hold under concurrent load.
///
/// The server's choice, documented in WireProtocol.md §1 and `AuthenticatedCall.zone`: naming a zone
/// of another owner answers 403 `ACCESS_DENIED` whether or not that zone exists, with the same
/// body, so the answer tells nothing about the other user's data. Endpoints that name no owner
/// (lists, database changes, long polls) are scoped to the caller's own database.
@Suite("isolation between users, secrets, injection, load", .timeLimit(.minutes(ReliabilityRun.hangLimitMinutes)))
struct ServerIsolationTests {
    /// Every endpoint that names a zone, asked by bob about alice's zone `zoneName`.
    static func requestsNaming(_ zone: ZoneID) throws -> [(DatabaseOperation, Data)] {
        [
            (.zonesModify, try WireCoding.encode(ZonesModifyRequest(operations: [.init(.delete, zone)]))),
            (.zonesModify, try WireCoding.encode(ZonesModifyRequest(operations: [.init(.create, zone)]))),
            (.zonesLookup, try WireCoding.encode(ZonesLookupRequest(zones: [zone]))),
            (.recordsModify, try WireCoding.encode(
                RecordsModifyRequest(zoneID: zone, operations: [.init(.forceUpdate, note("N-1", title: "bob was here"))]))),
            (.recordsModify, try WireCoding.encode(
                RecordsModifyRequest(zoneID: zone, operations: [.init(.forceDelete, Record(recordName: "N-1"))]))),
            (.recordsLookup, try WireCoding.encode(RecordsLookupRequest(zoneID: zone, recordNames: ["N-1"]))),
            (.recordsQuery, try WireCoding.encode(RecordsQueryRequest(zoneID: zone, query: .init(recordType: "Note")))),
            (.changesZone, try WireCoding.encode(ZoneChangesRequest(zones: [.init(zoneID: zone)]))),
        ]
    }

    @Test(arguments: Backend.all)
    func everyEndpoint_bobCannotReachAlicesPrivateZones(_ backend: Backend) async throws {
        try await withServer(backend) { _, alice in
            try await alice.createZone("Notes")
            try await alice.save([note("N-1", title: "alice's secret")])
            let aliceBefore = try await alice.allZoneChanges("Notes")
            let aliceDatabase = try await alice.databaseChanges(token: nil)
            let bob = alice.asUser("bob-token", device: "device-B")
            let bobByQuery = alice.asUser(nil, device: "device-B")

            for zoneName in ["Notes", "Ghost"] {
                let zone = ZoneID(zoneName: zoneName, ownerRecordName: "_alice")
                for (operation, body) in try Self.requestsNaming(zone) {
                    for (client, query) in [(bob, ""), (bobByQuery, "?ckWebAuthToken=bob-token")] {
                        let answer = try await client.send(.POST, client.path(.private, operation) + query, body: body)
                        let what = "\(operation.rawValue) on alice's \(zoneName) (\(query.isEmpty ? "bearer" : "query token"))"
                        let failure = answer.error ?? ServerError(.internalError)
                        let item = try? WireCoding.decode(RecordsResponse.self, from: answer.body).records.first?.error
                        let code = answer.status == 200 ? item?.serverErrorCode : failure.serverErrorCode
                        #expect(code == .accessDenied, "\(what): HTTP \(answer.status) \(answer.text)")
                        #expect(!answer.text.contains("secret"), "\(what)")
                        #expect(!answer.text.contains("bob-token"), "\(what)")
                    }
                }
            }
            let existing = try await bob.call(.private, .recordsLookup, RecordsLookupRequest(
                zoneID: ZoneID(zoneName: "Notes", ownerRecordName: "_alice"), recordNames: ["N-1"]))
            let missing = try await bob.call(.private, .recordsLookup, RecordsLookupRequest(
                zoneID: ZoneID(zoneName: "Ghost", ownerRecordName: "_alice"), recordNames: ["N-1"]))
            #expect(existing.status == missing.status)
            #expect(existing.error?.reason?.replacingOccurrences(of: "Notes", with: "Ghost") == missing.error?.reason,
                    "an existing and a missing zone of another user answer alike")

            // Endpoints without an owner see bob's own database only.
            let zones = try await bob.send(.GET, bob.path(.private, .zonesList)).decode(ZonesResponse.self)
            #expect(zones.zones.compactMap(\.value?.zoneID.zoneName) == [ZoneID.defaultZoneName])
            let database = try await bob.databaseChanges(token: nil)
            #expect(database.zones.isEmpty, "alice's zone never shows in bob's database changes")
            let ownNotes = try await bob.call(.private, .changesZone, ZoneChangesRequest(zones: [.init(zoneID: ZoneID(zoneName: "Notes"))]))
            #expect(ownNotes.text.contains("ZONE_NOT_FOUND") && !ownNotes.text.contains("secret"))

            // Alice's tokens do not open her data to bob.
            let databaseToken = try await bob.call(.private, .changesDatabase, DatabaseChangesRequest(syncToken: aliceDatabase.syncToken))
            #expect(databaseToken.status == 400, "\(databaseToken.text)")
            try await bob.createZone("Notes")
            let zoneToken = try await bob.call(.private, .changesZone, ZoneChangesRequest(zones: [
                .init(zoneID: ZoneID(zoneName: "Notes"), syncToken: aliceBefore.token),
            ]))
            #expect([400, 410].contains(zoneToken.status), "\(zoneToken.text)")
            #expect(!zoneToken.text.contains("secret"))
            // A reference that would check or follow alice's record is refused before looking.
            let alicesRecord = RecordID(recordName: "N-1", zoneID: ZoneID(zoneName: "Notes", ownerRecordName: "_alice"))
            let (_, references) = try await bob.modify([
                .init(.create, note("B-1", extra: ["r": .reference(Reference(alicesRecord, action: .validate))])),
                .init(.create, note("B-2", extra: ["r": .reference(Reference(alicesRecord, action: .deleteSelf))])),
            ], atomic: false)
            #expect(references.map(\.code) == [.badRequest, .badRequest], "\(references)")
            let poll = try await bob.send(.GET, bob.path(.private, .notifications) + "?timeout=0&since=\(aliceDatabase.syncToken)")
            #expect(poll.status == 400, "a long poll on alice's database token: \(poll.text)")
            let users = try await bob.send(.GET, bob.path(.public, .usersCaller)).decode(CallerResponse.self)
            #expect(users.userRecordName == "_bob")

            // The schema is per container and holds record types, never records.
            let schema = try await bob.send(.GET, DatabaseRoute(container: bob.container, environment: .development).schemaPath)
            #expect(schema.status == 200 && !schema.text.contains("secret"))

            #expect(try await alice.allZoneChanges("Notes").records == aliceBefore.records, "alice's data is untouched")
        }
    }

    /// Uploads bytes for a record field through `assets/upload` of a database; answers the receipt.
    static func uploadAsset(_ client: CloudClient, _ bytes: Data, zone: ZoneID, record: String, in database: DatabaseScope)
        async throws -> AssetUploadResult.SingleFile
    {
        let urls = try await client.call(
            database, .assetsUpload,
            AssetUploadRequest(zoneID: zone, tokens: [.init(recordName: record, recordType: "Note", fieldName: "photo")]))
        let url = try #require(try urls.decode(AssetUploadResponse.self).tokens.first?.url, "\(urls.text)")
        let posted = try await client.send(.POST, url, body: bytes, headers: [("Content-Type", "application/octet-stream")])
        return try posted.decode(AssetUploadResult.self).singleFile
    }

    /// WireProtocol.md §6: through the shared database, a user who was never invited, one whose
    /// access ended, and a READ_ONLY participant get exactly the documented answers from every
    /// endpoint, and nothing of the zone's data; a guessed short GUID finds nothing.
    @Test(arguments: Backend.all)
    func sharedDatabase_everyEndpointForUninvitedRemovedAndReadOnlyUsers(_ backend: Backend) async throws {
        try await withServer(backend, users: sharingUsers) { _, alice in
            let list = ZoneID(zoneName: "List", ownerRecordName: "_alice")
            try await alice.createZone("List")
            let receipt = try await Self.uploadAsset(alice, Data("alice's photo".utf8), zone: ZoneID(zoneName: "List"), record: "L-1", in: .private)
            try await alice.save("List", [note("L-1", title: "secret milk", extra: ["photo": .asset(Asset(fileChecksum: receipt.fileChecksum, size: receipt.size, receipt: receipt.receipt))])])
            let share = try await alice.share("List", [("_bob", .readWrite), ("_carol", .readOnly), ("_erin", .readWrite)])
            let shortGUID = try #require(share.share?.shortGUID)
            let (bob, carol, dave, erin) = (alice.asUser("bob-token"), alice.asUser("carol-token"), alice.asUser("dave-token"), alice.asUser("erin-token"))
            for user in [bob, carol, erin] { _ = try await user.accept([shortGUID]) }
            let tag = try await alice.lookup("List", [ShareMetadata.zoneShareRecordName]).first?.value?.recordChangeTag
            try await alice.share("List", [("_bob", .readWrite), ("_carol", .readOnly)], .update, tag: tag)
            let downloadURL = try #require(try await alice.lookup("List", ["L-1"]).first?.value?.fields["photo"].flatMap {
                if case .asset(let asset) = $0 { asset.downloadURL } else { nil }
            })

            for (name, user) in [("uninvited", dave), ("removed", erin)] {
                let zones = try await user.send(.GET, user.path(.shared, .zonesList))
                #expect(zones.status == 200 && !zones.text.contains("List"), "\(name) zones/list: \(zones.text)")
                let lookupZone = try await user.call(.shared, .zonesLookup, ZonesLookupRequest(zones: [list]))
                #expect(try lookupZone.decode(ZonesResponse.self).zones.first?.error?.serverErrorCode == .accessDenied, "\(name)")
                for operation in [ZonesModifyRequest.Operation(.create, list), .init(.delete, list)] {
                    let modified = try await user.call(.shared, .zonesModify, ZonesModifyRequest(operations: [operation]))
                    #expect(modified.status == 400, "\(name) zones/modify: \(modified.text)")
                }
                for (operation, answer) in [
                    ("records/modify", try await user.modify(list, [.init(.forceUpdate, note("L-1", title: "mine"))], in: .shared)),
                    ("records/lookup", try await user.lookup(list, ["L-1"], in: .shared)),
                    ("records/query", try await user.call(.shared, .recordsQuery, RecordsQueryRequest(zoneID: list, query: .init(recordType: "Note")))),
                    ("assets/upload", try await user.call(.shared, .assetsUpload, AssetUploadRequest(zoneID: list, tokens: [.init(recordName: "L-1", fieldName: "photo")]))),
                    ("asset download", try await user.send(.GET, downloadURL)),
                    ("asset download (shared path)", try await user.send(.GET, downloadURL.replacingOccurrences(of: "/private/", with: "/shared/"))),
                ] {
                    #expect(answer.status == 403 && answer.error?.serverErrorCode == .accessDenied, "\(name) \(operation): \(answer.status) \(answer.text)")
                    #expect(!answer.text.contains("secret"), "\(name) \(operation)")
                }
                let changes = try await user.zoneChanges(list, in: .shared)
                let zoneError: ServerErrorCode? = try changes.decode(ZoneChangesResponse.self).zones.first.flatMap {
                    if case .error(let error) = $0 { error.serverErrorCode } else { nil }
                }
                #expect(zoneError == .accessDenied, "\(name) changes/zone: \(changes.text)")
                #expect(!changes.text.contains("secret"))
                let database = try await user.sharedDatabaseChanges(token: nil)
                #expect(database.zones.allSatisfy { $0.isDeleted }, "\(name): no live shared zone")
                #expect(database.zones.count == (name == "removed" ? 1 : 0))
                let poll = try await user.send(.GET, user.path(.shared, .notifications) + "?timeout=0")
                #expect(poll.status == 200 && !poll.text.contains("secret"))
            }

            // The READ_ONLY participant reads everything and changes nothing.
            #expect(try await carol.sharedZoneIDs() == [list])
            #expect(try await carol.lookup(list, ["L-1"], in: .shared).text.contains("secret milk"))
            #expect(try await carol.send(.GET, downloadURL).text == "alice's photo")
            let denied = try await carol.modify(list, [.init(.forceUpdate, note("L-1", title: "mine")), .init(.create, note("L-9"))], atomic: false, in: .shared)
            #expect(try denied.decode(RecordsResponse.self).records.map(\.code) == [.accessDenied, .accessDenied])
            let upload = try await carol.call(.shared, .assetsUpload, AssetUploadRequest(zoneID: list, tokens: [.init(recordName: "L-1", fieldName: "photo")]))
            #expect(upload.status == 403)
            #expect(try await carol.call(.shared, .zonesModify, ZonesModifyRequest(operations: [.init(.delete, list)])).status == 400)

            // The READ_WRITE participant uploads and saves an asset in the owner's zone.
            let bobs = try await Self.uploadAsset(bob, Data("bob's photo".utf8), zone: list, record: "L-2", in: .shared)
            let saved = try await bob.modify(list, [.init(.create, note("L-2", extra: ["photo": .asset(Asset(fileChecksum: bobs.fileChecksum, size: bobs.size, receipt: bobs.receipt))]))], in: .shared)
            #expect(saved.status == 200, "\(saved.text)")
            let bobsURL = try #require(try await alice.lookup("List", ["L-2"]).first?.value?.fields["photo"].flatMap {
                if case .asset(let asset) = $0 { asset.downloadURL } else { nil }
            })
            #expect(try await alice.send(.GET, bobsURL).text == "bob's photo")
            #expect(try await dave.send(.GET, bobsURL).status == 403)

            // A guessed short GUID finds nothing; another user's zone token opens nothing.
            let guessed = try await dave.accept([String((0..<22).map { _ in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".randomElement()! }), String(shortGUID.reversed())])
            #expect(guessed.map(\.serverErrorCode) == [.notFound, .notFound])
            #expect(try await alice.lookup("List", ["L-1"]).first?.value?.fields["title"] == .string("secret milk"))
        }
    }

    @Test(arguments: Backend.all)
    func tokens_neverInLogsBelowTraceNorInErrorBodies(_ backend: Backend) async throws {
        try await backend.withFreshStorage { storage in
            let recorder = LogRecorder()
            let secrets = ["alice-token", "wrong-secret-7431", "bob-token"]
            let server = try await TestServer.start(
                storage: storage, logger: recorder.logger(label: "cloudstore.server", level: .trace))
            do {
                let alice = CloudClient(baseURL: server.baseURL)
                try await alice.createZone("Notes")
                try await alice.save([note("N-1")])
                var bodies: [String] = []
                for (token, query) in [("wrong-secret-7431", ""), ("alice-token", ""), (nil, "?ckWebAuthToken=wrong-secret-7431"),
                                       (nil, "?ckWebAuthToken=bob-token")] as [(String?, String)] {
                    let client = alice.asUser(token)
                    bodies.append(try await client.send(.GET, client.path(.private, .zonesList) + query).text)
                    bodies.append(try await client.send(.POST, client.path(.private, .recordsModify) + query, body: Data("{bad".utf8)).text)
                    bodies.append(try await client.send(.GET, client.path(.private, .notifications) + query + (query.isEmpty ? "?" : "&") + "timeout=0").text)
                }
                let bearerTypo = try await alice.send(.GET, alice.path(.private, .zonesList), headers: [("Authorization", "Bearer")])
                bodies.append(bearerTypo.text)
                bodies.append(try await alice.send(.GET, alice.path(.private, .zonesList), headers: [("Authorization", "Token wrong-secret-7431")]).text)
                for body in bodies {
                    for secret in secrets { #expect(!body.contains(secret), "an answer shows a token: \(body)") }
                }
            } catch {
                try? await server.shutdown()
                throw error
            }
            try await server.shutdown()
            let belowTrace = recorder.messages.filter { !$0.hasPrefix("trace ") }
            #expect(belowTrace.contains { $0.hasPrefix("info request") }, "the recorder saw the server's request lines")
            for message in belowTrace {
                for secret in secrets { #expect(!message.contains(secret), "logged below trace: \(message)") }
            }
        }
    }

    @Test(arguments: Backend.all)
    func sqlLookingNames_areStoredVerbatimAndChangeNothingElse(_ backend: Backend) async throws {
        let hostile = [
            "x'; DROP TABLE cloudstore_record; --", "' OR '1'='1", "\"; DELETE FROM cloudstore_zone; --",
            "Robert'); DROP TABLE cloudstore_partition;--", "%", "_", "\\", "a' || (SELECT owner FROM cloudstore_partition) || '",
            "$1", "?", ":name", "名前 🗂️",
        ]
        try await withServer(backend) { _, alice in
            let bob = alice.asUser("bob-token", device: "device-B")
            try await bob.createZone("Notes")
            try await bob.save([note("B-1", title: "bob's")])
            let bobBefore = try await bob.allZoneChanges("Notes").records

            for (index, name) in hostile.enumerated() {
                let zone = try await alice.createZone(name)
                #expect(zone.zoneID.zoneName == name)
                let record = note(name, title: name, extra: ["ref": .reference(Reference(recordName: name, action: .none))])
                let saved = try await alice.save(name, [record])
                #expect(saved.first?.recordName == name)
                let asked = [name, "\(name)%", "' OR '1'='1"]
                let found = try await alice.lookup(name, asked)
                #expect(found.first?.value?.fields["title"] == .string(name), "record \(index) reads back verbatim")
                for (requested, result) in zip(asked, found) {
                    #expect(result.value.map { $0.recordName == requested } ?? (result.code == .notFound), "\(requested): \(result)")
                }
                let changes = try await alice.allZoneChanges(name)
                #expect(changes.records.map(\.recordName) == [name], "zone \(index) holds exactly its record")
                let typed = try await alice.call(.private, .changesZone, ZoneChangesRequest(zones: [
                    .init(zoneID: ZoneID(zoneName: name), desiredRecordTypes: [name, "Note' OR '1'='1"]),
                ]))
                #expect(typed.status == 200 && !typed.text.contains("bob's"))
                let query = try await alice.call(.private, .recordsQuery, RecordsQueryRequest(
                    zoneID: ZoneID(zoneName: name), query: .init(recordType: "Note", filterBy: [.init("title", .equals, .string(name))])))
                #expect(try query.decode(RecordsQueryResponse.self).records.compactMap(\.value?.recordName) == [name])
            }
            // Record types and field names are identifiers: SQL in them is refused, not stored.
            let (_, refused) = try await alice.modify(hostile[0], [
                .init(.create, Record(recordName: "t", recordType: "Note; DROP TABLE x", fields: [:])),
                .init(.create, Record(recordName: "f", recordType: "Note", fields: ["a'); DROP TABLE x;--": "v"])),
            ], atomic: false)
            #expect(refused.map(\.code) == [.badRequest, .badRequest])
            let badContainer = try await alice.send(
                .GET, "/database/1/x%27%3B%20DROP%20TABLE%20cloudstore_record%3B--/development/private/zones/list")
            #expect(badContainer.status == 400)

            let zones = try await alice.send(.GET, alice.path(.private, .zonesList)).decode(ZonesResponse.self)
            #expect(Set(zones.zones.compactMap(\.value?.zoneID.zoneName)) == Set(hostile + [ZoneID.defaultZoneName]))
            #expect(try await bob.allZoneChanges("Notes").records == bobBefore, "bob's data is untouched")
        }
    }

    @Test func limits_holdUnderConcurrentLoad() async throws {
        let users = ["t1": "_u1", "t2": "_u2", "t3": "_u3", "t4": "_u4"]
        let clock = ManualClock()
        var limits = ServerLimits(maxBodyBytes: 4 << 20, requestsPerSecondPerUser: 20)
        limits.maxOperations = 200
        try await withServer(.sqlite, users: users, limits: limits, clock: clock) { _, base in
            let oversized = Data(repeating: UInt8(ascii: " "), count: (4 << 20) + 1)
            let tooMany = try WireCoding.encode(RecordsModifyRequest(
                zoneID: ZoneID(zoneName: "Notes"), operations: (0..<201).map { .init(.create, note("N-\($0)")) }))
            let results = try await withThrowingTaskGroup(of: (String, [Answer]).self) { group in
                for token in users.keys.sorted() {
                    group.addTask {
                        let client = base.asUser(token)
                        var answers: [Answer] = []
                        for index in 0..<60 {
                            let path = client.path(.private, .recordsModify)
                            switch index % 3 {
                            case 0: answers.append(try await client.send(.POST, path, body: oversized))
                            case 1: answers.append(try await client.send(.POST, path, body: tooMany))
                            default: answers.append(try await client.send(.GET, client.path(.private, .zonesList)))
                            }
                        }
                        return (token, answers)
                    }
                }
                return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
            }
            var counts: [Int: Int] = [:]
            for (token, answers) in results {
                for (index, answer) in answers.enumerated() {
                    counts[answer.status, default: 0] += 1
                    switch index % 3 {
                    case 0: #expect(answer.status == 413, "\(token) #\(index): a body over 4 MiB is refused before anything else")
                    case 1: #expect([413, 429].contains(answer.status), "\(token) #\(index): \(answer.status)")
                    default: #expect([200, 429].contains(answer.status), "\(token) #\(index): \(answer.status)")
                    }
                    #expect(answer.error?.serverErrorCode != nil || answer.status == 200, "\(token) #\(index) answers JSON")
                    if answer.status == 429 {
                        #expect((answer.error?.retryAfter ?? 0) >= 1)
                        #expect(answer.headers.first(name: "Retry-After") != nil)
                    }
                }
                let admitted = answers.enumerated().filter { $0.offset % 3 != 0 && $0.element.status != 429 }.count
                #expect(admitted <= 20, "\(token): the bucket of 20 is never exceeded without time passing (\(admitted))")
            }
            #expect(counts.keys.allSatisfy { [200, 413, 429].contains($0) }, "\(counts)")

            clock.advance(by: 2)
            let started = ContinuousClock.now
            let after = try await base.asUser("t1").send(.GET, base.path(.private, .zonesList))
            #expect(after.status == 200)
            #expect(ContinuousClock.now - started < .seconds(15), "the server stays responsive")
            print("load: users 4, requests \(ReportFormat.count(counts.values.reduce(0, +))), answers \(counts.sorted { $0.key < $1.key })")
        }
    }

    @Test(arguments: Backend.all)
    func serverToServer_incompleteOrMalformedSignaturesAre401WithoutEchoingThem(_ backend: Backend) async throws {
        let key = P256.Signing.PrivateKey()
        let clock = ManualClock()
        try await withServer(backend, serverKeys: ["key-1": key.publicKey.pemRepresentation], clock: clock) { _, client in
            let anonymous = client.asUser(nil)
            let path = client.path(.public, .recordsQuery)
            let body = try WireCoding.encode(RecordsQueryRequest(query: .init(recordType: "Note")))
            let date = ServerToServerSignature.dateString(clock.now)
            let cases: [[(String, String)]] = [
                [(WireHeader.signature, "c2lnbmF0dXJl"), (WireHeader.date, date)],
                [(WireHeader.keyID, "key-1"), (WireHeader.signature, "c2lnbmF0dXJl")],
                [(WireHeader.keyID, "key-1"), (WireHeader.date, date)],
                [(WireHeader.keyID, "key-1"), (WireHeader.date, date), (WireHeader.signature, "%%%not-base64%%%")],
                [(WireHeader.keyID, "key-1"), (WireHeader.date, date), (WireHeader.signature, "c2lnbmF0dXJl")],
                [(WireHeader.keyID, "key-1"), (WireHeader.date, "yesterday"), (WireHeader.signature, "c2lnbmF0dXJl")],
                [(WireHeader.keyID, "key-1"), (WireHeader.date, "2026-01-25T22:15:43.123Z"), (WireHeader.signature, "c2lnbmF0dXJl")],
            ]
            for headers in cases {
                let answer = try await anonymous.send(.POST, path, body: body, headers: headers)
                #expect(answer.status == 401, "\(headers.map(\.0)): \(answer.text)")
                #expect(answer.error?.serverErrorCode == .authenticationFailed)
                #expect(!answer.text.contains("c2lnbmF0dXJl"), "the signature is never echoed")
            }
        }
    }

    /// WireProtocol.md §1, CloudKit's default security roles for the public database: anyone reads and
    /// creates; only the creator or a server-to-server key updates or deletes.
    @Test(arguments: Backend.all)
    func publicDatabase_onlyTheCreatorOrAServerKeyChangesARecord(_ backend: Backend) async throws {
        let key = P256.Signing.PrivateKey()
        let clock = ManualClock()
        try await withServer(backend, serverKeys: ["key-1": key.publicKey.pemRepresentation], clock: clock) { _, alice in
            let (_, created) = try await alice.modify(
                "_defaultZone", ["P-1", "P-2", "P-3"].map { .init(.create, note($0, title: "alice's")) }, in: .public)
            let bob = alice.asUser("bob-token", device: "device-B")
            let tag = created[0].value?.recordChangeTag
            let writes: [RecordsModifyRequest.Operation] = [
                .init(.update, note("P-1", title: "bob's", tag: tag)),
                .init(.forceUpdate, note("P-1", title: "bob's")),
                .init(.replace, note("P-1", title: "bob's", tag: tag)),
                .init(.forceReplace, note("P-1", title: "bob's")),
                .init(.delete, Record(recordName: "P-1", recordChangeTag: tag)),
                .init(.forceDelete, Record(recordName: "P-1")),
            ]
            for operation in writes {
                let (status, results) = try await bob.modify("_defaultZone", [operation], atomic: false, in: .public)
                #expect(status == 200)
                #expect(results.first?.code == .accessDenied, "\(operation.operationType.rawValue): \(results)")
                #expect(results.first?.error?.reason?.contains("created by _alice") == true)
            }
            let (_, atomicResults) = try await bob.modify(
                "_defaultZone", [.init(.create, note("B-1", title: "bob's")), .init(.forceDelete, Record(recordName: "P-2"))],
                atomic: true, in: .public)
            #expect(
                atomicResults.map(\.code) == [nil, .accessDenied],
                "atomic applies to custom zones only: in _defaultZone the denied write fails alone")

            let unchanged = try await bob.lookup("_defaultZone", ["P-1", "P-2"], in: .public)
            #expect(unchanged.map { $0.value?.fields["title"] } == [.string("alice's"), .string("alice's")], "reads stay open")

            let (_, bobsOwn) = try await bob.modify("_defaultZone", [.init(.create, note("B-2", title: "bob's"))], in: .public)
            #expect(bobsOwn.first?.value != nil, "anyone creates")
            let (bobDeletes, _) = try await bob.modify(
                "_defaultZone", [.init(.forceDelete, Record(recordName: "B-2"))], in: .public)
            #expect(bobDeletes == 200, "the creator deletes their own")
            let (aliceUpdates, aliceResults) = try await alice.modify(
                "_defaultZone", [.init(.update, note("P-1", title: "alice's again", tag: tag))], in: .public)
            #expect(aliceUpdates == 200 && aliceResults.first?.value != nil, "the creator updates")

            let signer = Signer(key: key, keyID: "key-1", client: alice.asUser(nil))
            let body = try WireCoding.encode(
                RecordsModifyRequest(operations: [
                    .init(.forceUpdate, note("P-2", title: "moderated")), .init(.forceDelete, Record(recordName: "P-3")),
                ]))
            let signed = try await signer.send(alice.path(.public, .recordsModify), body: body, date: clock.now)
            #expect(signed.status == 200, "\(signed.text)")
            #expect(try signed.decode(RecordsResponse.self).records.allSatisfy { $0.error == nil }, "a server key changes any record")
        }
    }

    /// WireProtocol.md §1: a container the server does not serve answers 404 naming it, and opens nothing.
    @Test func unknownContainer_isNotFoundAndOpensNothing() async throws {
        try await TestServer.with { server in
            let client = CloudClient(baseURL: server.baseURL, container: "iCloud.not.served")
            for (database, operation) in [(DatabaseScope.private, DatabaseOperation.zonesList), (.public, .usersCaller)] {
                let answer = try await client.send(.GET, client.path(database, operation))
                #expect(answer.status == 404, "\(answer.text)")
                #expect(answer.error?.serverErrorCode == .notFound)
                #expect(answer.error?.reason?.contains("iCloud.not.served") == true)
            }
            let files = try FileManager.default.contentsOfDirectory(atPath: try #require(server.dataDirectory).path)
            #expect(!files.contains { $0.hasPrefix("iCloud.not.served") }, "\(files)")
        }
    }
}
