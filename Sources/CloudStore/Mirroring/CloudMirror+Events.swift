import CloudStoreLogging
import CloudStoreSync
import Foundation
import GRDB
import Logging

/// The sync engines' events, each batch handled in one ``MirrorWrite``: fetched changes applied,
/// uploads acknowledged, the engine's state saved, zones and accounts that changed, the last
/// import, export and failure recorded, and the import and export events the container reports.
extension CloudMirror {
    func handleEvents(_ events: [SyncEngine.Event], syncEngine: SyncEngine) async {
        await handle(events, from: syncEngine)
    }

    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
        await handle([event], from: syncEngine)
    }

    /// Handles a batch of an engine's events, in order: in one store transaction, or without one
    /// when they change nothing the store keeps (a fetch's or send's start). An engine stopped for
    /// a decision about local data may finish a step: nothing of it is applied or saved (its state
    /// is another user's).
    func handle(_ events: [SyncEngine.Event], from engine: any MirrorEngine) async {
        let scope = engine.scope
        guard var session = engines[scope], session.engine === engine else {
            logger.debug("sync events of a stopped engine ignored", metadata: ["count": "\(events.count)"])
            return
        }
        do {
            let effects: MirrorEffects
            if events.allSatisfy({ Self.changesNothingStored($0, scope: scope, session: session) }) {
                effects = try await handleWithoutWriting(events, scope: scope, session: &session)
            } else {
                let (plan, now, before) = (plan, store.configuration.now(), session)
                let handled = try await write { write, effects in
                    var handled = before
                    for event in events {
                        try Self.handle(event, scope: scope, plan: plan, at: now, write, &handled, &effects)
                        // Another user's credentials stop the engines: what follows is theirs.
                        if effects.engines == .stopAll { break }
                    }
                    return handled
                }
                (session, effects) = (handled.value, handled.effects)
            }
            if engines[scope]?.engine === engine { engines[scope] = session }
            await apply(effects)
        } catch let error as StoreError where error.code == .closed {
            // The container closed while the engine was finishing a step: nothing is lost (the
            // step's work was not committed and is done again on the next open).
            logger.debug("sync events after the store closed", metadata: ["count": "\(events.count)"])
        } catch {
            logger.error("mirroring could not handle sync events", metadata: ["events": "\(events)", "error": "\(error)"])
            let failure = PersistentCloudContainer.SyncFailure(message: "\(error)")
            _ = try? await perform { write, effects in try write.recordFailure(failure, &effects) }
        }
    }

    /// Whether an event changes nothing the store keeps: a fetch's or send's start (unless an
    /// account decision waits for the engine's word), a zone fetch's start.
    static func changesNothingStored(_ event: SyncEngine.Event, scope: DatabaseScope, session: EngineSession) -> Bool {
        switch event {
        case .willSendChanges, .willFetchChanges: !session.accountUnconfirmed
        case .willFetchRecordZoneChanges: true
        default: false
        }
    }

    /// Handles events that change nothing the store keeps: the session's bookkeeping, and the
    /// import or export event that starts (an export's total read from the store).
    private func handleWithoutWriting(
        _ events: [SyncEngine.Event], scope: DatabaseScope, session: inout EngineSession
    ) async throws -> MirrorEffects {
        var effects = MirrorEffects()
        for event in events {
            switch event {
            case .willSendChanges where scope == .private:
                let pending = try await store.read { try Ledger($0.db).pendingCount() }
                Self.startTracking(\.exportTracker, .export, total: pending, &session, &effects)
            default:
                let (plan, now) = (plan, store.configuration.now())
                Self.beginning(event, scope: scope, plan: plan, at: now, &session, &effects)
            }
        }
        return effects
    }

    /// The bookkeeping of a fetch's or zone fetch's start.
    private static func beginning(
        _ event: SyncEngine.Event, scope: DatabaseScope, plan: MirrorPlan, at now: Date, _ session: inout EngineSession,
        _ effects: inout MirrorEffects
    ) {
        switch event {
        case .willFetchChanges:
            session.deletedInFetch = []
            session.unheardCreates.fetchBegan()
            session.zoneFetchFailed = false
            session.fetchRequested = false
            // The shared database reports its work once it has some (most users share nothing).
            if scope == .private { startTracking(\.importTracker, .import, &session, &effects) }
        case .willFetchRecordZoneChanges(let event):
            if event.fromScratch { session.fromScratch[event.zoneID] = RecordNameSet() }
        default:
            break
        }
    }

    /// Handles one event in the batch's transaction.
    private static func handle(
        _ event: SyncEngine.Event, scope: DatabaseScope, plan: MirrorPlan, at now: Date, _ write: MirrorWrite,
        _ session: inout EngineSession, _ effects: inout MirrorEffects
    ) throws {
        let logger = write.logger
        switch event {
        case .stateUpdate(let update):
            try write.saveEngineState(update.stateSerialization, as: stateKey(scope))
        case .accountChange(let change):
            if scope == .private { logger.notice("account changed", metadata: ["change": "\(change.changeType)"]) }
            try run(.accountChanged(change.changeType), scope: scope, plan: plan, write, &session, &effects)
        case .fetchedDatabaseChanges(let changes):
            startTracking(\.importTracker, .import, &session, &effects)
            for deletion in changes.deletions {
                logger.notice("a zone was deleted on the server", metadata: ["zone": "\(deletion.zoneID)", "reason": "\(deletion.reason)"])
            }
            try run(.zonesChanged(modified: changes.modifications, deleted: changes.deletions), scope: scope, plan: plan, write, &session, &effects)
        case .fetchedRecordZoneChanges(let page):
            try applyFetched(page, scope: scope, write, &session, &effects)
        case .sentDatabaseChanges(let sent):
            for failure in sent.failedZoneSaves { try write.recordFailure(PersistentCloudContainer.SyncFailure(failure.error), &effects) }
            try run(.zonesSaved(sent.savedZones.map(\.zoneID)), scope: scope, plan: plan, write, &session, &effects)
        case .sentRecordZoneChanges(let sent):
            let missing = try acknowledge(sent, scope: scope, write, &session, &effects)
            if !missing.isEmpty { try run(.zonesMissing(missing), scope: scope, plan: plan, write, &session, &effects) }
        case .willFetchChanges:
            try run(.began, scope: scope, plan: plan, write, &session, &effects)
            beginning(event, scope: scope, plan: plan, at: now, &session, &effects)
        case .willFetchRecordZoneChanges:
            beginning(event, scope: scope, plan: plan, at: now, &session, &effects)
        case .didFetchRecordZoneChanges(let event):
            let seen = session.fromScratch.removeValue(forKey: event.zoneID)
            if let seen, event.error == nil {
                try removeUnseen(seen, in: mirrorZoneID(event.zoneID, scope: scope), write, &effects)
            }
            if let error = event.error {
                // A zone that is not on the server holds none of this device's creates either.
                if error.code != .zoneNotFound { session.zoneFetchFailed = true }
                session.importTracker?.failure = PersistentCloudContainer.SyncFailure(error)
                if error.code == .zoneNotFound, seen != nil {
                    try run(.zoneNotFound(event.zoneID), scope: scope, plan: plan, write, &session, &effects)
                }
            }
        case .didFetchChanges(let event):
            try recordRequestFailure(event.error, write, &effects)
            let complete = event.error == nil && !session.zoneFetchFailed
            let held = session.unheardCreates.waiting.count
            session.unheardCreates.fetchEnded(completed: complete)
            // Creates held back released (a batch without them said nothing more was pending).
            if session.unheardCreates.waiting.count < held { effects.wakeAll() }
            try run(.fetchEnded(complete: complete), scope: scope, plan: plan, write, &session, &effects)
            // Records a local unique key kept aside may fit now (the app changed the key).
            if write.schema.mirroredEntities.contains(where: { !$0.uniquenessConstraints.isEmpty }), try write.db.hasKeptAside() {
                try write.applyKeptAside(&effects)
            }
            session.deletedInFetch = []
            try ended(\.importTracker, "import finished", write, &session, &effects)
        case .willSendChanges:
            try run(.began, scope: scope, plan: plan, write, &session, &effects)
            if scope == .private {
                startTracking(\.exportTracker, .export, total: try write.ledger.pendingCount(), &session, &effects)
            }
        case .didSendChanges(let event):
            try recordRequestFailure(event.error, write, &effects)
            try ended(\.exportTracker, "export finished", write, &session, &effects)
        }
    }

    /// Records a request's failure (no network, throttling, the server's error) as the last
    /// failure; a cancellation is none, and rejected credentials are recorded by the sign-out.
    private static func recordRequestFailure(_ error: (any Error)?, _ write: MirrorWrite, _ effects: inout MirrorEffects) throws {
        guard let error = error as? CloudError, error.kind != .cancelled,
            error.code != .authenticationFailed && error.code != .authenticationRequired
        else { return }
        try write.recordFailure(PersistentCloudContainer.SyncFailure(error, date: write.now), &effects)
    }

    /// Starts reporting a piece of work of an engine (an import or an export), unless it is reported
    /// already: the private engine's from its start, the shared engine's from its first page or
    /// batch.
    private static func startTracking(
        _ tracker: WritableKeyPath<EngineSession, EventTracker?>, _ kind: PersistentCloudContainer.Event.Kind, total: Int? = nil,
        _ session: inout EngineSession, _ effects: inout MirrorEffects
    ) {
        guard session[keyPath: tracker] == nil else { return }
        let started = EventTracker(kind, total: total)
        session[keyPath: tracker] = started
        effects.events.append(started.started)
    }

    /// Reports work under way: an event after each batch or page, and a level-1 line with the
    /// running totals and rate at most every two seconds.
    private static func reportProgress(
        _ tracker: WritableKeyPath<EngineSession, EventTracker?>, counts: MirrorCounts, _ message: Logger.Message,
        logger: Logger, _ session: inout EngineSession, _ effects: inout MirrorEffects
    ) {
        guard var current = session[keyPath: tracker] else { return }
        current.counts = current.counts + counts
        effects.events.append(current.progressed)
        let now = Date()
        if current.pacing.due(at: now, startedAt: current.startDate) {
            logger.notice(message, metadata: current.progressMetadata(at: now))
        }
        session[keyPath: tracker] = current
    }

    /// Reports an import or export that ended, with its counts, and records when it succeeded (the
    /// last failure goes once it is past, ``MirrorWrite/recordSuccess(export:at:)``).
    private static func ended(
        _ tracker: WritableKeyPath<EngineSession, EventTracker?>, _ message: Logger.Message, _ write: MirrorWrite,
        _ session: inout EngineSession, _ effects: inout MirrorEffects
    ) throws {
        guard var ended = session[keyPath: tracker] else { return }
        session[keyPath: tracker] = nil
        // Failures this batch recorded end it as failed too.
        if ended.failure == nil { ended.failure = effects.failures.last }
        if ended.failure == nil { try write.recordSuccess(export: tracker == \.exportTracker, at: write.now) }
        effects.events.append(ended.ended())
        write.logger.notice(
            message,
            metadata: [
                "saved": "\(ended.counts.saved)", "deleted": "\(ended.counts.deleted)",
                "conflicts": "\(ended.counts.conflicts)", "failed": "\(ended.counts.failed)",
                "duration": "\(LogFormat.duration(seconds: Date().timeIntervalSince(ended.startDate)))",
            ])
    }

    /// Applies one fetched page and stores the token it brought.
    private static func applyFetched(
        _ page: SyncEngine.Event.FetchedRecordZoneChanges, scope: DatabaseScope, _ write: MirrorWrite,
        _ session: inout EngineSession, _ effects: inout MirrorEffects
    ) throws {
        startTracking(\.importTracker, .import, &session, &effects)
        if session.fromScratch[page.zoneID] != nil {
            for record in page.modifications { session.fromScratch[page.zoneID]?.insert(record.recordName) }
        }
        let zone = mirrorZoneID(page.zoneID, scope: scope)
        let before = effects.counts
        session.deletedInFetch = try write.applyFetched(
            page.modifications, deletions: page.deletions, in: zone, deletedInFetch: session.deletedInFetch, &effects)
        try write.saveEngineState(page.stateSerialization, as: stateKey(scope))
        let counts = effects.counts - before
        write.logger.info(
            "applied fetched changes",
            metadata: ["zone": "\(zone)", "count": "\(page.modifications.count + page.deletions.count)", "conflicts": "\(counts.conflicts)"])
        reportProgress(\.importTracker, counts: counts, "import progress", logger: write.logger, &session, &effects)
    }

    /// Settles a batch the server answered and stores the engine's state. Answers the zones the
    /// uploads found missing on the server.
    private static func acknowledge(
        _ sent: SyncEngine.Event.SentRecordZoneChanges, scope: DatabaseScope, _ write: MirrorWrite,
        _ session: inout EngineSession, _ effects: inout MirrorEffects
    ) throws -> [ZoneID] {
        startTracking(\.exportTracker, .export, &session, &effects)
        let before = effects.counts
        let waitingBefore = effects.waitForFetch
        let missing = try write.acknowledge(
            sent, uploads: session.inFlight, lostAndFetched: session.unheardCreates.lostAndFetched, stateKey: stateKey(scope), &effects)
        let answered =
            sent.savedRecords.map(\.recordID) + sent.deletedRecordIDs + sent.failedRecordSaves.map(\.record.recordID)
            + sent.failedRecordDeletes.keys
        for recordID in answered {
            removeSealedFiles(session.inFlight[recordID]?.sealedFiles ?? [])
            session.inFlight[recordID] = nil
            session.unheardCreates.heard(recordID.recordName, in: recordID.zoneID)
        }
        for name in effects.waitForFetch.subtracting(waitingBefore).sorted() {
            write.logger.info("the server no longer has the version an upload was for: it waits for a fetch", metadata: ["record": "\(name)"])
            session.unheardCreates.lostOnServer(name)
        }
        for (recordID, error) in sent.retryingRecordChanges.sorted(by: { $0.key.recordName < $1.key.recordName }) {
            write.logger.debug("the server did not take an upload; it goes again", metadata: ["record": "\(recordID)", "error": "\(error)"])
        }
        reportProgress(\.exportTracker, counts: effects.counts - before, "export progress", logger: write.logger, &session, &effects)
        return Array(missing)
    }

    /// After a fetch from scratch: objects of the zone that are on the server no more (their
    /// tombstones were compacted away) and not changed here are removed locally. Only the unseen
    /// records are loaded, so a bootstrap's memory does not grow with the store.
    private static func removeUnseen(_ seen: RecordNameSet, in zone: ZoneID, _ write: MirrorWrite, _ effects: inout MirrorEffects) throws {
        let key = write.key(zone)
        for name in try write.ledger.settledNames(in: key, where: { !seen.contains($0) }) {
            // Removing one object can remove or change others' rows (links), so each is read afresh.
            guard let row = try write.ledger.find(name), row.zone == key, row.isOnServer, !row.hasPendingUpload else { continue }
            try write.removeLocalCopy(of: row, &effects)
        }
    }
}

extension MirrorCounts {
    /// What `rhs` did not count of `lhs`, field by field.
    static func - (lhs: MirrorCounts, rhs: MirrorCounts) -> MirrorCounts {
        var difference = lhs
        difference.saved -= rhs.saved
        difference.deleted -= rhs.deleted
        difference.conflicts -= rhs.conflicts
        difference.failed -= rhs.failed
        return difference
    }
}
