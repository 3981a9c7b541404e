import CloudStoreSync
import Foundation

/// What mirroring does when the sync engine reports a change of a zone or of the account: decided
/// here, without I/O, from the event, the facts the store keeps and the app's policies, so tests
/// drive each case directly (as ``SyncScheduler`` and ``ConflictResolution`` are). ``CloudMirror``
/// runs the steps, each in the transaction that stores what it learns.
///
/// The policies, when the server deletes or purges the primary zone or reports another user:
///
/// | event | policy | step |
/// |---|---|---|
/// | zone deleted | `ask` (default) | ask the app |
/// | zone deleted | `deleteLocalData` | delete the local data |
/// | zone deleted | `reupload` | upload again |
/// | zone purged | `ask` (default) | ask the app |
/// | zone purged | `deleteLocalData` or `reupload` | delete the local data (a purge is a deliberate erase; uploading would undo it) |
/// | another user | `ask` (default) | ask the app |
/// | another user | `replaceLocalData` | delete the local data (every zone) |
/// | another user | `keepLocalData` | upload again, to the new user |
///
/// The defaults ask because nothing this device did not upload may be deleted without a call the
/// app made: a configured policy other than `ask` is such a call, made in advance.
struct MirrorPlan: Sendable {
    /// The primary zone: where every object that is not shared lives.
    var primaryZone: ZoneID
    var zoneDeletionPolicy: PersistentCloudContainer.ZoneDeletionPolicy = .ask
    var accountChangePolicy: PersistentCloudContainer.AccountChangePolicy = .ask

    /// What the store knows when an event arrives.
    struct Facts: Sendable, Hashable {
        /// Where the primary zone stands on the server (its row's ``MirrorZone/serverState``).
        var primaryZone: ZoneServerState = .unsaved
        /// The decision the app is asked for, until it decides (the primary zone's ``MirrorZone/decision``).
        var decision: PersistentCloudContainer.LocalDataDecision.Reason?
        /// Whether the stored decision is about an account change the engine has not confirmed
        /// since the container opened: the credentials may be the previous user's again.
        var accountUnconfirmed = false
        /// For the share zones the event names, how many of their changes this device has not
        /// uploaded yet.
        var unsentChanges: [ZoneID: Int] = [:]
    }

    /// An engine's report about zones or the account, reduced to what decides the steps.
    enum Event: Sendable, Hashable {
        /// The engine checked the account (its first sync, a sign-out, another user).
        case accountChanged(SyncEngine.Event.AccountChange.ChangeType)
        /// A fetch or a send began with no account change reported first.
        case began
        /// A database's zones changed or went away.
        case zonesChanged(modified: [ZoneID], deleted: [SyncEngine.Event.FetchedDatabaseChanges.Deletion])
        /// The server saved zones this device sent.
        case zonesSaved([ZoneID])
        /// Uploads found their zones missing on the server.
        case zonesMissing([ZoneID])
        /// A zone fetched from scratch is not on the server.
        case zoneNotFound(ZoneID)
        /// A fetch ended; `complete` when every zone was fetched without an error.
        case fetchEnded(complete: Bool)
    }

    /// One thing to do, in order.
    enum Step: Sendable, Hashable {
        /// The server named the signed-in user.
        case recordSignIn(user: String)
        /// The server rejected the credentials: syncing waits for valid ones, nothing local changes.
        case recordSignOut
        /// The credentials are the previous user's again: the stored decision about an account
        /// change is cleared and syncing resumes.
        case confirmUserReturned
        /// Stop syncing what the decision is about and ask the app.
        case ask(PersistentCloudContainer.LocalDataDecision.Reason)
        /// Carry out a choice for the primary zone's local data (the zone is saved again first
        /// when the choice uploads).
        case applyZoneChoice(PersistentCloudContainer.LocalDataChoice)
        /// Carry out a choice for the previous user's local data, the new user signed in.
        case applyAccountChoice(PersistentCloudContainer.LocalDataChoice, newUser: String)
        /// Store where the primary zone stands on the server.
        case setPrimaryZone(ZoneServerState)
        /// Owned shares' zones the server saved.
        case shareZonesSaved([ZoneID])
        /// Mirror zones that appeared (another device's shares, zones shared with this user).
        case adoptZones([ZoneID])
        /// A zone shared with this user, or an owned share's zone deleted on another device, is
        /// gone with nothing unsent: its local copy goes.
        case removeShareZone(ZoneID, Zone.DeletionReason)
        /// A share's zone is gone while this device holds unsent changes of it: its uploads wait
        /// and the app is asked (``PersistentCloudContainer/LocalDataDecision/Reason/shareEnded``).
        case askAboutShare(ZoneID)
        /// An owned share's zone the server lost: saved again, with everything in it.
        case uploadShareZoneAgain(ZoneID)
        /// Fetch soon: the fetch says why the primary zone is missing.
        case fetch
    }

