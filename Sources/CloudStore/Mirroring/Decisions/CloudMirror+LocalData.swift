import CloudStoreSync
import Foundation
import GRDB

/// Decisions about local data (``PersistentCloudContainer/LocalDataDecision``): the primary zone
/// deleted or purged on the server, another user's credentials, a share that ended while this
/// device held unsent changes of it. ``MirrorPlan`` says whether the policy decides or the app is
/// asked; this carries either out, in the transaction of the event that asked. The decision the
/// app is asked for lives in its zone's row (``MirrorZone/decision``), written in the transaction
/// that learns it and cleared in the one that applies the app's choice.
extension CloudMirror {
    // MARK: The plan's steps

    /// Runs the steps ``MirrorPlan`` answers for an event of an engine, in order, in the event's
    /// transaction; stops after one that stops the engines.
    static func run(
        _ event: MirrorPlan.Event, scope: DatabaseScope, plan: MirrorPlan, _ write: MirrorWrite, _ session: inout EngineSession,
        _ effects: inout MirrorEffects
    ) throws {
        for step in plan.steps(for: event, scope: scope, facts: try facts(for: event, write, session)) {
            write.logger.debug("mirror step", metadata: ["database": "\(scope.rawValue)", "step": "\(step)"])
            try run(step, write, &session, &effects)
            if effects.engines == .stopAll { return }
        }
    }

    /// What the store knows that decides the plan's steps: where the primary zone stands, the
    /// decision the app is asked for, and for a share zone the event says is gone, how many of
    /// its changes are unsent.
    static func facts(for event: MirrorPlan.Event, _ write: MirrorWrite, _ session: EngineSession) throws -> MirrorPlan.Facts {
        let primary = try write.ledger.primaryZone()
        var facts = MirrorPlan.Facts(
            primaryZone: primary?.serverState ?? .unsaved, decision: primary?.decision?.reason,
            accountUnconfirmed: session.accountUnconfirmed)
        let gone: [ZoneID] =
            switch event {
            case .zonesChanged(_, let deleted): deleted.map(\.zoneID)
            case .zonesMissing(let zones): zones
            case .zoneNotFound(let zone): [zone]
            default: []
            }
        for zone in gone where zone != write.zoneID {
            facts.unsentChanges[zone] = try write.ledger.localDataCounts(in: MirrorZone.Key(zone)).unsent
        }
        return facts
    }

    private static func run(
        _ step: MirrorPlan.Step, _ write: MirrorWrite, _ session: inout EngineSession, _ effects: inout MirrorEffects
    ) throws {
        let ledger = write.ledger
        switch step {
        case .recordSignIn(let user):
            try ledger.setState(.userRecordName, encoding: user)
            try ledger.setState(.accountStatus, nil)
            // The key store may hold this user's key (set up in an earlier run, or by the app's
            // keychain): the encrypted records wait no longer.
            effects.loadKeyring = true
        case .recordSignOut:
            try write.recordFailure(
                PersistentCloudContainer.SyncFailure(code: .authenticationFailed, message: ContainerError.credentialsRejected, date: write.now),
                &effects)
            try ledger.setState(.accountStatus, encoding: "signedOut")
        case .confirmUserReturned:
            guard session.accountUnconfirmed else { return }
            session.accountUnconfirmed = false
            if var primary = try ledger.primaryZone() {
                primary.decision = nil
                try ledger.save(primary)
            }
            write.logger.notice("the user whose data the store holds signed in again; syncing resumes")
        case .ask(let reason):
            try askForDecision(reason, write, &session, &effects)
        case .applyZoneChoice(let choice):
            try applyZoneChoice(choice, write, &effects)
        case .applyAccountChoice(let choice, let newUser):
            try applyAccountChoice(choice, newUser: newUser, restartingEngines: false, write, &effects)
        case .setPrimaryZone(let state):
            try write.setPrimaryZone(state, &effects)
        case .shareZonesSaved(let zones):
            for zone in zones { try write.setServerState(.saved, of: zone, &effects) }
        case .adoptZones(let zones):
            for zone in zones { _ = try write.adoptZone(zone, &effects) }
        case .removeShareZone(let zone, let reason):
            // Unshared (removed, the share stopped, left) or deleted by its owner: the local copy
            // goes, with the uploads it still had logged as lost.
            write.logger.notice("a shared zone went away", metadata: ["zone": "\(zone)", "reason": "\(reason)"])
            guard let row = try ledger.zone(zone) else { return }
            try write.removeZoneData(row, &effects)
        case .askAboutShare(let zone):
            try askAboutShare(zone, write, &effects)
        case .uploadShareZoneAgain(let zone):
            write.logger.warning("the zone is missing on the server; creating it and uploading everything", metadata: ["zone": "\(zone)"])
            guard var row = try ledger.zone(zone) else { return }
            row.serverState = .unsaved
            try write.save(row, &effects)
            try write.uploadEverythingAgain(in: row.key, &effects)
        case .fetch:
            effects.fetch.insert(.private)
        }
    }

