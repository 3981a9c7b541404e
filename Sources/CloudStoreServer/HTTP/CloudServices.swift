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
    /// Sees the size of every piece of asset bytes handed to or taken from the storage (tests
    /// check that transfers stream).
    var assetChunkObserver: (@Sendable (Int) -> Void)?

    /// 404 `ZONE_NOT_FOUND` for a zone a request names.
    func zoneNotFound(_ zone: ZoneAddress) -> APIError {
        APIError(
            .zoneNotFound, "zone \(zone.zoneName) does not exist: create it with zones/modify", zoneID: zone.zoneID)
    }

    /// Records live in zones of the private and public databases; the shared database has none
    /// here, and the public database has only its default zone.
    func checkZoneCanHoldRecords(_ zone: ZoneAddress) throws(APIError) {
        switch zone.partition.scope {
        case .shared: throw zoneNotFound(zone)
        case .public where !zone.isDefaultZone: throw zoneNotFound(zone)
        default: break
        }
    }

    /// Removes the assets due for removal now, counting and logging what went.
    @discardableResult
    func sweepAssets() async throws -> AssetSweep {
        let sweep = try await storage.sweepAssets(containers: containers, now: clock.now())
        metrics.removedAssets(sweep)
        if sweep.assets > 0 {
            logger.info("assets removed", metadata: ["count": "\(sweep.assets)", "bytes": "\(sweep.bytes)"])
        }
        return sweep
    }

    /// The per-item form of ``zoneNotFound(_:)``.
    func zoneNotFoundItem(_ zone: ZoneAddress) -> ServerError {
        ServerError(
            .zoneNotFound, reason: "zone \(zone.zoneName) does not exist: create it with zones/modify",
            zoneID: zone.zoneID)
    }
}
