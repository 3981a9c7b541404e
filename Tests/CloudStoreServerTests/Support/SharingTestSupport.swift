import CloudStoreServer
import CloudStoreTesting
import CloudStoreWire
import Foundation
import Testing

/// Users of the sharing tests: alice owns, the others take part.
let sharingUsers = [
    "alice-token": "_alice", "bob-token": "_bob", "carol-token": "_carol", "dave-token": "_dave", "erin-token": "_erin",
]

/// A share record for `records/modify`: the zone-wide share with a title, inviting users by record name.
func shareRecord(
    _ participants: [(String, SharePermission)]? = nil, publicPermission: SharePermission? = nil, tag: String? = nil,
    title: String = "Weekly shopping"
) -> Record {
    var record = Record(
        recordName: ShareMetadata.zoneShareRecordName, recordType: "cloudKit.share", recordChangeTag: tag,
        fields: ["title": .string(title)])
    record.share = ShareMetadata(
        publicPermission: publicPermission, participants: participants?.map { .invite($0.0, permission: $0.1) })
    return record
}

extension CloudClient {
    /// records/modify in a zone named with its owner.
    func modify(
        _ zoneID: ZoneID, _ operations: [RecordsModifyRequest.Operation], atomic: Bool? = nil,
        in database: DatabaseScope
    ) async throws -> Answer {
        try await call(database, .recordsModify, RecordsModifyRequest(zoneID: zoneID, atomic: atomic, operations: operations))
    }

    /// Creates or updates the share of one of the caller's private zones; expects success.
    @discardableResult
    func share(
        _ zone: String, _ participants: [(String, SharePermission)]? = nil, publicPermission: SharePermission? = nil,
        _ type: RecordsModifyRequest.OperationType = .create, tag: String? = nil
    ) async throws -> Record {
        let answer = try await modify(
            ZoneID(zoneName: zone), [.init(type, shareRecord(participants, publicPermission: publicPermission, tag: tag))],
            in: .private)
        try #require(answer.status == 200, "share \(zone): \(answer.text)")
        return try #require(try answer.decode(RecordsResponse.self).records.first?.value, "share \(zone): \(answer.text)")
    }

    func accept(_ shortGUIDs: [String], resolveOnly: Bool = false) async throws -> [ShareAcceptResponse.Result] {
        let answer = try await call(.public, resolveOnly ? .recordsResolve : .recordsAccept, ShareAcceptRequest(shortGUIDs: shortGUIDs))
        try #require(answer.status == 200, "\(resolveOnly ? "resolve" : "accept"): \(answer.text)")
        return try answer.decode(ShareAcceptResponse.self).results
    }

    func sharedZoneIDs() async throws -> [ZoneID] {
        let answer = try await send(.GET, path(.shared, .zonesList))
        try #require(answer.status == 200, "shared zones/list: \(answer.text)")
        return try answer.decode(ZonesResponse.self).zones.compactMap(\.value?.zoneID)
    }

    func sharedDatabaseChanges(token: String?, limit: Int? = nil) async throws -> DatabaseChangesResponse {
        let answer = try await call(.shared, .changesDatabase, DatabaseChangesRequest(syncToken: token, resultsLimit: limit))
        try #require(answer.status == 200, "shared changes/database: \(answer.text)")
        return try answer.decode(DatabaseChangesResponse.self)
    }

    func zoneChanges(_ zoneID: ZoneID, token: String? = nil, in database: DatabaseScope) async throws -> Answer {
        try await call(database, .changesZone, ZoneChangesRequest(zones: [.init(zoneID: zoneID, syncToken: token)]))
    }

    func lookup(_ zoneID: ZoneID, _ names: [String], in database: DatabaseScope) async throws -> Answer {
        try await call(database, .recordsLookup, RecordsLookupRequest(zoneID: zoneID, recordNames: names))
    }
}
