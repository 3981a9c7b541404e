import CloudStoreSync
import Foundation
import GRDB

/// Decisions about local data (``PersistentCloudContainer/LocalDataDecision``): the primary zone
/// deleted or purged on the server, or another user's credentials. ``MirrorPlan`` says
/// whether the policy decides or the app is asked; this carries either out. The decision the
/// app is asked for lives in the store (``MirrorStateKey/localDataDecision``), written in the
/// transaction that learns it and cleared in the one that applies the app's choice.
extension CloudMirror {
    /// Throws what stops syncing now, if anything does: a decision the app is to make, or this
    /// device's copy purged.
    func checkCanSync() throws {
        if let pausedDecision { throw ContainerError.localDataDecisionNeeded(pausedDecision) }
        if purgedLocally {
            throw ContainerError.syncFailed(
                PersistentCloudContainer.SyncFailure(
                    message: "this device's copy of the mirrored data was purged; syncing resumes when the container is opened again"))
        }
    }

    /// Throws what stops the app's sync from finishing: ``checkCanSync()``, or a share that ended
    /// with unsent changes (the rest syncs meanwhile; that zone's uploads wait for the app).
    func checkDecisions() throws {
        try checkCanSync()
        if let oldestEndedShare { throw ContainerError.localDataDecisionNeeded(oldestEndedShare) }
    }

    /// The share that ended first of those that wait for the app.
    var oldestEndedShare: PersistentCloudContainer.LocalDataDecision? {
        endedShares.values.min { $0.date < $1.date }
    }

    /// A share's zone went away while this device holds unsent changes of it: the zone's row
    /// keeps the decision (``MirrorZone/ended``), its uploads wait, and the app is asked.
    func askAboutShare(_ zone: ZoneID) async throws {
        let date = store.configuration.now()
        let decision = try await transaction { transaction -> PersistentCloudContainer.LocalDataDecision? in
            guard var row = try transaction.db.mirrorZone(zone), row.ended == nil else { return nil }
            let counts = try MirrorTables.localDataCounts(transaction.db, in: row.key)
            row.ended = PersistentCloudContainer.LocalDataDecision(
                reason: .shareEnded, zoneID: zone, localObjects: counts.objects, unsentChanges: counts.unsent, date: date)
            try transaction.save(row)
            return row.ended
        }.value
        guard let decision else { return }
        endedShares[zone] = decision
        logger.warning(
            "a share ended while this device held unsent changes of it; they wait for the app to decide",
            metadata: ["decision": "\(decision)", "count": "\(decision.unsentChanges)"])
        events.send(EventTracker.localDataDecision(decision))
    }

    /// Stops syncing what the decision is about and asks the app: the decision is stored with
    /// what it concerns, the primary zone's uploads are held (or, for another user, both engines
    /// stop), and the app gets an event. Nothing local is changed.
    func askForDecision(_ reason: PersistentCloudContainer.LocalDataDecision.Reason) async throws {
        let accountChanged: Bool
        if case .accountChanged = reason { accountChanged = true } else { accountChanged = false }
        if let pausedDecision, pausedDecision.reason == reason { return }
        let (zoneID, date) = (zoneID, store.configuration.now())
        let decision = try await transaction { transaction in
            let counts = try MirrorTables.localDataCounts(transaction.db, allZones: accountChanged)
            let decision = PersistentCloudContainer.LocalDataDecision(
                reason: reason, zoneID: zoneID, localObjects: counts.objects, unsentChanges: counts.unsent, date: date)
            try transaction.db.setMirrorState(.localDataDecision, encoding: decision)
            return decision
        }.value
        // A save of the zone, pending or to come, would bring it back before the app decides:
        // the zone is held while the decision is paused.
        pausedDecision = decision
        unconfirmedAccountDecision = false
        if accountChanged {
            // The engines hold the new user's state now: none of it is saved, and nothing is
            // fetched into the previous user's data. New engines start once the app decides.
            await stopEngines()
        }
        logger.warning(
            "syncing waits for the app to decide about local data",
            metadata: ["decision": "\(decision)", "count": "\(decision.unsentChanges)"])
        events.send(EventTracker.localDataDecision(decision))
    }

