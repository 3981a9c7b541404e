import CloudStoreWire
import Foundation
import Hummingbird

/// `changes/database` and `changes/zone`, and their older forms `zones/changes` and
/// `records/changes` that CloudKit Web Services clients still call (the same answers, shaped as
/// Apple's reference gives them).
///
/// A zone's changes since a token are the rows written after the token's sequence, in sequence
/// order, so a record changed several times appears once, in its latest state, and a deleted one as
/// a tombstone. Token problems answer for the whole request, with the zone named: a malformed token
/// or one of another zone 400 `BAD_REQUEST`, a token older than purged tombstones (or of a deleted
/// and recreated zone) 410 `CHANGE_TOKEN_EXPIRED`. A zone that does not exist is a per-zone
/// `ZONE_NOT_FOUND` item.
///
/// The shared database (WireProtocol.md §6): `changes/database` lists the zones whose shares the
/// caller accepted, with their owners, by the caller's own sequence of that database (raised in
/// the transaction of every change to such a zone), and once a zone whose access ended, as
/// `{"zoneID", "deleted": true, "reason": "unshared"}`. `changes/zone` reads the owner's zone with
/// the owner's tokens; a zone the caller may not use is a per-zone `ACCESS_DENIED` item.
struct ChangesController: Sendable {
    let services: CloudServices

    func register(on group: RouterGroup<CloudRequestContext>) {
        group.post(":database/changes/database", use: databaseChanges)
        group.post(":database/changes/zone", use: zoneChanges)
        group.post(":database/records/changes", use: recordChanges)
        group.post(":database/zones/changes", use: zonesChanges)
    }

    @Sendable func databaseChanges(_ request: Request, context: CloudRequestContext) async throws -> Response {
        let body = try context.authenticated.decode(DatabaseChangesRequest.self)
        return try JSONResponse.make(try await changedZones(since: body.syncToken, limit: body.resultsLimit, context: context))
    }

    /// `zones/changes`: `changes/database` under the older name, its token also as `metaSyncToken`.
    @Sendable func zonesChanges(_ request: Request, context: CloudRequestContext) async throws -> Response {
        let body = try context.authenticated.decode(ZonesChangesRequest.self)
        return try JSONResponse.make(
            ZonesChangesResponse(try await changedZones(since: body.syncToken, limit: body.resultsLimit, context: context)))
    }

    @Sendable func zoneChanges(_ request: Request, context: CloudRequestContext) async throws -> Response {
        let call = context.authenticated
        let body = try call.decode(ZoneChangesRequest.self)
        try services.limits.checkOperationCount(body.zones.count, of: "zones")
        let partition = try call.partition()
        var results: [ZoneChangesResult] = []
        var recordLists: [[[UInt8]]] = []
        for item in body.zones {
            switch try await changes(of: item, defaults: body, in: partition, context: context) {
            case .success(let page):
                recordLists.append(page.records)
                results.append(.value(page.changes))
            case .failure(let failure):
                results.append(.error(failure.error))
            }
        }
        return try JSONResponse.make(
            ZoneChangesResponse(zones: results), records: recordLists, numbersAsStrings: body.numbersAsStrings ?? false)
    }

    /// `records/changes`: one zone's page of `changes/zone`, unwrapped; a zone problem answers for
    /// the request.
    @Sendable func recordChanges(_ request: Request, context: CloudRequestContext) async throws -> Response {
        let call = context.authenticated
        let body = try call.decode(RecordChangesRequest.self)
        var defaults = ZoneChangesRequest(zones: [])
        defaults.numbersAsStrings = body.numbersAsStrings
        let page = try await changes(of: body.zone, defaults: defaults, in: try call.partition(), context: context).get()
        return try JSONResponse.make(page.changes, records: [page.records], numbersAsStrings: body.numbersAsStrings ?? false)
    }

    /// One page of the partition's changed zones after a database token.
    private func changedZones(
        since syncToken: String?, limit requested: Int?, context: CloudRequestContext
    ) async throws -> DatabaseChangesResponse {
        let limit = try services.limits.pageSize(requested)
        let partition = try context.authenticated.partition()
        let since = try syncToken.map { text throws(APIError) in try Self.databaseSeq(text, partition) } ?? 0
        let page = try await services.storage.databaseChanges(in: partition, after: since, limit: limit)
        try Self.checkNotAhead(since, of: page.dbSeq)
        let response = Self.databaseChanges(page, after: since, limit: limit, in: partition)
        context.logger.info(
            "database changes",
            metadata: ["database": "\(partition)", "count": "\(response.zones.count)", "token": "\(response.syncToken)"])
        return response
    }

