import CloudStoreWire

/// What a long poll's answer carried for the next scheduled fetch: the `changes/database` page for
/// the database token the poll was asked from, and the first `changes/zone` page of each changed
/// zone whose token the poll named (WireProtocol.md §3, Push). A fetch applies a page only while
/// the state still holds the token it was asked from; anything else it asks the server for.
struct PushedChanges: Sendable {
    /// The database token the poll was asked from.
    var since: String
    var database: DatabaseChangesResponse?
    /// Per zone, as the state names it: the token the page was asked from, and the page.
    var zones: [ZoneID: (since: String, page: ZoneChanges)]

    /// The tokens a poll names, by zone: the zones whose token the state holds and that are not
    /// being fetched from scratch, at most `NotificationsResponse.maxZoneTokens`
    /// (in zone order, so the choice is stable). `expected` overrides the state's token of a zone:
    /// the token the state will hold once the fetch a poll just woke has run.
    static func zoneTokens(in storage: SyncEngine.State.Storage, expecting expected: [ZoneID: String] = [:]) -> [ZoneID: String] {
        let tokens = storage.zoneTokens.filter { !storage.zonesFetchingFromScratch.contains($0.key) }
            .merging(expected) { _, expected in expected }
        let zones = tokens.keys
            .sorted(by: SyncEngine.State.Storage.persistedOrder)
            .prefix(NotificationsResponse.maxZoneTokens)
        return Dictionary(uniqueKeysWithValues: zones.map { ($0, tokens[$0]!) })
    }

    /// The token of each changed zone the answer's database page lists: what a fetch of the zone
    /// brings the state to, when nothing changes meanwhile.
    static func expectedZoneTokens(after response: NotificationsResponse, normalize: (ZoneID) -> ZoneID) -> [ZoneID: String] {
        var expected: [ZoneID: String] = [:]
        for zone in response.databaseChanges?.zones ?? [] where !zone.isDeleted {
            if let token = zone.syncToken { expected[normalize(zone.zoneID)] = token }
        }
        return expected
    }

    /// What `response` carried for a poll asked from `since` naming `zoneTokens`; `normalize` names
    /// a zone of the answer as the state does.
    init(_ response: NotificationsResponse, since: String, zoneTokens: [ZoneID: String], normalize: (ZoneID) -> ZoneID) {
        self.since = since
        database = response.databaseChanges
        zones = [:]
        for page in response.zoneChanges ?? [] {
            let zoneID = normalize(page.zoneID)
            guard let token = zoneTokens[zoneID] else { continue }
            zones[zoneID] = (token, page)
        }
    }

    /// The database page, when the state's database token is the one the poll was asked from.
    func databaseChanges(at token: String?) -> DatabaseChangesResponse? {
        guard let token, token == since else { return nil }
        return database
    }

    /// The zone's first page, when the state's token of the zone is the one it was asked from.
    func zoneChanges(of zoneID: ZoneID, at token: String?) -> ZoneChanges? {
        guard let token, let pushed = zones[zoneID], pushed.since == token else { return nil }
        return pushed.page
    }
}