    func steps(for event: Event, scope: DatabaseScope, facts: Facts) -> [Step] {
        switch event {
        case .accountChanged(let change):
            return accountChanged(change, scope: scope)
        case .began:
            return scope == .private && facts.accountUnconfirmed ? [.confirmUserReturned] : []
        case .zonesChanged(let modified, let deleted):
            return zonesChanged(modified: modified, deleted: deleted, scope: scope, facts: facts)
        case .zonesSaved(let zones):
            let shares = zones.filter { $0 != primaryZone }
            return (zones.contains(primaryZone) ? [.setPrimaryZone(.saved)] : []) + (shares.isEmpty ? [] : [.shareZonesSaved(shares)])
        case .zonesMissing(let zones):
            return zones.sorted { $0.description < $1.description }.flatMap { zone -> [Step] in
                if zone == primaryZone {
                    // Deleted on another device, or lost by the server: the next fetch tells which.
                    return facts.primaryZone == .missing ? [.fetch] : [.setPrimaryZone(.missing), .fetch]
                }
                return zoneLost(zone, facts)
            }
        case .zoneNotFound(let zone):
            // The engine fetches a zone it knew and the server no longer lists: lost, not deleted
            // (a deletion comes as a database change).
            guard scope == .private else { return [] }
            return zone == primaryZone ? reuploadPrimary(facts) : zoneLost(zone, facts)
        case .fetchEnded(let complete):
            // The fetch did not report the zone deleted: the server lost it.
            guard scope == .private, complete, facts.primaryZone == .missing else { return [] }
            return reuploadPrimary(facts)
        }
    }

    private func accountChanged(_ change: SyncEngine.Event.AccountChange.ChangeType, scope: DatabaseScope) -> [Step] {
        // Both engines see the same account; the private one's report is acted on, and either
        // one's report of another user stops both when the app is to decide.
        switch change {
        case .signIn(let user):
            return scope == .private ? [.recordSignIn(user: user)] : []
        case .signOut:
            return scope == .private ? [.recordSignOut] : []
        case .switchAccounts(let previous, let current):
            switch accountChangePolicy {
            case .ask: return [.ask(.accountChanged(previousUser: previous, currentUser: current))]
            case .replaceLocalData: return scope == .private ? [.applyAccountChoice(.deleteLocalData, newUser: current)] : []
            case .keepLocalData: return scope == .private ? [.applyAccountChoice(.uploadAgain, newUser: current)] : []
            }
        }
    }

    private func zonesChanged(
        modified: [ZoneID], deleted: [SyncEngine.Event.FetchedDatabaseChanges.Deletion], scope: DatabaseScope, facts: Facts
    ) -> [Step] {
        // The public database's one zone is always there, and has no row of its own.
        guard scope != .public else { return [] }
        var steps: [Step] = []
        if scope == .private, facts.primaryZone.needsSave, modified.contains(primaryZone),
            !deleted.contains(where: { $0.zoneID == primaryZone })
        {
            // The primary zone is on the server (another device made it): this device does not
            // save it again, which would bring it back if it were deleted later.
            steps.append(.setPrimaryZone(.saved))
        }
        let appeared = modified.filter { $0 != primaryZone }
        if !appeared.isEmpty { steps.append(.adoptZones(appeared)) }
        for deletion in deleted {
            guard deletion.zoneID == primaryZone else {
                steps += shareZoneGone(deletion.zoneID, deletion.reason, facts)
                continue
            }
            steps += primaryZoneDeleted(purged: deletion.reason == .purged, facts: facts)
        }
        return steps
    }

    /// The primary zone was deleted or purged on the server: this device's own purge coming back
    /// is nothing to decide; otherwise the policy, or the app, decides what happens to local data.
    private func primaryZoneDeleted(purged: Bool, facts: Facts) -> [Step] {
        if facts.primaryZone == .purged { return [.setPrimaryZone(.unsaved)] }
        if facts.decision != nil { return [] }
        switch zoneDeletionPolicy {
        case .ask: return [.ask(purged ? .zonePurged : .zoneDeleted)]
        case .deleteLocalData: return [.applyZoneChoice(.deleteLocalData)]
        case .reupload: return [.applyZoneChoice(purged ? .deleteLocalData : .uploadAgain)]
        }
    }

    /// The primary zone the server lost is saved again with everything in it, unless the app is
    /// deciding about it.
    private func reuploadPrimary(_ facts: Facts) -> [Step] {
        facts.decision == nil ? [.applyZoneChoice(.uploadAgain)] : []
    }

    /// A zone other than the primary one is missing: an owned share's zone is saved again with
    /// everything in it; a zone shared with this user is gone for good (its owner deleted it).
    private func zoneLost(_ zone: ZoneID, _ facts: Facts) -> [Step] {
        zone.ownerRecordName == nil ? [.uploadShareZoneAgain(zone)] : shareZoneGone(zone, .deleted, facts)
    }

    /// A share's zone went away: its local copy goes with it, unless this device holds changes
    /// of it not uploaded yet, which nothing deletes without the app.
    private func shareZoneGone(_ zone: ZoneID, _ reason: Zone.DeletionReason, _ facts: Facts) -> [Step] {
        facts.unsentChanges[zone, default: 0] > 0 ? [.askAboutShare(zone)] : [.removeShareZone(zone, reason)]
    }
}
