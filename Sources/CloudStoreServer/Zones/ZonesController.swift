import CloudStoreWire
import Foundation
import Hummingbird

/// `zones/modify`, `zones/list` and `zones/lookup`.
///
/// Creating a zone that exists succeeds and changes nothing. Deleting a zone removes its records;
/// `changes/database` then reports it deleted, and its share stops. The default zone always exists
/// and cannot be deleted; the public database has only the default zone. The shared database's
/// zones are the zones whose shares the caller accepted (WireProtocol.md §6), named with their
/// owners: they are listed and looked up there (another zone is a per-zone `ACCESS_DENIED` item),
/// never created or deleted (400 for the request).
struct ZonesController: Sendable {
    let services: CloudServices

    func register(on group: RouterGroup<CloudRequestContext>) {
        group.post(":database/zones/modify", use: modify)
        group.get(":database/zones/list", use: list)
        group.post(":database/zones/list", use: list)
        group.post(":database/zones/lookup", use: lookup)
    }

    @Sendable func modify(_ request: Request, context: CloudRequestContext) async throws -> Response {
        let call = context.authenticated
        let body = try call.decode(ZonesModifyRequest.self)
        try services.limits.checkOperationCount(body.operations.count, of: "operations")
        let partition = try call.partition()
        guard partition.scope != .shared else {
            throw APIError(
                .badRequest,
                "zones of the shared database come from shares: a participant neither creates nor deletes them (leave a share by deleting its \(ShareMetadata.zoneShareRecordName))")
        }
        var seen = Set<String>()
        var results: [ZoneResult?] = []
        var changes: [(index: Int, change: ZoneChange)] = []
        for (index, operation) in body.operations.enumerated() {
            let zone = try call.zone(operation.zone.zoneID, in: partition)
            guard seen.insert(zone.zoneName).inserted else {
                throw APIError(.badRequest, "zone \(zone.zoneName) appears twice: name each zone once per request")
            }
            switch (operation.operationType, partition.scope) {
            case (.create, .public) where !zone.isDefaultZone:
                throw APIError(
                    .badRequest, "the public database has only the default zone; custom zones live in the private database",
                    zoneID: zone.zoneID)
            case (.delete, _) where zone.isDefaultZone:
                results.append(.error(ServerError(.badRequest, reason: "the default zone cannot be deleted", zoneID: zone.zoneID)))
                continue
            case (.create, _):
                changes.append((index, .create(zone.zoneName)))
            case (.delete, _):
                changes.append((index, .delete(zone.zoneName)))
            }
            results.append(nil)
        }
        let modification = try await services.storage.modifyZones(changes.map(\.change), in: partition)
        for ((index, change), zone) in zip(changes, modification.zones) {
            switch (change, zone) {
            case (.create(let name), let zone?):
                results[index] = .value(Zone(zoneID: partition.zoneID(name), syncToken: token(zone, name, partition)))
            case (.delete(let name), _?):
                results[index] = .value(Zone(zoneID: partition.zoneID(name), deleted: true))
            case (.delete(let name), nil):
                results[index] = .error(services.zoneNotFoundItem(partition.zone(name)))
            case (.create(let name), nil):
                results[index] = .error(ServerError(.internalError, zoneID: partition.zoneID(name)))
            }
        }
        if !changes.isEmpty { services.broker.publish(partition.key) }
        for user in modification.sharedDatabases { services.broker.publish(partition.sharedDatabase(of: user).key) }
        context.logger.info("zones modified", metadata: ["database": "\(partition)", "count": "\(changes.count)"])
        return try JSONResponse.make(ZonesResponse(zones: results.compactMap { $0 }))
    }

    @Sendable func list(_ request: Request, context: CloudRequestContext) async throws -> Response {
        let partition = try context.authenticated.partition()
        guard partition.scope != .shared else {
            let zones = try await services.storage.sharedZones(in: partition)
            return try JSONResponse.make(
                ZonesResponse(
                    zones: zones.map {
                        .value(Zone(zoneID: $0.zone.zoneID, syncToken: SyncToken.zone($0.zone, $0.stored, seq: $0.stored.seq).encoded))
                    }))
        }
        let zones = try await services.storage.zones(in: partition)
            .filter { partition.scope != .public || $0.name == ZoneID.defaultZoneName }
        return try JSONResponse.make(
            ZonesResponse(
                zones: zones.map { .value(Zone(zoneID: partition.zoneID($0.name), syncToken: token($0, $0.name, partition))) }))
    }

    @Sendable func lookup(_ request: Request, context: CloudRequestContext) async throws -> Response {
        let call = context.authenticated
        let body = try call.decode(ZonesLookupRequest.self)
        try services.limits.checkOperationCount(body.zones.count, of: "zones")
        let partition = try call.partition()
        guard partition.scope != .shared else {
            var results: [ZoneResult] = []
            for zoneID in body.zones {
                switch try await services.sharedTarget(zoneID, of: call, in: partition) {
                case .success(let target):
                    let stored = try await services.storage.zones(named: [target.zone.zoneName], in: target.zone.partition)
                    results.append(
                        stored[target.zone.zoneName].map {
                            .value(Zone(zoneID: target.zone.zoneID, syncToken: SyncToken.zone(target.zone, $0, seq: $0.seq).encoded))
                        } ?? .error(services.zoneNotFoundItem(target.zone)))
                case .failure(let error):
                    results.append(.error(error))
                }
            }
            return try JSONResponse.make(ZonesResponse(zones: results))
        }
        let addresses = try body.zones.map { zoneID throws(APIError) in try call.zone(zoneID, in: partition) }
        let found = try await services.storage.zones(named: addresses.map(\.zoneName), in: partition)
        let results = addresses.map { zone -> ZoneResult in
            guard let stored = found[zone.zoneName], partition.scope != .public || zone.isDefaultZone else {
                return .error(services.zoneNotFoundItem(zone))
            }
            return .value(Zone(zoneID: zone.zoneID, syncToken: token(stored, zone.zoneName, partition)))
        }
        return try JSONResponse.make(ZonesResponse(zones: results))
    }

    private func token(_ zone: StoredZone, _ name: String, _ partition: DatabasePartition) -> String {
        SyncToken.zone(partition.zone(name), zone, seq: zone.seq).encoded
    }
}