    /// Stops syncing what the decision is about and asks the app: the decision is stored in the
    /// primary zone's row with what it concerns, the zone's uploads are held (or, for another
    /// user, both engines stop), and the app gets an event. Nothing local is changed.
    private static func askForDecision(
        _ reason: PersistentCloudContainer.LocalDataDecision.Reason, _ write: MirrorWrite, _ session: inout EngineSession,
        _ effects: inout MirrorEffects
    ) throws {
        // Asked already, unless what the store keeps is an account change this engine has not
        // confirmed: it reports another user again, and stops again.
        guard var primary = try write.ledger.primaryZone(), primary.decision?.reason != reason || session.accountUnconfirmed else { return }
        let accountChanged: Bool
        if case .accountChanged = reason { accountChanged = true } else { accountChanged = false }
        let counts = try write.ledger.localDataCounts(in: accountChanged ? nil : .primary)
        let decision = PersistentCloudContainer.LocalDataDecision(
            reason: reason, zoneID: write.zoneID, localObjects: counts.objects, unsentChanges: counts.unsent, date: write.now)
        primary.decision = decision
        try write.ledger.save(primary)
        session.accountUnconfirmed = false
        // A save of the zone, pending or to come, would bring it back before the app decides.
        effects.zonesNotToSave.append(write.zoneID)
        // The engines hold the new user's state now: none of it is saved, and nothing is fetched
        // into the previous user's data. New engines start once the app decides.
        if accountChanged { effects.engines = .stopAll }
        write.logger.warning(
            "syncing waits for the app to decide about local data", metadata: ["decision": "\(decision)", "count": "\(decision.unsentChanges)"])
        effects.events.append(EventTracker.localDataDecision(decision))
    }

    /// A share's zone went away while this device holds unsent changes of it: the zone's row
    /// keeps the decision, its uploads wait, and the app is asked.
    private static func askAboutShare(_ zone: ZoneID, _ write: MirrorWrite, _ effects: inout MirrorEffects) throws {
        guard var row = try write.ledger.zone(zone), row.decision == nil else { return }
        let counts = try write.ledger.localDataCounts(in: row.key)
        let decision = PersistentCloudContainer.LocalDataDecision(
            reason: .shareEnded, zoneID: zone, localObjects: counts.objects, unsentChanges: counts.unsent, date: write.now)
        row.decision = decision
        try write.ledger.save(row)
        effects.zonesNotToSave.append(zone)
        write.logger.warning(
            "a share ended while this device held unsent changes of it; they wait for the app to decide",
            metadata: ["decision": "\(decision)", "count": "\(decision.unsentChanges)"])
        effects.events.append(EventTracker.localDataDecision(decision))
    }