    /// The engine began a fetch or a send without reporting another user while the store keeps a
    /// decision about an account change: the previous user's credentials are back, so the data
    /// is theirs and nothing is to decide.
    func confirmUserReturned() async throws {
        guard unconfirmedAccountDecision else { return }
        unconfirmedAccountDecision = false
        try await transaction { try $0.db.setMirrorState(.localDataDecision, nil) }
        logger.notice("the user whose data the store holds signed in again; syncing resumes")
    }

    /// Applies the app's choice for the decision the store keeps about `zoneID`: by default the
    /// one that stops syncing, or else the oldest share that ended; then syncs again.
    func decide(_ choice: PersistentCloudContainer.LocalDataChoice, zoneID requested: ZoneID?) async throws {
        guard !databases.isEmpty else { throw ContainerError.localOnly }
        let stored = try await store.read {
            try $0.db.mirrorState(.localDataDecision, as: PersistentCloudContainer.LocalDataDecision.self)
        }
        if let requested, requested != zoneID {
            guard endedShares[requested] != nil else { throw ContainerError.noLocalDataDecision }
            return try await applyShareChoice(choice, zone: requested)
        }
        guard let decision = stored else {
            guard requested == nil, let ended = oldestEndedShare else {
                throw ContainerError.noLocalDataDecision
            }
            return try await applyShareChoice(choice, zone: ended.zoneID)
        }
        logger.notice("the app decided about local data", metadata: ["decision": "\(decision)", "choice": "\(choice.rawValue)"])
        switch decision.reason {
        case .zoneDeleted, .zonePurged:
            try await applyZoneChoice(choice)
        case .accountChanged(_, let current):
            // The engines start again as the new user's, whether they stopped for the decision
            // or started since (a restart) with the previous user's state.
            try await applyAccountChoice(choice, newUser: current, restartingEngines: true)
        case .shareEnded:
            try await applyShareChoice(choice, zone: decision.zoneID)
        }
    }

    /// Carries out a choice for the objects of a share that ended: they become this user's own in
    /// the primary zone, stay on this device unmirrored, or go (their unsent changes in the
    /// conflict log as lost).
    func applyShareChoice(_ choice: PersistentCloudContainer.LocalDataChoice, zone: ZoneID) async throws {
        logger.notice("the app decided about a share that ended", metadata: ["zone": "\(zone)", "choice": "\(choice.rawValue)"])
        try await transaction { transaction in
            guard let row = try transaction.db.mirrorZone(zone) else { return }
            switch choice {
            case .uploadAgain: try transaction.takeOver(row)
            case .keepLocalOnly: try transaction.keepLocally(row)
            case .deleteLocalData: try transaction.removeZoneData(row)
            }
        }
        endedShares[zone] = nil
        signal.uploadsPending()
    }

    /// Carries out a choice for the local data of a deleted or purged primary zone; also what a
    /// primary zone the server lost gets (``PersistentCloudContainer/LocalDataChoice/uploadAgain``).
    func applyZoneChoice(_ choice: PersistentCloudContainer.LocalDataChoice) async throws {
        try await transaction { transaction in
            try transaction.setPrimaryZone(.unsaved)
            switch choice {
            case .uploadAgain: try transaction.uploadEverythingAgain()
            case .keepLocalOnly: try transaction.forgetMirroredRecords()
            case .deleteLocalData: try transaction.deleteMirroredData()
            }
            try transaction.db.setMirrorState(.localDataDecision, nil)
        }
        pausedDecision = nil
        signal.uploadsPending()
    }

