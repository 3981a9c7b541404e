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
