import CloudStoreWire
import Logging

extension SyncEngine {
    /// Sends the pending zone changes in scope (`zones/modify`, at most `maxBatchCount` per
    /// request), removes what was settled and reports it with ``Event/sentDatabaseChanges(_:)``.
    /// Transient failures keep their changes pending; a request that failed as a whole throws
    /// after what was settled before it was reported.
    func sendDatabaseChanges(in scope: SendChangesOptions.Scope) async throws {
        let (changes, revisions) = state.withStorage { storage in
            (storage.databaseChanges.changes.filter { scope.contains($0) }, storage.databaseChanges.revisionsByKey)
        }
        guard !changes.isEmpty else { return }
        var result = ZoneSendOutcome()
        var failure: (any Error)?
        for start in stride(from: 0, to: changes.count, by: configuration.maxBatchCount) {
            let chunk = Array(changes[start..<min(start + configuration.maxBatchCount, changes.count)])
            logger.info("Sending zone changes", metadata: ["count": "\(chunk.count)"])
            do {
                try await send(chunk, into: &result)
            } catch {
                failure = error
                break
            }
        }
        await apply(result, revisions: revisions)
        if let failure { throw failure }
    }

    private func send(_ chunk: [PendingDatabaseChange], into result: inout ZoneSendOutcome) async throws {
        let operations = chunk.map { change in
            switch change {
            case .saveZone(let zoneID): ZonesModifyRequest.Operation(.create, zoneID)
            case .deleteZone(let zoneID): ZonesModifyRequest.Operation(.delete, zoneID)
            }
        }
        let response: ZonesResponse
        do {
            response = try await database.modifyZones(ZonesModifyRequest(operations: operations))
        } catch let error as CloudError {
            guard let serverError = error.serverError, !error.isAuthenticationFailure,
                !RecordSendOutcome.keepsPending(serverError.code)
            else { throw error }
            for change in chunk { result.absorb(.error(serverError), for: change) }
            return
        }
        guard response.zones.count == chunk.count else {
            throw CloudError(
                .invalidResponse,
                message: "zones/modify answered \(response.zones.count) results for \(chunk.count) operations")
        }
        for (change, zoneResult) in zip(chunk, response.zones) {
            result.absorb(zoneResult, for: change)
        }
    }

    private func apply(_ result: ZoneSendOutcome, revisions: [ZoneID: UInt64]) async {
        state.withStorage { storage in
            storage.databaseChanges.removeAcknowledged(result.settled, revisions: revisions)
            for zoneID in result.deletedZoneIDs {
                storage.setZoneToken(nil, for: zoneID)
                storage.markFetched(zoneID)
            }
        }
        guard !result.settled.isEmpty else { return }
        logger.info(
            "Zone changes settled",
            metadata: [
                "saved": "\(result.savedZones.count)", "failedSaves": "\(result.failedZoneSaves.count)",
                "deleted": "\(result.deletedZoneIDs.count)", "failedDeletes": "\(result.failedZoneDeletes.count)",
            ])
        let (serialization, version) = state.withStorage { ($0.serialization, $0.version) }
        queue(
            .sentDatabaseChanges(
                Event.SentDatabaseChanges(
                    savedZones: result.savedZones, failedZoneSaves: result.failedZoneSaves,
                    deletedZoneIDs: result.deletedZoneIDs, failedZoneDeletes: result.failedZoneDeletes,
                    stateSerialization: serialization)),
            carryingStateAt: version)
    }
}

/// What became of zone changes: saved, deleted, failed for good (reported, removed from
/// pending), or kept pending (transient errors).
struct ZoneSendOutcome: Sendable {
    var savedZones: [Zone] = []
    var failedZoneSaves: [SyncEngine.Event.SentDatabaseChanges.FailedZoneSave] = []
    var deletedZoneIDs: [ZoneID] = []
    var failedZoneDeletes: [ZoneID: ServerError] = [:]
    /// The changes settled (acknowledged or failed for good), to remove from pending.
    var settled: [SyncEngine.PendingDatabaseChange] = []

    /// Takes the server's result for one change; zones keep the ID the app gave them.
    mutating func absorb(_ result: ZoneResult, for change: SyncEngine.PendingDatabaseChange) {
        switch (change, result) {
        case (.saveZone(let zoneID), .value(var zone)):
            zone.zoneID = zoneID
            savedZones.append(zone)
        case (.deleteZone(let zoneID), .value):
            deletedZoneIDs.append(zoneID)
        case (_, .error(let error)) where RecordSendOutcome.keepsPending(error.code):
            return
        case (.saveZone(let zoneID), .error(let error)):
            failedZoneSaves.append(.init(zoneID: zoneID, error: error))
        case (.deleteZone(let zoneID), .error(let error)):
            if error.code == .notFound || error.code == .zoneNotFound {
                deletedZoneIDs.append(zoneID)
            } else {
                failedZoneDeletes[zoneID] = error
            }
        }
        settled.append(change)
    }
}
