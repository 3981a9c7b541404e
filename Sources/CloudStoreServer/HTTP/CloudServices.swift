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
    /// The sign-in users, and the checks of their passwords and web auth tokens.
    var signIn: SignInAuthority
    var rateLimiter: RateLimiter?
    var metrics: ServerMetrics
    var logger: Logger
    /// Sees the size of every piece of asset bytes handed to or taken from the storage (tests
    /// check that transfers stream).
    var assetChunkObserver: (@Sendable (Int) -> Void)?
    /// The key that signs each container's asset download URLs (``AssetDownloadURLs``).
    var assetURLKeys = AssetURLKeys()

    /// Counts a failed sign-in (an unknown token, a wrong operator token or password) against the
    /// client's address when the server rate-limits; answers the whole seconds to wait when the
    /// address is over the limit, else nil. The API, the console and the sign-in page share the
    /// address's bucket.
    func throttleFailedSignIn(from address: String?) -> Int? {
        throttle("address \(address ?? "unknown")")
    }

    /// Takes a token from the rate limiter's bucket for `key` when the server rate-limits; answers
    /// the whole seconds to wait when the bucket is empty, else nil.
    func throttle(_ key: String) -> Int? {
        guard let rateLimiter, let wait = rateLimiter.take(for: key, now: clock.now()) else { return nil }
        return Int(max(1, wait.rounded(.up)))
    }

    /// 404 `ZONE_NOT_FOUND` for a zone a request names.
    func zoneNotFound(_ zone: ZoneAddress) -> APIError {
        APIError(
            .zoneNotFound, "zone \(zone.zoneName) does not exist: create it with zones/modify", zoneID: zone.zoneID)
    }

    /// Records live in zones of the private and public databases (the shared database's zones are
    /// private zones of their owners, reached through ``target(_:of:in:)``), and the public
    /// database has only its default zone.
    func checkZoneCanHoldRecords(_ zone: ZoneAddress) throws(APIError) {
        switch zone.partition.scope {
        case .shared: throw zoneNotFound(zone)
        case .public where !zone.isDefaultZone: throw zoneNotFound(zone)
        default: break
        }
    }

    /// The zone a request about records names, where its data lives, and as whom the caller uses
    /// it: their own zone of the private or public database, or (through the shared database) the
    /// owner's private zone once the caller's accepted participation is checked. Throws the
    /// request-level 403 of ``sharedTarget(_:of:in:)`` (and 404 for zones that cannot hold records).
    func target(_ zoneID: ZoneID?, of call: AuthenticatedCall, in partition: DatabasePartition) async throws -> ZoneTarget {
        guard partition.scope == .shared else {
            let zone = try call.zone(zoneID, in: partition)
            try checkZoneCanHoldRecords(zone)
            return ZoneTarget(zone: zone)
        }
        switch try await sharedTarget(zoneID, of: call, in: partition) {
        case .success(let target): return target
        case .failure(let error): throw APIError(error)
        }
    }

    /// A zone of the caller's shared database (WireProtocol.md §6): the owner's private zone when
    /// the caller accepted its share and takes part still, else `ACCESS_DENIED`, the same whether
    /// the zone exists, was never shared with them, or their access ended. The zone ID must name
    /// its owner (another user).
    func sharedTarget(_ zoneID: ZoneID?, of call: AuthenticatedCall, in partition: DatabasePartition) async throws
        -> Result<ZoneTarget, ServerError>
    {
        let zoneID = zoneID ?? .default
        try ZoneNames.validate(zoneID.zoneName)
        let user = call.caller.userRecordName
        guard let owner = zoneID.ownerRecordName, owner != user, !zoneID.zoneName.isEmpty,
            RecordRules.recordNameProblem(owner) == nil
        else { return .failure(ShareRules.notShared(zoneID)) }
        let zone = partition.privateDatabase(of: owner).zone(zoneID.zoneName)
        guard !zone.isDefaultZone, let permission = ShareRules.permission(of: try await storage.participant(user, in: zone))
        else { return .failure(ShareRules.notShared(zoneID)) }
        return .success(ZoneTarget(zone: zone, participant: user, permission: permission))
    }

    /// The share to show with rows of a response (``RecordWriter``): the zone's, when the rows
    /// hold its share record.
    func share(for rows: some Sequence<StoredRecord>, in zone: ZoneAddress) async throws -> StoredShare? {
        guard zone.partition.scope == .private, rows.contains(where: \.isLiveShareRecord) else { return nil }
        return try await storage.share(in: zone)
    }

    /// Wakes the long polls of the users whose shared database a write changed.
    func publish(sharedDatabases users: Set<String>, of zone: ZoneAddress) {
        for user in users { broker.publish(zone.partition.sharedDatabase(of: user).key) }
    }

    /// Whether the server knows a user by this userRecordName: a user of the tokens file or of the
    /// sign-in users. Only they can be invited to a share or looked up.
    func isKnownUser(_ userRecordName: String) -> Bool {
        bearerTokens.isKnownUser(userRecordName) || signIn.isKnownUser(userRecordName)
    }

    /// The rules of share records, with the server's users.
    var shareRules: ShareRules {
        let services = self
        return ShareRules(isKnownUser: { services.isKnownUser($0) })
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

/// Where a request's zone lives and as whom the caller uses it.
struct ZoneTarget: Sendable {
    /// The zone as stored: the caller's own, or the owner's private zone for the shared database.
    var zone: ZoneAddress
    /// The caller, when they use another user's zone through the shared database.
    var participant: String?
    /// The caller's permission there; nil for their own zones.
    var permission: SharePermission?
}