    /// Carries out a choice for the local data of a deleted or purged primary zone; also what a
    /// primary zone the server lost gets (``PersistentCloudContainer/LocalDataChoice/uploadAgain``).
    private static func applyZoneChoice(
        _ choice: PersistentCloudContainer.LocalDataChoice, _ write: MirrorWrite, _ effects: inout MirrorEffects
    ) throws {
        switch choice {
        case .uploadAgain: try write.uploadEverythingAgain(&effects)
        case .keepLocalOnly: try write.forgetMirroredRecords(&effects)
        case .deleteLocalData: try write.deleteMirroredData(&effects)
        }
        guard var primary = try write.ledger.primaryZone() else { return }
        primary.serverState = .unsaved
        primary.decision = nil
        try write.save(primary, &effects)
        effects.wakeAll()
    }

    /// Carries out a choice for the previous user's local data when another user signed in. With
    /// `restartingEngines`, the engines (stopped for the decision, or started since with the
    /// previous user's state) start again with no state, as the new user's.
    private static func applyAccountChoice(
        _ choice: PersistentCloudContainer.LocalDataChoice, newUser: String, restartingEngines: Bool, _ write: MirrorWrite,
        _ effects: inout MirrorEffects
    ) throws {
        let ledger = write.ledger
        try ledger.setState(.userRecordName, encoding: newUser)
        try ledger.setState(.accountStatus, nil)
        switch choice {
        case .deleteLocalData:
            try write.deleteMirroredData(allZones: true, &effects)
        case .uploadAgain:
            // Another user's shares are not this user's to keep; this user's own objects all go
            // back to the primary zone of the new account.
            try write.dropShares(&effects)
            try write.uploadEverythingAgain(&effects)
        case .keepLocalOnly:
            try write.dropShares(&effects)
            try write.forgetMirroredRecords(&effects)
        }
        if var primary = try ledger.primaryZone() {
            primary.serverState = .unsaved
            primary.decision = nil
            try write.save(primary, &effects)
        }
        if restartingEngines {
            for key in stateKeys { try ledger.setState(key, nil) }
            effects.engines = .restartAll
        } else if choice == .deleteLocalData, write.publicEntities.isEmpty == false {
            // The public objects went with the rest: everyone's are fetched again from scratch.
            try ledger.setState(stateKey(.public), nil)
            effects.engines = .restartPublic
        }
        effects.wakeAll()
    }

    // MARK: The app's decisions

    /// The decision that stops syncing, if one does: the one the primary zone's row keeps,
    /// unless it is an account change the engine has not confirmed in this session.
    func pausingDecision() async throws -> PersistentCloudContainer.LocalDataDecision? {
        let unconfirmed = engines[.private]?.accountUnconfirmed ?? false
        let decision = try await store.read { try Ledger($0.db).primaryZone()?.decision }
        if case .accountChanged? = decision?.reason, unconfirmed { return nil }
        return decision
    }

    /// The shares that ended while this device held unsent changes of them, oldest first.
    func endedShares() async throws -> [PersistentCloudContainer.LocalDataDecision] {
        try await store.read { context in
            try Ledger(context.db).sharedZones().compactMap(\.decision).sorted { $0.date < $1.date }
        }
    }

    /// Throws what stops syncing now, if anything does: a decision the app is to make, or this
    /// device's copy purged.
    func checkCanSync() async throws {
        if let decision = try await pausingDecision() { throw ContainerError.localDataDecisionNeeded(decision) }
        if purgedLocally {
            throw ContainerError.syncFailed(
                PersistentCloudContainer.SyncFailure(
                    message: "this device's copy of the mirrored data was purged; syncing resumes when the container is opened again"))
        }
    }

    /// Throws what stops the app's sync from finishing: ``checkCanSync()``, or a share that ended
    /// with unsent changes (the rest syncs meanwhile; that zone's uploads wait for the app).
    func checkDecisions() async throws {
        try await checkCanSync()
        if let oldest = try await endedShares().first { throw ContainerError.localDataDecisionNeeded(oldest) }
    }

