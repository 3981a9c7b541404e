import CloudStoreWire
import Foundation
import Logging

/// What the controllers share: storage, the change broker, limits, the clock and the credentials.
struct CloudServices: Sendable {
    var storage: any ServerStorage
    var broker: ChangeBroker
    var limits: ServerLimits
    var clock: ServerClock
    /// The containers the server serves; any other answers 404.
    var containers: Set<String>
    var bearerTokens: BearerTokens
    var serverKeys: ServerKeys
    var rateLimiter: RateLimiter?
    var metrics: ServerMetrics
    var logger: Logger

    /// A stored row as the wire shows it: a record with its tag and zone, or a tombstone.
    func present(_ row: StoredRecord, in zone: ZoneAddress, desiredKeys: [String]? = nil) -> Record {
        guard let content = row.content else {
            return Record(
                recordName: row.name, recordType: row.type, recordChangeTag: row.changeTag, zoneID: zone.zoneID,
                deleted: true)
        }
        var fields = content.fields
        if let desiredKeys {
            let wanted = Set(desiredKeys)
            fields = fields.filter { wanted.contains($0.key) }
        }
        return Record(
            recordName: row.name, recordType: row.type, recordChangeTag: row.changeTag, zoneID: zone.zoneID,
            fields: fields, created: content.created, modified: content.modified, deleted: false)
    }

    /// 404 `ZONE_NOT_FOUND` for a zone a request names.
    func zoneNotFound(_ zone: ZoneAddress) -> APIError {
        APIError(
            .zoneNotFound, "zone \(zone.zoneName) does not exist: create it with zones/modify", zoneID: zone.zoneID)
    }

    /// The per-item form of ``zoneNotFound(_:)``.
    func zoneNotFoundItem(_ zone: ZoneAddress) -> ServerError {
        ServerError(
            .zoneNotFound, reason: "zone \(zone.zoneName) does not exist: create it with zones/modify",
            zoneID: zone.zoneID)
    }
}
