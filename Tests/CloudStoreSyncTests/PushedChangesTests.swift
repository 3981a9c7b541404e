import CloudStoreWire
import Testing

@testable import CloudStoreSync

/// ``PushedChanges``: which zone tokens a long poll names, and which pages of its answer a fetch
/// may apply. The engine's use of it is in `SyncEngineMechanicsTests`.
@Suite struct PushedChangesTests {
    let notes = ZoneID(zoneName: "Notes")
    let photos = ZoneID(zoneName: "Photos")

    func storage(_ tokens: [ZoneID: String], fetchingFromScratch: Set<ZoneID> = []) -> SyncEngine.State.Storage {
        var storage = SyncEngine.State.Storage(SyncEngine.State.Serialization())
        storage.zoneTokens = tokens
        storage.zonesFetchingFromScratch = fetchingFromScratch
        return storage
    }

    @Test func zoneTokens_leaveOutZonesFetchedFromScratchAndTakeTheExpectedOnes() {
        let held = storage([notes: "n1", photos: "p1"], fetchingFromScratch: [photos])
        #expect(PushedChanges.zoneTokens(in: held) == [notes: "n1"])
        #expect(PushedChanges.zoneTokens(in: held, expecting: [notes: "n2"]) == [notes: "n2"])
        #expect(PushedChanges.zoneTokens(in: held, expecting: [ZoneID(zoneName: "New"): "x"]).count == 2)
    }

    @Test func zoneTokens_areAtMostTheMostAPollNames() {
        let many = Dictionary(uniqueKeysWithValues: (0..<30).map { (ZoneID(zoneName: String(format: "Z%02d", $0)), "t\($0)") })
        let named = PushedChanges.zoneTokens(in: storage(many))
        #expect(named.count == NotificationsResponse.maxZoneTokens)
        #expect(named[ZoneID(zoneName: "Z00")] == "t0", "in zone order: the choice is stable")
        #expect(named[ZoneID(zoneName: "Z29")] == nil)
    }

    @Test func expectedZoneTokens_areTheChangedZonesTokensOfTheDatabasePage() {
        let owned = ZoneID(zoneName: "Notes", ownerRecordName: "_u1")
        let response = NotificationsResponse(
            changed: true, syncToken: "db2", zones: [],
            databaseChanges: DatabaseChangesResponse(
                syncToken: "db2", moreComing: false,
                zones: [Zone(zoneID: owned, syncToken: "n2"), Zone(zoneID: photos, deleted: true, reason: .deleted)]))
        let expected = PushedChanges.expectedZoneTokens(after: response) { $0.ownerRecordName == "_u1" ? $0.withoutOwner : $0 }
        #expect(expected == [notes: "n2"], "named as the state names zones; a deleted zone expects nothing")
    }

    @Test func pages_applyOnlyAtTheTokensTheyWereAskedFrom() {
        let page = ZoneChanges(zoneID: notes, syncToken: "n2", moreComing: false, records: [])
        let other = ZoneChanges(zoneID: ZoneID(zoneName: "Unasked"), syncToken: "u2", moreComing: false, records: [])
        let database = DatabaseChangesResponse(syncToken: "db2", moreComing: false, zones: [])
        let response = NotificationsResponse(
            changed: true, syncToken: "db2", zones: [], databaseChanges: database, zoneChanges: [page, other])
        let pushed = PushedChanges(response, since: "db1", zoneTokens: [notes: "n1"]) { $0 }

        #expect(pushed.databaseChanges(at: "db1") == database)
        #expect(pushed.databaseChanges(at: "db0") == nil)
        #expect(pushed.databaseChanges(at: nil) == nil, "a state without a token fetches from scratch")
        #expect(pushed.zoneChanges(of: notes, at: "n1") == page)
        #expect(pushed.zoneChanges(of: notes, at: "n0") == nil)
        #expect(pushed.zoneChanges(of: notes, at: nil) == nil)
        #expect(pushed.zoneChanges(of: ZoneID(zoneName: "Unasked"), at: "u1") == nil, "a page for a zone the poll did not name")
    }
}
