import CloudStoreServer
import CloudStoreTesting
import CloudStoreWire
import Crypto
import Foundation
import NIOHTTP1
import Testing

@Suite("auth: bearer tokens, ownership, server-to-server signatures")
struct ServerAuthTests {
    @Test(arguments: Backend.all)
    func bearer_missingIs421AndUnknownIs401(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            let anonymous = try await client.asUser(nil).send(.GET, client.path(.private, .zonesList))
            #expect(anonymous.status == 421)
            #expect(anonymous.error?.serverErrorCode == .authenticationRequired)

            let wrong = try await client.asUser("not-a-token").send(.GET, client.path(.private, .zonesList))
            #expect(wrong.status == 401)
            #expect(wrong.error?.serverErrorCode == .authenticationFailed)
            #expect(!wrong.text.contains("not-a-token"), "tokens never appear in error bodies")

            let basic = try await client.asUser(nil).send(
                .GET, client.path(.private, .zonesList), headers: [("Authorization", "Basic YWxpY2U6eA==")])
            #expect(basic.status == 401)

            let query = try await client.asUser(nil).send(.GET, client.path(.private, .zonesList) + "?ckWebAuthToken=alice-token")
            #expect(query.status == 200, "ckWebAuthToken works like a bearer token")
        }
    }

    @Test(arguments: Backend.all)
    func privateDatabase_isTheOwnersAlone(_ backend: Backend) async throws {
        try await withServer(backend) { _, alice in
            try await alice.createZone("Notes")
            try await alice.save([note("N-1", title: "alice's secret")])
            let bob = alice.asUser("bob-token", device: "device-B")
            let alicesZone = ZoneID(zoneName: "Notes", ownerRecordName: "_alice")

            let read = try await bob.call(.private, .recordsLookup, RecordsLookupRequest(zoneID: alicesZone, recordNames: ["N-1"]))
            #expect(read.status == 403)
            #expect(read.error?.serverErrorCode == .accessDenied)
            #expect(!read.text.contains("secret"))

            let write = try await bob.call(
                .private, .recordsModify,
                RecordsModifyRequest(zoneID: alicesZone, operations: [.init(.forceDelete, Record(recordName: "N-1"))]))
            #expect(write.status == 403)
            let changes = try await bob.call(.private, .changesZone, ZoneChangesRequest(zones: [.init(zoneID: alicesZone)]))
            #expect(changes.status == 403)
            let zones = try await bob.call(.private, .zonesModify, ZonesModifyRequest(operations: [.init(.delete, alicesZone)]))
            #expect(zones.status == 403)

            let bobsOwn = try await bob.call(
                .private, .recordsLookup, RecordsLookupRequest(zoneID: ZoneID(zoneName: "Notes"), recordNames: ["N-1"]))
            #expect(bobsOwn.status == 404, "bob's own database has no Notes zone")
            let stillThere = try await alice.lookup(["N-1"])
            #expect(stillThere.first?.value?.fields["title"] == "alice's secret")
        }
    }

    @Test(arguments: Backend.all)
    func usersCaller_namesTheUser(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            let answer = try await client.send(.GET, client.path(.public, .usersCaller))
            let caller = try answer.decode(CallerResponse.self)
            #expect(caller.userRecordName == "_alice")
            #expect(caller.users.map(\.userRecordName) == ["_alice"])
        }
    }

    @Test(arguments: Backend.all)
    func serverToServer_signedRequestReachesPublicDatabaseOnly(_ backend: Backend) async throws {
        let key = P256.Signing.PrivateKey()
        let clock = ManualClock()
        try await withServer(backend, serverKeys: ["key-1": key.publicKey.pemRepresentation], clock: clock) {
            _, client in
            let signer = Signer(key: key, keyID: "key-1", client: client.asUser(nil))
            let body = try WireCoding.encode(
                RecordsModifyRequest(operations: [.init(.create, note("P-1", title: "from the server"))]))
            let path = client.path(.public, .recordsModify)

            let signed = try await signer.send(path, body: body, date: clock.now)
            #expect(signed.status == 200, "\(signed.text)")
            let record = try signed.decode(RecordsResponse.self).records.first?.value
            #expect(record?.created?.userRecordName == "_serverKey_key-1")

            let privatePath = client.path(.private, .zonesList)
            let toPrivate = try await signer.send(privatePath, body: Data(), date: clock.now, method: .GET)
            #expect(toPrivate.status == 403, "server keys reach the public database only")
        }
    }

    @Test(arguments: Backend.all)
    func serverToServer_badSignaturesAre401(_ backend: Backend) async throws {
        let key = P256.Signing.PrivateKey()
        let stranger = P256.Signing.PrivateKey()
        let clock = ManualClock()
        try await withServer(backend, serverKeys: ["key-1": key.publicKey.pemRepresentation], clock: clock) {
            _, client in
            let anonymous = client.asUser(nil)
            let path = client.path(.public, .recordsQuery)
            let body = try WireCoding.encode(RecordsQueryRequest(query: .init(recordType: "Note")))
            let good = Signer(key: key, keyID: "key-1", client: anonymous)
            #expect(try await good.send(path, body: body, date: clock.now).status == 200)

            let unsigned = try await anonymous.send(.POST, path, body: body, headers: [(WireHeader.keyID, "key-1")])
            #expect(unsigned.status == 401, "a key ID without date and signature is refused")

            let wrongKey = Signer(key: stranger, keyID: "key-1", client: anonymous)
            #expect(try await wrongKey.send(path, body: body, date: clock.now).status == 401)

            let unknownKey = Signer(key: key, keyID: "key-2", client: anonymous)
            #expect(try await unknownKey.send(path, body: body, date: clock.now).status == 401)

            let altered = try await good.send(path, body: body, date: clock.now, sendBody: body + Data(" ".utf8))
            #expect(altered.status == 401, "the body is covered by the signature")

            let stale = try await good.send(path, body: body, date: clock.now.addingTimeInterval(-601))
            #expect(stale.status == 401, "a request older than 10 minutes is refused")
            let early = try await good.send(path, body: body, date: clock.now.addingTimeInterval(601))
            #expect(early.status == 401)
            let inWindow = try await good.send(path, body: body, date: clock.now.addingTimeInterval(-590))
            #expect(inWindow.status == 200)

            let otherPath = try await good.send(
                path, body: body, date: clock.now, signedPath: client.path(.public, .recordsLookup))
            #expect(otherPath.status == 401, "the path is covered by the signature")
            #expect(otherPath.error?.serverErrorCode == .authenticationFailed)
        }
    }

    /// MistKit signs a request without a body with an empty hash, not the hash of no bytes.
    @Test(arguments: Backend.all)
    func serverToServer_requestWithoutBodyVerifiesWithEitherEmptyHash(_ backend: Backend) async throws {
        let key = P256.Signing.PrivateKey()
        let clock = ManualClock()
        try await withServer(backend, serverKeys: ["key-1": key.publicKey.pemRepresentation], clock: clock) {
            _, client in
            let signer = Signer(key: key, keyID: "key-1", client: client.asUser(nil))
            let list = client.path(.public, .zonesList)
            let hashed = try await signer.send(list, body: Data(), date: clock.now, method: .GET)
            #expect(hashed.status == 200, "\(hashed.text)")
            let empty = try await signer.send(list, body: Data(), date: clock.now, method: .GET, bodyHash: "")
            #expect(empty.status == 200, "\(empty.text)")
            #expect(try empty.decode(ZonesResponse.self).zones.count == 1, "the public default zone")

            let query = client.path(.public, .recordsQuery)
            let body = try WireCoding.encode(RecordsQueryRequest(query: .init(recordType: "Note")))
            let unhashed = try await signer.send(query, body: body, date: clock.now, bodyHash: "")
            #expect(unhashed.status == 401, "a request with a body must sign its hash")
        }
    }

    /// CloudKit JS appends `?ckjsBuildVersion=…&ckjsVersion=…` and signs the subpath it sends, query
    /// included; MistKit signs the path alone. Both verify; a signature over another query does not.
    @Test(arguments: Backend.all)
    func serverToServer_signedSubpathMayCarryTheQueryAsSent(_ backend: Backend) async throws {
        let key = P256.Signing.PrivateKey()
        let clock = ManualClock()
        try await withServer(backend, serverKeys: ["key-1": key.publicKey.pemRepresentation], clock: clock) {
            _, client in
            let signer = Signer(key: key, keyID: "key-1", client: client.asUser(nil))
            let query = "ckjsBuildVersion=2310ProjectDev27&ckjsVersion=2.6.4"
            let save = client.path(.public, .recordsModify) + "?" + query
            let body = try WireCoding.encode(
                RecordsModifyRequest(operations: [.init(.create, note("signed-1"))]))
            let post = try await signer.send(save, body: body, date: clock.now)
            #expect(post.status == 200, "POST signed over path and query: \(post.text)")
            #expect(try post.decode(RecordsResponse.self).records.first?.value?.recordName == "signed-1")

            let list = client.path(.public, .zonesList) + "?" + query
            let get = try await signer.send(list, body: Data(), date: clock.now, method: .GET)
            #expect(get.status == 200, "GET signed over path and query: \(get.text)")
            let pathOnly = try await signer.send(
                list, body: Data(), date: clock.now, method: .GET, signedPath: client.path(.public, .zonesList))
            #expect(pathOnly.status == 200, "a signature over the path alone still verifies: \(pathOnly.text)")

            let otherQuery = try await signer.send(
                list, body: Data(), date: clock.now, method: .GET,
                signedPath: client.path(.public, .zonesList) + "?ckjsBuildVersion=other&ckjsVersion=2.6.4")
            #expect(otherQuery.status == 401, "the query is covered when the signature names one")
            #expect(otherQuery.error?.serverErrorCode == .authenticationFailed)
        }
    }
}

/// Signs requests the way CloudKit's server-to-server keys do.
struct Signer {
    var key: P256.Signing.PrivateKey
    var keyID: String
    var client: CloudClient

    func send(
        _ path: String, body: Data, date: Date, method: HTTPMethod = .POST, sendBody: Data? = nil,
        signedPath: String? = nil, bodyHash: String? = nil
    ) async throws -> Answer {
        let dateText = ServerToServerSignature.dateString(date)
        let hash = bodyHash ?? Data(SHA256.hash(data: body)).base64EncodedString()
        let message = ServerToServerSignature.message(date: dateText, bodySHA256Base64: hash, path: signedPath ?? path)
        let signature = try key.signature(for: Data(message.utf8)).derRepresentation.base64EncodedString()
        return try await client.send(
            method, path, body: method == .GET ? nil : (sendBody ?? body),
            headers: [(WireHeader.keyID, keyID), (WireHeader.date, dateText), (WireHeader.signature, signature)])
    }
}