    /// Applies the app's choice for the decision the store keeps about `zoneID`: by default the
    /// one that stops syncing, or else the oldest share that ended; then syncs again.
    func decide(_ choice: PersistentCloudContainer.LocalDataChoice, zoneID requested: ZoneID?) async throws {
        guard !databases.isEmpty else { throw ContainerError.localOnly }
        let (stored, ended) = try await store.read { context in
            let ledger = Ledger(context.db)
            return (try ledger.primaryZone()?.decision, try ledger.sharedZones().compactMap(\.decision).sorted { $0.date < $1.date })
        }
        if let requested, requested != zoneID {
            guard ended.contains(where: { $0.zoneID == requested }) else { throw ContainerError.noLocalDataDecision }
            return try await applyShareChoice(choice, zone: requested)
        }
        guard let decision = stored else {
            guard requested == nil, let oldest = ended.first else { throw ContainerError.noLocalDataDecision }
            return try await applyShareChoice(choice, zone: oldest.zoneID)
        }
        logger.notice("the app decided about local data", metadata: ["decision": "\(decision)", "choice": "\(choice.rawValue)"])
        switch decision.reason {
        case .zoneDeleted, .zonePurged:
            try await perform { write, effects in try Self.applyZoneChoice(choice, write, &effects) }
        case .accountChanged(_, let current):
            // The engines start again as the new user's, whether they stopped for the decision
            // or started since (a restart) with the previous user's state.
            try await perform { write, effects in
                try Self.applyAccountChoice(choice, newUser: current, restartingEngines: true, write, &effects)
            }
        case .shareEnded:
            try await applyShareChoice(choice, zone: decision.zoneID)
        }
    }

    /// Carries out a choice for the objects of a share that ended: they become this user's own in
    /// the primary zone, stay on this device unmirrored, or go (their unsent changes in the
    /// conflict log as lost).
    private func applyShareChoice(_ choice: PersistentCloudContainer.LocalDataChoice, zone: ZoneID) async throws {
        logger.notice("the app decided about a share that ended", metadata: ["zone": "\(zone)", "choice": "\(choice.rawValue)"])
        try await perform { write, effects in
            guard let row = try write.ledger.zone(zone) else { return }
            switch choice {
            case .uploadAgain: try write.takeOver(row, &effects)
            case .keepLocalOnly: try write.keepLocally(row, &effects)
            case .deleteLocalData: try write.removeZoneData(row, &effects)
            }
            effects.wakeAll()
        }
    }

    /// Deletes the mirrored data on this device, or in the primary zone everywhere
    /// (``PersistentCloudContainer/purgeMirroredData(_:)``).
    func purge(_ scope: PersistentCloudContainer.PurgeScope) async throws {
        guard let database = databases[.private] else { throw ContainerError.localOnly }
        logger.notice("purging mirrored data", metadata: ["scope": "\(scope.rawValue)", "zone": "\(zoneID.zoneName)"])
        switch scope {
        case .thisDevice:
            await stopEngines()
            try await perform { write, effects in
                try write.deleteMirroredData(allZones: true, &effects)
                guard var primary = try write.ledger.primaryZone() else { return }
                primary.serverState = .unsaved
                primary.decision = nil
                try write.ledger.save(primary)
                for key in Self.stateKeys { try write.ledger.setState(key, nil) }
                effects.wake = []
            }
            purgedLocally = true
        case .everywhere:
            let answer = try await database.modifyZones(ZonesModifyRequest(operations: [.init(.delete, zoneID)]))
            if case .error(let error)? = answer.zones.first, error.serverErrorCode != .zoneNotFound {
                throw ContainerError.syncFailed(PersistentCloudContainer.SyncFailure(error))
            }
            try await perform { write, effects in
                try write.deleteMirroredData(&effects)
                guard var primary = try write.ledger.primaryZone() else { return }
                primary.serverState = .purged
                primary.decision = nil
                try write.ledger.save(primary)
                effects.zonesNotToSave.append(write.zoneID)
            }
        }
    }
}