    /// Carries out a choice for the previous user's local data when another user signed in.
    /// Engines stopped for the decision start again with no state, as the new user's.
    func applyAccountChoice(
        _ choice: PersistentCloudContainer.LocalDataChoice, newUser: String, restartingEngines: Bool = false
    ) async throws {
        let refetchesPublic = choice == .deleteLocalData && databases[.public] != nil
        try await transaction { transaction in
            try transaction.db.setMirrorState(.userRecordName, encoding: newUser)
            try transaction.db.setMirrorState(.accountStatus, nil)
            try transaction.setPrimaryZone(.unsaved)
            switch choice {
            case .deleteLocalData:
                try transaction.deleteMirroredData(allZones: true)
            case .uploadAgain:
                // Another user's shares are not this user's to keep; this user's own objects
                // all go back to the primary zone of the new account.
                try transaction.dropShares()
                try transaction.uploadEverythingAgain()
            case .keepLocalOnly:
                try transaction.dropShares()
                try transaction.forgetMirroredRecords()
            }
            try transaction.db.setMirrorState(.localDataDecision, nil)
            if restartingEngines {
                for key in Self.stateKeys { try transaction.db.setMirrorState(key, nil) }
            } else if refetchesPublic {
                try transaction.db.setMirrorState(Self.stateKey(.public), nil)
            }
        }
        pausedDecision = nil
        try await reloadEndedShares()
        if restartingEngines {
            await stopEngines()
            for (scope, database) in databases.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
                sessions[scope] = EngineSession()
                makeEngine(database, state: nil)
            }
        } else if refetchesPublic, let database = databases[.public] {
            // The public objects went with the rest: everyone's are fetched again from scratch.
            let stopped = engines.removeValue(forKey: .public)
            await stopped?.cancelOperations()
            sessions[.public] = EngineSession()
            makeEngine(database, state: nil)
        }
        signal.uploadsPending()
    }

    /// Deletes the mirrored data on this device, or in the primary zone everywhere
    /// (``PersistentCloudContainer/purgeMirroredData(_:)``).
    func purge(_ scope: PersistentCloudContainer.PurgeScope) async throws {
        guard let database = databases[.private] else { throw ContainerError.localOnly }
        logger.notice("purging mirrored data", metadata: ["scope": "\(scope.rawValue)", "zone": "\(zoneID.zoneName)"])
        switch scope {
        case .thisDevice:
            await stopEngines()
            try await transaction { transaction in
                try transaction.deleteMirroredData(allZones: true)
                try transaction.setPrimaryZone(.unsaved)
                for key in Self.stateKeys + [.localDataDecision] {
                    try transaction.db.setMirrorState(key, nil)
                }
            }
            pausedDecision = nil
            endedShares = [:]
            purgedLocally = true
        case .everywhere:
            let answer = try await database.modifyZones(ZonesModifyRequest(operations: [.init(.delete, zoneID)]))
            if case .error(let error)? = answer.zones.first, error.serverErrorCode != .zoneNotFound {
                throw ContainerError.syncFailed(PersistentCloudContainer.SyncFailure(error))
            }
            try await transaction { transaction in
                try transaction.deleteMirroredData()
                try transaction.setPrimaryZone(.purged)
                try transaction.db.setMirrorState(.localDataDecision, nil)
            }
            pausedDecision = nil
        }
    }

    /// Reads again which shares ended and wait for the app, after a choice that removed zones.
    private func reloadEndedShares() async throws {
        let ended = try await store.read { try $0.db.mirrorZones().compactMap(\.ended) }
        endedShares = Dictionary(ended.map { ($0.zoneID, $0) }) { first, _ in first }
    }

    /// Stops the engines: the mirror no longer hands them anything (``engines`` is emptied first,
    /// so an event or batch request of a stopped engine is ignored), and their operations end.
    func stopEngines() async {
        let stopped = engines.values
        engines = [:]
        for engine in stopped { await engine.cancelOperations() }
    }
}