    /// The `changes/database` answer for a token at `since`, from a page of up to `limit + 1`
    /// zones read after it (the long poll answers with it too).
    static func databaseChanges(
        _ page: DatabaseChangesPage, after since: Int64, limit: Int, in partition: DatabasePartition
    ) -> DatabaseChangesResponse {
        let moreComing = page.zones.count > limit
        let zones = Array(page.zones.prefix(limit))
        let seq = moreComing ? zones.last?.dbSeq ?? since : page.dbSeq
        return DatabaseChangesResponse(
            syncToken: SyncToken.database(partition, seq: seq).encoded, moreComing: moreComing,
            zones: zones.map { zone in
                let address = partition.address(of: zone)
                return zone.deleted
                    ? Zone(zoneID: address.zoneID, deleted: true, reason: partition.scope == .shared ? .unshared : .deleted)
                    : Zone(zoneID: address.zoneID, syncToken: SyncToken.zone(address, zone, seq: zone.seq).encoded)
            })
    }

    /// A zone's page of changes: the page with its records written apart (``RecordWriter``), or
    /// the per-zone error. Token problems throw: they answer for the whole request.
    func changes(
        of item: ZoneChangesRequest.Zone, defaults body: ZoneChangesRequest, in partition: DatabasePartition,
        context: CloudRequestContext
    ) async throws -> Result<(changes: ZoneChanges, records: [[UInt8]]), APIError> {
        let call = context.authenticated
        let zone: ZoneAddress
        if partition.scope == .shared {
            switch try await services.sharedTarget(item.zoneID, of: call, in: partition) {
            case .success(let target): zone = target.zone
            case .failure(let error): return .failure(APIError(error))
            }
        } else {
            zone = try call.zone(item.zoneID, in: partition)
        }
        let limit = try services.limits.pageSize(item.resultsLimit ?? body.resultsLimit)
        let token = try item.syncToken.map { text throws(APIError) in try SyncToken.decode(text, of: zone) }
        let recordTypes = item.desiredRecordTypes ?? body.desiredRecordTypes
        // A filter: a type no record has matches nothing, but text no storage can hold is refused.
        if let bad = recordTypes?.first(where: { $0.unicodeScalars.contains { $0.properties.generalCategory == .control } }) {
            throw APIError(
                .badRequest, "desired record type \"\(bad.prefix(64))\" has a control character: name record types with printable characters",
                zoneID: zone.zoneID)
        }
        let reachable = zone.partition.scope == .private || (zone.partition.scope == .public && zone.isDefaultZone)
        guard reachable,
            let page = try await services.storage.zoneChanges(
                in: zone, after: token?.seq ?? 0, limit: limit, recordTypes: recordTypes,
                purgingTombstonesBefore: services.clock.now().addingTimeInterval(-services.limits.tombstoneHorizon))
        else {
            return .failure(APIError(services.zoneNotFoundItem(zone)))
        }
        if let token { try check(token, against: page.zone, zone) }
        let moreComing = page.records.count > limit
        let rows = page.records.prefix(limit)
        services.metrics.served(rows.count)
        let seq = moreComing ? rows.last?.seq ?? 0 : page.zone.seq
        let desiredKeys = item.desiredKeys ?? body.desiredKeys
        context.logger.info(
            "zone changes", metadata: ["zone": "\(zone)", "count": "\(rows.count)", "token": "\(seq)"])
        let writer = try RecordWriter(
            zone: zone, numbersAsStrings: body.numbersAsStrings ?? false,
            share: try await services.share(for: rows, in: zone), caller: call.caller.userRecordName,
            assetURLs: call.assetURLs)
        return .success(
            (
                ZoneChanges(
                    zoneID: zone.zoneID, syncToken: SyncToken.zone(zone, page.zone, seq: seq).encoded,
                    moreComing: moreComing, records: []),
                try rows.map { try writer.json($0, desiredKeys: desiredKeys) }
            ))
    }

    /// A database token's sequence, once it is known to be this partition's.
    static func databaseSeq(_ text: String, _ partition: DatabasePartition) throws(APIError) -> Int64 {
        let token = try SyncToken.decode(text, as: .database)
        try token.checkBelongs(to: partition)
        return token.seq
    }

    /// A token past the server's sequence comes from data the server no longer has (a restored
    /// backup, say): the client must start over.
    static func checkNotAhead(_ seq: Int64, of current: Int64, zone: ZoneID? = nil) throws(APIError) {
        guard seq <= current else {
            throw APIError(
                .changeTokenExpired, "the sync token is ahead of the server's data: drop it and fetch from scratch",
                zoneID: zone)
        }
    }

    private func check(_ token: SyncToken, against stored: StoredZone, _ zone: ZoneAddress) throws(APIError) {
        guard token.incarnation == stored.incarnation else {
            throw APIError(
                .changeTokenExpired,
                "zone \(zone.zoneName) was deleted and created again since this token: drop it and fetch the zone from scratch",
                zoneID: zone.zoneID)
        }
        guard token.seq >= stored.purgedThrough else {
            throw APIError(
                .changeTokenExpired,
                "the sync token of zone \(zone.zoneName) is older than the tombstone horizon: drop it and fetch the zone from scratch",
                zoneID: zone.zoneID)
        }
        try Self.checkNotAhead(token.seq, of: stored.seq, zone: zone.zoneID)
    }
}
