import CloudStoreServer
import CloudStoreTesting
import CloudStoreWire
import Foundation
import Testing

@Suite("changes/zone and changes/database")
struct ServerChangesTests {
    @Test(arguments: Backend.all)
    func paging_thousandChangesAtFiftyPerPageReturnsEachRecordOnce(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            try await client.createZone("Notes")
            for batch in stride(from: 0, to: 1000, by: 200) {
                try await client.save((batch..<batch + 200).map { note("N-\($0)") })
            }
            // Rewrite some, so the feed has records changed several times.
            try await client.save((0..<100).map { note("N-\($0)", title: "again") }, .forceUpdate)

            let (records, token, pages) = try await client.allZoneChanges(limit: 50)
            #expect(records.count == 1000)
            #expect(Set(records.map(\.recordName)).count == 1000, "each record once")
            #expect(pages >= 20)
            #expect(records.filter { $0.fields["title"] == "again" }.count == 100, "in its latest state")

            let caughtUp = try await client.zoneChanges(token: token)
            let page = try #require(try caughtUp.decode(ZoneChangesResponse.self).zones.first)
            guard case .value(let changes) = page else { Issue.record("expected changes"); return }
            #expect(changes.records.isEmpty)
            #expect(changes.syncToken == token, "a caught-up token answers the same token")
            #expect(changes.moreComing == false)
        }
    }

    @Test(arguments: Backend.all)
    func tombstones_deletedRecordAppearsOnceAsTombstoneWithType(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            try await client.createZone("Notes")
            let saved = try await client.save([note("N-1"), note("N-2")])
            let start = try await client.allZoneChanges()
            _ = try await client.modify([.init(.delete, Record(recordName: "N-1", recordChangeTag: saved[0].recordChangeTag))])
            try await client.save([note("N-2", title: "edited")], .forceUpdate)

            let changes = try await client.allZoneChanges(token: start.token)
            #expect(changes.records.count == 2)
            let tombstone = try #require(changes.records.first { $0.recordName == "N-1" })
            #expect(tombstone.deleted)
            #expect(tombstone.recordType == "Note")
            #expect(tombstone.recordChangeTag != nil)
            #expect(tombstone.fields.isEmpty)
            #expect(changes.records.first { $0.recordName == "N-2" }?.fields["title"] == "edited")
        }
    }

    @Test(arguments: Backend.all)
    func tokens_malformedIsBadRequestAndForeignZoneTokenIsRefused(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            try await client.createZone("Notes")
            try await client.createZone("Other")
            for garbage in ["garbage!!", "AAAA", "", String(repeating: "Z", count: 500)] {
                let answer = try await client.zoneChanges(token: garbage)
                #expect(answer.status == 400, "token \(garbage.prefix(10))")
                #expect(answer.error?.serverErrorCode == .badRequest)
            }
            let other = try await client.allZoneChanges("Other")
            let foreign = try await client.zoneChanges(token: other.token)
            #expect(foreign.status == 400)
            #expect(foreign.error?.zoneID?.zoneName == "Notes")

            let database = try await client.databaseChanges(token: nil)
            let crossed = try await client.zoneChanges(token: database.syncToken)
            #expect(crossed.status == 400, "database and zone tokens are different namespaces")

            let bob = client.asUser("bob-token")
            try await bob.createZone("Notes")
            let bobs = try await bob.allZoneChanges()
            let stolen = try await client.zoneChanges(token: bobs.token)
            #expect(stolen.status == 400, "a token of another user's zone is refused")
        }
    }

    @Test(arguments: Backend.all)
    func tokens_olderThanPurgedTombstonesExpire(_ backend: Backend) async throws {
        let clock = ManualClock()
        try await withServer(backend, limits: ServerLimits(tombstoneHorizon: 30 * 24 * 3600), clock: clock) { _, client in
            try await client.createZone("Notes")
            try await client.save([note("N-1"), note("N-2")])
            let old = try await client.allZoneChanges()
            _ = try await client.modify([.init(.forceDelete, Record(recordName: "N-1"))])

            clock.advance(by: 29 * 24 * 3600)
            let stillFresh = try await client.allZoneChanges(token: old.token)
            #expect(stillFresh.records.map(\.recordName) == ["N-1"], "within the horizon the tombstone is served")

            clock.advance(by: 2 * 24 * 3600)
            let expired = try await client.zoneChanges(token: old.token)
            #expect(expired.status == 410)
            #expect(expired.error?.serverErrorCode == .changeTokenExpired)
            #expect(expired.error?.zoneID?.zoneName == "Notes")

            let fresh = try await client.allZoneChanges()
            #expect(fresh.records.map(\.recordName) == ["N-2"], "a fetch from scratch still works")
            let afterPurge = try await client.allZoneChanges(token: stillFresh.token)
            #expect(afterPurge.records.isEmpty, "a token past the purged tombstones stays valid")
        }
    }

    @Test(arguments: Backend.all)
    func tokens_ofDeletedAndRecreatedZoneExpire(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            try await client.createZone("Notes")
            try await client.save([note("N-1")])
            let old = try await client.allZoneChanges()
            _ = try await client.call(
                .private, .zonesModify, ZonesModifyRequest(operations: [.init(.delete, ZoneID(zoneName: "Notes"))]))
            let missing = try await client.zoneChanges(token: old.token)
            let item = try missing.decode(ZoneChangesResponse.self).zones.first
            guard case .error(let error)? = item else { Issue.record("expected a zone error"); return }
            #expect(error.serverErrorCode == .zoneNotFound)

            try await client.createZone("Notes")
            let expired = try await client.zoneChanges(token: old.token)
            #expect(expired.status == 410)
        }
    }

    @Test(arguments: Backend.all)
    func database_listsChangedAndDeletedZonesWithPaging(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            let first = try await client.databaseChanges(token: nil)
            #expect(first.zones.isEmpty)
            for name in ["A", "B", "C"] { try await client.createZone(name) }
            try await client.save("B", [note("N-1")])
            _ = try await client.call(
                .private, .zonesModify, ZonesModifyRequest(operations: [.init(.delete, ZoneID(zoneName: "C"))]))

            var token = first.syncToken
            var seen: [Zone] = []
            var pages = 0
            while true {
                let page = try await client.databaseChanges(token: token, limit: 1)
                seen += page.zones
                token = page.syncToken
                pages += 1
                if !page.moreComing { break }
            }
            #expect(pages >= 3)
            #expect(Set(seen.map(\.zoneID.zoneName)) == ["A", "B", "C"])
            let c = try #require(seen.last { $0.zoneID.zoneName == "C" })
            #expect(c.isDeleted && c.reason == .deleted)
            #expect(seen.first { $0.zoneID.zoneName == "B" }?.syncToken != nil)

            let caughtUp = try await client.databaseChanges(token: token)
            #expect(caughtUp.zones.isEmpty && caughtUp.syncToken == token)

            try await client.save("A", [note("N-2")])
            let next = try await client.databaseChanges(token: token)
            #expect(next.zones.map(\.zoneID.zoneName) == ["A"], "a record change marks its zone changed")
        }
    }

    @Test(arguments: Backend.all)
    func changes_desiredRecordTypesAndKeysFilter(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            try await client.createZone("Notes")
            try await client.save([
                note("N-1", extra: ["body": "text"]), Record(recordName: "F-1", recordType: "Folder", fields: ["title": "f"]),
            ])
            var item = ZoneChangesRequest.Zone(zoneID: ZoneID(zoneName: "Notes"))
            item.desiredRecordTypes = ["Note"]
            item.desiredKeys = ["body"]
            let answer = try await client.call(.private, .changesZone, ZoneChangesRequest(zones: [item]))
            guard case .value(let page)? = try answer.decode(ZoneChangesResponse.self).zones.first else {
                Issue.record("expected changes"); return
            }
            #expect(page.records.map(\.recordName) == ["N-1"])
            #expect(page.records.first?.fields == ["body": "text"])
        }
    }
}
