import CloudStoreLogging
import CloudStoreSync
import Foundation
import GRDB
import Logging

/// The sync engine's events, each handled in one ``MirrorWrite``: fetched changes applied,
/// uploads acknowledged, the engine's state saved, zones and accounts that changed, and the
/// import and export events the container reports.
extension CloudMirror {
    func handleEvents(_ events: [SyncEngine.Event], syncEngine: SyncEngine) async {
        for event in events { await handleEvent(event, syncEngine: syncEngine) }
    }

    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
        // An engine stopped for a decision about local data may finish a step: nothing of it is
        // applied or saved (its state is another user's).
        guard engines[syncEngine.database.scope] === syncEngine else {
            logger.debug("sync event of a stopped engine ignored", metadata: ["event": "\(event)"])
            return
        }
        do {
            try await handle(event, scope: syncEngine.database.scope)
        } catch let error as StoreError where error.code == .closed {
            // The container closed while the engine was finishing a step: nothing is lost (the
            // step's work was not committed and is done again on the next open).
            logger.debug("sync event after the store closed", metadata: ["event": "\(event)"])
        } catch {
            logger.error("mirroring could not handle a sync event", metadata: ["event": "\(event)", "error": "\(error)"])
            lastFailure = PersistentCloudContainer.SyncFailure(message: "\(error)")
        }
    }

    private func handle(_ event: SyncEngine.Event, scope: DatabaseScope) async throws {
        switch event {
        case .stateUpdate(let update):
            try await saveEngineState(update.stateSerialization, scope: scope)
        case .accountChange(let change):
            if scope == .private { logger.notice("account changed", metadata: ["change": "\(change.changeType)"]) }
            try await run(.accountChanged(change.changeType), scope: scope)
        case .fetchedDatabaseChanges(let changes):
            startTracking(\.importTracker, .import, in: scope)
            for deletion in changes.deletions {
                logger.notice("a zone was deleted on the server", metadata: ["zone": "\(deletion.zoneID)", "reason": "\(deletion.reason)"])
            }
            try await run(.zonesChanged(modified: changes.modifications, deleted: changes.deletions), scope: scope)
        case .fetchedRecordZoneChanges(let page):
            try await applyFetched(page, scope: scope)
        case .sentDatabaseChanges(let sent):
            for failure in sent.failedZoneSaves { fail(PersistentCloudContainer.SyncFailure(failure.error)) }
            try await run(.zonesSaved(sent.savedZones.map(\.zoneID)), scope: scope)
        case .sentRecordZoneChanges(let sent):
            let missing = try await acknowledge(sent, scope: scope)
            if !missing.isEmpty { try await run(.zonesMissing(missing), scope: scope) }
        case .willFetchChanges:
            try await run(.began, scope: scope)
            sessions[scope]?.deletedInFetch = []
            sessions[scope]?.unheardCreates.fetchBegan()
            sessions[scope]?.zoneFetchFailed = false
            sessions[scope]?.fetchRequested = false
            // The shared database reports its work once it has some (most users share nothing).
            if scope == .private { startTracking(\.importTracker, .import, in: scope) }
        case .willFetchRecordZoneChanges(let event):
            if event.fromScratch { sessions[scope]?.fromScratch[event.zoneID] = RecordNameSet() }
        case .didFetchRecordZoneChanges(let event):
            let seen = sessions[scope]?.fromScratch.removeValue(forKey: event.zoneID)
            if let seen, event.error == nil { try await removeUnseen(seen, in: Self.mirrorZoneID(event.zoneID, scope: scope)) }
            if let error = event.error {
                // A zone that is not on the server holds none of this device's creates either.
                if error.code != .zoneNotFound { sessions[scope]?.zoneFetchFailed = true }
                sessions[scope]?.importTracker?.failure = PersistentCloudContainer.SyncFailure(error)
                if error.code == .zoneNotFound, seen != nil { try await run(.zoneNotFound(event.zoneID), scope: scope) }
            }
        case .didFetchChanges(let event):
            guard var session = sessions[scope] else { return }
            let held = session.unheardCreates.waiting.count
            session.unheardCreates.fetchEnded(completed: event.error == nil && !session.zoneFetchFailed)
            let released = session.unheardCreates.waiting.count < held
            sessions[scope]?.unheardCreates = session.unheardCreates
            if released { signal.uploadsPending() }
            try await run(.fetchEnded(complete: event.error == nil && !session.zoneFetchFailed), scope: scope)
            // Records a local unique key kept aside may fit now (the app changed the key); a
            // read says whether any waits, so a fetch with none writes nothing.
            if schema.mirroredEntities.contains(where: { !$0.uniquenessConstraints.isEmpty }),
                try await store.read({ try $0.db.hasKeptAside() })
            {
                try await transaction { try $0.applyKeptAside() }
            }
            try await importEnded(scope)
        case .willSendChanges:
            try await run(.began, scope: scope)
            if scope == .private {
                let pending = try await store.read { try $0.db.pendingUploadCount() }
                startTracking(\.exportTracker, .export, total: pending, in: scope)
            }
        case .didSendChanges:
            try await exportEnded(scope)
        }
    }

    /// Starts reporting a piece of work of an engine (an import or an export), unless it is reported
    /// already: the private engine's from its start, the shared engine's from its first page or
    /// batch.
    private func startTracking(
        _ tracker: WritableKeyPath<EngineSession, EventTracker?>, _ kind: PersistentCloudContainer.Event.Kind,
        total: Int? = nil, in scope: DatabaseScope
    ) {
        guard sessions[scope] != nil, sessions[scope]?[keyPath: tracker] == nil else { return }
        let started = EventTracker(kind, total: total)
        sessions[scope]?[keyPath: tracker] = started
        events.send(started.started)
    }

    private func saveEngineState(_ state: SyncEngine.State.Serialization, scope: DatabaseScope) async throws {
        guard state != sessions[scope]?.savedState else { return }
        try await transaction { try $0.saveEngineState(state, as: Self.stateKey(scope)) }
        sessions[scope]?.savedState = state
    }

    /// Applies one fetched page and stores the token it brought, in one transaction.
    private func applyFetched(_ page: SyncEngine.Event.FetchedRecordZoneChanges, scope: DatabaseScope) async throws {
        startTracking(\.importTracker, .import, in: scope)
        if sessions[scope]?.fromScratch[page.zoneID] != nil {
            for record in page.modifications { sessions[scope]?.fromScratch[page.zoneID]?.insert(record.recordName) }
        }
        let (modifications, deletions, state) = (page.modifications, page.deletions, page.stateSerialization)
        let zone = Self.mirrorZoneID(page.zoneID, scope: scope)
        let deletedBefore = sessions[scope]?.deletedInFetch ?? []
        let key = Self.stateKey(scope)
        let ((deleted, mayLeaveWaitingFiles), counts) = try await transaction { transaction in
            transaction.deletedOnServer = deletedBefore
            try transaction.applyFetched(modifications, deletions: deletions, in: zone)
            try transaction.saveEngineState(state, as: key)
            return (transaction.deletedOnServer, transaction.mayLeaveWaitingFiles)
        }
        sessions[scope]?.deletedInFetch = deleted
        sessions[scope]?.savedState = state
        try await removeUnneededWaitingFiles(after: mayLeaveWaitingFiles)
        if let current = sessions[scope]?.importTracker?.counts { sessions[scope]?.importTracker?.counts = current + counts }
        logger.info(
            "applied fetched changes",
            metadata: [
                "zone": "\(zone)", "count": "\(modifications.count + deletions.count)", "conflicts": "\(counts.conflicts)",
            ])
        reportProgress(scope, \.importTracker, "import progress")
    }

    /// The zone as mirroring names it: the public database has one zone (``ZoneID/publicDefault``),
    /// however the engine named it; other databases' zones are named as their engines name them.
    static func mirrorZoneID(_ zoneID: ZoneID, scope: DatabaseScope) -> ZoneID {
        scope == .public ? .publicDefault : zoneID
    }

    /// Reports work under way: an event after each batch or page, and a level-1 line with the
    /// running totals and rate at most every two seconds.
    private func reportProgress(
        _ scope: DatabaseScope, _ tracker: WritableKeyPath<EngineSession, EventTracker?>, _ message: Logger.Message
    ) {
        guard var current = sessions[scope]?[keyPath: tracker] else { return }
        events.send(current.progressed)
        let now = Date()
        if current.pacing.due(at: now, startedAt: current.startDate) {
            logger.notice(message, metadata: current.progressMetadata(at: now))
        }
        sessions[scope]?[keyPath: tracker] = current
    }

    /// Settles a batch the server answered, and stores the engine's state, in one transaction.
    /// Answers the zones the uploads found missing on the server.
    private func acknowledge(_ sent: SyncEngine.Event.SentRecordZoneChanges, scope: DatabaseScope) async throws -> [ZoneID] {
        startTracking(\.exportTracker, .export, in: scope)
        let uploads = inFlight
        let key = Self.stateKey(scope)
        let lostAndFetched = sessions[scope]?.unheardCreates.lostAndFetched ?? []
        let ((missing, refused, refusedShares, waitForFetch), counts) = try await transaction { transaction in
            transaction.lostAndFetched = lostAndFetched
            let missing = try transaction.acknowledge(sent, uploads: uploads, stateKey: key)
            return (missing, transaction.refused, transaction.refusedShares, transaction.waitForFetch)
        }
        shareRefusals.merge(refusedShares) { _, new in new }
        for (zone, error) in refusedShares {
            fail(PersistentCloudContainer.SyncFailure(error))
            logger.error("the server refused a share change", metadata: ["zone": "\(zone)", "error": "\(error)"])
        }
        sessions[scope]?.savedState = sent.stateSerialization
        let answered =
            sent.savedRecords.map(\.recordID) + sent.deletedRecordIDs + sent.failedRecordSaves.map(\.record.recordID)
            + sent.failedRecordDeletes.keys
        for recordID in answered {
            Self.removeSealedFiles(inFlight[recordID]?.sealedFiles ?? [])
            inFlight[recordID] = nil
            sessions[scope]?.unheardCreates.heard(recordID.recordName)
        }
        for name in waitForFetch.sorted() {
            logger.info("the server no longer has the version an upload was for: it waits for a fetch", metadata: ["record": "\(name)"])
            sessions[scope]?.unheardCreates.lostOnServer(name)
        }
        if let current = sessions[scope]?.exportTracker?.counts { sessions[scope]?.exportTracker?.counts = current + counts }
        reportProgress(scope, \.exportTracker, "export progress")
        for (recordID, error) in sent.retryingRecordChanges.sorted(by: { $0.key.recordName < $1.key.recordName }) {
            logger.debug("the server did not take an upload; it goes again", metadata: ["record": "\(recordID)", "error": "\(error)"])
        }
        for (name, error) in refused.sorted(by: { $0.key < $1.key }) {
            var failure = PersistentCloudContainer.SyncFailure(error)
            failure.recordName = name
            fail(failure)
            logger.error("the server refused an upload", metadata: ["record": "\(name)", "error": "\(error)"])
        }
        return Array(missing)
    }

    /// After a fetch from scratch: objects of the zone that are on the server no more (their
    /// tombstones were compacted away) and not changed here are removed locally. Only the unseen
    /// records are loaded, so a bootstrap's memory does not grow with the store.
    private func removeUnseen(_ seen: RecordNameSet, in zone: ZoneID) async throws {
        try await transaction { transaction in
            let key = transaction.key(zone)
            for name in try transaction.db.settledRecordNames(in: key, where: { !seen.contains($0) }) {
                // Removing one object can remove or change others' rows (links), so each is read afresh.
                guard let row = try transaction.db.recordMetadata(name), row.zone == key, row.isOnServer, !row.hasPendingUpload else {
                    continue
                }
                try transaction.removeLocalCopy(of: row)
            }
        }
    }

    private func importEnded(_ scope: DatabaseScope) async throws {
        sessions[scope]?.deletedInFetch = []
        guard let tracker = sessions[scope]?.importTracker else { return }
        sessions[scope]?.importTracker = nil
        try await ended(tracker, recordingAt: .lastImport, "import finished")
    }

    private func exportEnded(_ scope: DatabaseScope) async throws {
        guard let tracker = sessions[scope]?.exportTracker else { return }
        sessions[scope]?.exportTracker = nil
        try await ended(tracker, recordingAt: .lastExport, "export finished")
    }

    /// Reports an import or export that ended, with its counts, and records when it succeeded.
    private func ended(_ tracker: EventTracker, recordingAt key: MirrorStateKey, _ message: Logger.Message) async throws {
        if tracker.failure == nil {
            try await transaction { try $0.db.setMirrorState(key, encoding: Date()) }
        }
        events.send(tracker.ended())
        logger.notice(
            message,
            metadata: [
                "saved": "\(tracker.counts.saved)", "deleted": "\(tracker.counts.deleted)",
                "conflicts": "\(tracker.counts.conflicts)", "failed": "\(tracker.counts.failed)",
                "duration": "\(LogFormat.duration(seconds: Date().timeIntervalSince(tracker.startDate)))",
            ])
    }

    // MARK: The plan's steps

    /// What the store knows that decides the plan's steps.
    /// For a share zone the event says is gone, how many of its changes are unsent.
    func facts(for event: MirrorPlan.Event) async throws -> MirrorPlan.Facts {
        var facts = MirrorPlan.Facts(
            primaryZone: primaryZone, decision: pausedDecision?.reason, accountUnconfirmed: unconfirmedAccountDecision)
        let gone: [ZoneID] =
            switch event {
            case .zonesChanged(_, let deleted): deleted.map(\.zoneID)
            case .zonesMissing(let zones): zones
            case .zoneNotFound(let zone): [zone]
            default: []
            }
        let shares = gone.filter { $0 != zoneID }
        if !shares.isEmpty {
            facts.unsentChanges = try await store.read { context in
                var unsent: [ZoneID: Int] = [:]
                for zone in shares { unsent[zone] = try MirrorTables.localDataCounts(context.db, in: MirrorZone.Key(zone)).unsent }
                return unsent
            }
        }
        return facts
    }

    /// Runs the steps ``MirrorPlan`` answers for an event of an engine, in order.
    func run(_ event: MirrorPlan.Event, scope: DatabaseScope) async throws {
        for step in plan.steps(for: event, scope: scope, facts: try await facts(for: event)) {
            logger.debug("mirror step", metadata: ["database": "\(scope.rawValue)", "step": "\(step)"])
            try await run(step)
        }
    }

    private func run(_ step: MirrorPlan.Step) async throws {
        switch step {
        case .recordSignIn(let user):
            try await transaction { transaction in
                try transaction.db.setMirrorState(.userRecordName, encoding: user)
                try transaction.db.setMirrorState(.accountStatus, nil)
            }
            // The key store may hold this user's key (set up in an earlier run, or by the app's
            // keychain): the encrypted records wait no longer.
            if keyring?.user != user { try await loadKeyring() }
        case .recordSignOut:
            fail(PersistentCloudContainer.SyncFailure(code: .authenticationFailed, message: ContainerError.credentialsRejected))
            try await transaction { try $0.db.setMirrorState(.accountStatus, encoding: "signedOut") }
        case .confirmUserReturned:
            try await confirmUserReturned()
        case .ask(let reason):
            try await askForDecision(reason)
        case .applyZoneChoice(let choice):
            try await applyZoneChoice(choice)
        case .applyAccountChoice(let choice, let newUser):
            try await applyAccountChoice(choice, newUser: newUser)
        case .setPrimaryZone(let state):
            try await transaction { try $0.setPrimaryZone(state) }
        case .shareZonesSaved(let zones):
            try await transaction { transaction in
                for zone in zones {
                    guard var row = try transaction.db.mirrorZone(zone) else { continue }
                    row.saved = true
                    try transaction.save(row)
                }
            }
        case .adoptZones(let zones):
            try await transaction { transaction in
                for zone in zones { _ = try transaction.adoptZone(zone) }
            }
        case .removeShareZone(let zone, let reason):
            // Unshared (removed, the share stopped, left) or deleted by its owner: the local copy
            // goes, with the uploads it still had logged as lost.
            logger.notice("a shared zone went away", metadata: ["zone": "\(zone)", "reason": "\(reason)"])
            try await transaction { transaction in
                guard let row = try transaction.db.mirrorZone(zone) else { return }
                try transaction.removeZoneData(row)
            }
        case .askAboutShare(let zone):
            try await askAboutShare(zone)
        case .uploadShareZoneAgain(let zone):
            logger.warning("the zone is missing on the server; creating it and uploading everything", metadata: ["zone": "\(zone)"])
            try await transaction { transaction in
                guard var row = try transaction.db.mirrorZone(zone) else { return }
                row.saved = false
                try transaction.save(row)
                try transaction.uploadEverythingAgain(in: row.key)
            }
        case .fetch:
            if let engine { requestFetch(engine) }
        }
    }
}
