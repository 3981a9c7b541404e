import CloudStoreServer
import CloudStoreTesting
import CloudStoreWire
import Foundation
import Testing

@Suite("zones/modify, zones/list, zones/lookup")
struct ServerZonesTests {
    @Test(arguments: Backend.all)
    func zones_createListLookupDelete(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            let created = try await client.createZone("Notes")
            #expect(created.zoneID == ZoneID(zoneName: "Notes", ownerRecordName: "_alice"))
            #expect(created.syncToken != nil)

            let again = try await client.createZone("Notes")
            #expect(again.zoneID == created.zoneID, "creating an existing zone succeeds")

            let list = try await client.call(.private, .zonesList, ZonesLookupRequest(zones: []))
            let names = try list.decode(ZonesResponse.self).zones.compactMap { $0.value?.zoneID.zoneName }
            #expect(names == ["_defaultZone", "Notes"])

            let lookup = try await client.call(
                .private, .zonesLookup,
                ZonesLookupRequest(zones: [ZoneID(zoneName: "Notes"), ZoneID(zoneName: "Missing")]))
            let zones = try lookup.decode(ZonesResponse.self).zones
            #expect(zones.first?.value?.zoneID.zoneName == "Notes")
            #expect(zones.last?.error?.serverErrorCode == .zoneNotFound)

            let deleted = try await client.call(
                .private, .zonesModify, ZonesModifyRequest(operations: [.init(.delete, ZoneID(zoneName: "Notes"))]))
            #expect(try deleted.decode(ZonesResponse.self).zones.first?.value?.isDeleted == true)
            let after = try await client.send(.GET, client.path(.private, .zonesList))
            #expect(try after.decode(ZonesResponse.self).zones.compactMap { $0.value?.zoneID.zoneName } == ["_defaultZone"])
        }
    }

    @Test(arguments: Backend.all)
    func zones_deletingMissingZoneIsZoneNotFoundAndDefaultZoneStays(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            let answer = try await client.call(
                .private, .zonesModify,
                ZonesModifyRequest(operations: [
                    .init(.delete, ZoneID(zoneName: "Nope")), .init(.delete, ZoneID(zoneName: "_defaultZone")),
                ]))
            #expect(answer.status == 200)
            let zones = try answer.decode(ZonesResponse.self).zones
            #expect(zones.map(\.error?.serverErrorCode) == [.zoneNotFound, .badRequest])
        }
    }

    @Test(arguments: Backend.all)
    func zones_customZoneInPublicDatabaseIsBadRequest(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            let answer = try await client.call(
                .public, .zonesModify, ZonesModifyRequest(operations: [.init(.create, ZoneID(zoneName: "Mine"))]))
            #expect(answer.status == 400)
            #expect(answer.error?.serverErrorCode == .badRequest)
            let list = try await client.send(.GET, client.path(.public, .zonesList))
            #expect(try list.decode(ZonesResponse.self).zones.compactMap { $0.value?.zoneID.zoneName } == ["_defaultZone"])
        }
    }

    @Test(arguments: Backend.all)
    func zones_deletedZoneLosesItsRecordsAndRecreatedZoneIsEmpty(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            try await client.createZone("Notes")
            let saved = try await client.save([note("N-1")])
            _ = try await client.call(
                .private, .zonesModify, ZonesModifyRequest(operations: [.init(.delete, ZoneID(zoneName: "Notes"))]))
            let gone = try await client.call(
                .private, .recordsLookup, RecordsLookupRequest(zoneID: ZoneID(zoneName: "Notes"), recordNames: ["N-1"]))
            #expect(gone.status == 404)
            #expect(gone.error?.serverErrorCode == .zoneNotFound)

            try await client.createZone("Notes")
            let lookup = try await client.lookup(["N-1"])
            #expect(lookup.first?.code == .notFound)
            let resaved = try await client.save([note("N-1")])
            #expect(resaved[0].recordChangeTag != saved[0].recordChangeTag, "a change tag never repeats in a zone")
        }
    }
}

@Suite("shared database and servers without users")
struct ServerDatabasesTests {
    @Test(arguments: Backend.all)
    func sharedDatabase_withoutSharesIsEmptyAndNeverCreatesZones(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            let list = try await client.send(.GET, client.path(.shared, .zonesList))
            #expect(try list.decode(ZonesResponse.self).zones.isEmpty)
            let create = try await client.call(
                .shared, .zonesModify, ZonesModifyRequest(operations: [.init(.create, ZoneID(zoneName: "Mine"))]))
            #expect(create.status == 400)
            let save = try await client.call(
                .shared, .recordsModify, RecordsModifyRequest(operations: [.init(.create, note("S-1"))]))
            #expect(save.status == 403, "a zone of the shared database names another owner who shared it: \(save.text)")
            #expect(save.error?.serverErrorCode == .accessDenied)
        }
    }

    @Test(arguments: Backend.all)
    func withoutUsers_privateDatabasesRefuseEveryone(_ backend: Backend) async throws {
        try await withServer(backend, users: [:]) { _, client in
            let withToken = try await client.send(.GET, client.path(.private, .zonesList))
            #expect(withToken.status == 401)
            let anonymous = client.asUser(nil)
            #expect(try await anonymous.send(.GET, client.path(.private, .zonesList)).status == 421)
            #expect(try await anonymous.send(.GET, client.path(.public, .zonesList)).status == 421)
        }
    }

    @Test func users_withInvalidNamesAreAConfigurationError() async throws {
        await #expect(throws: ServerConfigurationError.self) {
            _ = try await TestServer.start(users: ["token": ""])
        }
    }
}
