import CloudStoreLogging
import CloudStoreSync
import Foundation
import GRDB
import Logging

/// Mirrors one store through a sync engine: the engine's delegate. One actor per container; the
/// engine calls it serially.
///
/// The store's `cloudstore_record_metadata` table is the one queue of pending uploads: each save
/// records its own in its transaction (``PendingUploadRecorder``), and the engine runs in
/// CKSyncEngine's "untracked changes" mode, asking for the next batch while the queue has any.
/// Its saved state holds tokens and zone bookkeeping only. Each event is handled by one
/// ``MirrorTransaction``: fetched records, acknowledgements and the engine's state commit together.
actor CloudMirror: SyncEngineDelegate {
    let store: PersistentStore
    let schema: Schema
    /// The primary zone: where every object that is not shared lives.
    let zoneID: ZoneID
    let options: PersistentCloudContainer.Options
    let logger: Logger
    let events: EventHub
    let signal: PendingUploadSignal
    /// One engine per database, as CKSyncEngine: the private database's mirrors the primary zone
    /// and the shares this user owns, the shared database's the zones others shared with this user.
    private(set) var engines: [DatabaseScope: SyncEngine] = [:]
    /// Each engine's bookkeeping of the fetch or send under way.
    private var sessions: [DatabaseScope: EngineSession] = [:]
    /// This device's ID as the server records it in `modified.deviceID`.
    private var deviceID: String?
    /// What each upload in flight carried, until the server answers.
    private var inFlight: [RecordID: SentUpload] = [:]
    private var lastFailure: PersistentCloudContainer.SyncFailure?
    /// Share changes the server refused for good, until the call that made them reads them.
    private var shareRefusals: [ZoneID: ServerError] = [:]

    /// The private database's engine.
    var engine: SyncEngine? { engines[.private] }

    /// What mirroring tracks for one engine between its events.
    struct EngineSession {
        /// The engine state last saved, so an unchanged one is not written again.
        var savedState: SyncEngine.State.Serialization?
        /// Record names seen while a zone is fetched from scratch, by zone.
        var fromScratch: [ZoneID: Set<String>] = [:]
        /// Objects whose tombstones the fetch under way brought (see ``MirrorTransaction/deletedOnServer``).
        var deletedInFetch: Set<UUID> = []
        /// Creates handed out and never answered, held back until a fetch covers them.
        var unheardCreates = UnheardCreates()
        /// Whether a zone failed to fetch in the fetch under way.
        var zoneFetchFailed = false
        /// Whether a fetch was asked for to release held-back creates (automatic sync only).
        var fetchRequested = false
        var importTracker: EventTracker?
        var exportTracker: EventTracker?
    }

    init(
        store: PersistentStore, schema: Schema, zoneID: ZoneID, options: PersistentCloudContainer.Options,
        events: EventHub, logger: Logger
    ) {
        self.store = store
        self.schema = schema
        self.zoneID = zoneID
        self.options = options
        self.events = events
        self.logger = logger
        self.signal = PendingUploadSignal(primaryZone: zoneID)
    }

    /// Where an engine's state is stored.
    static func stateKey(_ scope: DatabaseScope) -> MirrorStateKey {
        scope == .shared ? .sharedEngineState : .engineState
    }

    // MARK: Start and stop

    /// Records pending uploads from now on, prepares the metadata (migrating a store the previous
    /// core wrote) and makes one engine per database given (private, and shared for sharing).
    func start(databases: [DatabaseScope: any CloudDatabase], deviceID: String?) async throws {
        self.deviceID = deviceID
        var setup = EventTracker(.setup)
        events.send(setup.started)
        do {
            store.add(PendingUploadRecorder(schema: schema, primaryZone: zoneID, signal: signal))
            let (store, schema, zoneID, policy, logger) = (store, schema, zoneID, options.conflictPolicy, logger)
            let now = store.configuration.now()
            let (states, zoneSaved, unsavedZones, pending, unheard) = try await store.write(author: MirrorAuthor.import) { context in
                let firstMirroring = try MirrorMetadata.prepare(context, store: store, schema: schema)
                if firstMirroring {
                    // Objects saved before the store first mirrored: each is an upload to make,
                    // recorded in the transaction that turns mirroring on.
                    try MirrorTransaction(
                        context: context, schema: schema, zoneID: zoneID, policy: policy, deviceID: deviceID, now: now,
                        logger: logger
                    ).uploadEverythingAgain()
                }
                var states: [DatabaseScope: SyncEngine.State.Serialization] = [:]
                for scope in [DatabaseScope.private, .shared] {
                    states[scope] = try context.db.mirrorState(Self.stateKey(scope), as: SyncEngine.State.Serialization.self)
                }
                return (
                    states,
                    try context.db.mirrorState(.zoneSaved, as: Bool.self) ?? false,
                    try context.db.mirrorZones().filter { $0.role == .ownedShare && !$0.saved }.map(\.zoneID),
                    try context.db.pendingUploadCount(),
                    try context.db.unheardCreateNames()
                )
            }
            signal.setZoneSaved(zoneID, zoneSaved)
            for zone in unsavedZones { signal.setZoneSaved(zone, false) }
            for (scope, database) in databases.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
                var session = EngineSession()
                session.savedState = states[scope]
                session.unheardCreates = UnheardCreates(waiting: unheard.filter { $0.scope == scope }.map(\.name))
                sessions[scope] = session
                makeEngine(database, state: states[scope])
            }
            if pending > 0 { signal.uploadsPending() }
            events.send(setup.ended())
            logger.notice(
                "mirroring set up",
                metadata: ["zone": "\(zoneID.zoneName)", "server": "\(!databases.isEmpty)", "count": "\(pending)"])
        } catch {
            setup.failure = PersistentCloudContainer.SyncFailure(message: "\(error)")
            events.send(setup.ended())
            throw error
        }
    }

    private func makeEngine(_ database: any CloudDatabase, state: SyncEngine.State.Serialization?) {
        let observed = ObservedDatabase(base: database) { [weak self] error in
            Task { await self?.requestFailed(error) }
        }
        var configuration = SyncEngine.Configuration(
            database: observed, stateSerialization: state, delegate: self, automaticallySync: options.automaticallySync)
        var engineLogger = Logger(label: database.scope == .shared ? "cloudstore.sync.shared" : "cloudstore.sync")
        engineLogger.logLevel = logger.logLevel
        configuration.logger = engineLogger
        configuration.sendDebounce = options.exportDebounce
        configuration.maxSendDelay = max(options.exportDebounce * 10, .milliseconds(500))
        // A save after a quiet spell goes at once; saves that follow it are gathered.
        configuration.sendsAtLeadingEdge = true
        configuration.pollInterval = options.pollInterval
        configuration.fetchResultsLimit = options.fetchPageSize
        if let transfers = store.layout.externalData?.transfers,
            schema.mirroredEntities.contains(where: { $0.attributes.contains { $0.type == .data } })
        {
            // Assets download beside the store's files, so adopting one is a rename.
            try? FileManager.default.createDirectory(at: transfers, withIntermediateDirectories: true)
            configuration.assetDirectory = transfers
        }
        options.configureEngine?(&configuration)
        let engine = SyncEngine(configuration)
        engines[database.scope] = engine
        // The record metadata is the queue; a state saved by the previous core listed them too.
        engine.state.remove(pendingRecordZoneChanges: engine.state.pendingRecordZoneChanges)
        signal.attach(engine.state, scope: database.scope)
    }

    func stop() async {
        for engine in engines.values { await engine.cancelOperations() }
        engines = [:]
    }

    // MARK: Transactions

    /// Runs mirroring work in one store transaction, then tells the engines if uploads are pending
    /// and the app what happened to its shares.
    @discardableResult
    func transaction<T: Sendable>(
        _ body: @escaping @Sendable (MirrorTransaction) throws -> T
    ) async throws -> (value: T, counts: MirrorCounts) {
        let (schema, zoneID, policy, deviceID, logger) = (schema, zoneID, options.conflictPolicy, deviceID, logger)
        let now = store.configuration.now()
        let (value, counts, pending, activity) = try await store.write(author: MirrorAuthor.import) { context in
            let transaction = try MirrorTransaction(
                context: context, schema: schema, zoneID: zoneID, policy: policy, deviceID: deviceID, now: now,
                logger: logger)
            let value = try body(transaction)
            return (
                value, transaction.counts, transaction.hasPendingUploads || transaction.hasPendingShareChanges,
                transaction.activity
            )
        }
        if pending { signal.uploadsPending() }
        if !activity.isEmpty { events.send(EventTracker.sharing(activity)) }
        return (value, counts)
    }

    // MARK: SyncEngineDelegate

    /// The next pending uploads through the engine's database from the record metadata, in upload
    /// order, without the records the engine skips in this pass. The engine is told whether more
    /// may be pending.
    func nextRecordZoneChangeBatch(
        _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.RecordZoneChangeBatch? {
        let scope = syncEngine.database.scope
        // Creates in flight are skipped anyway (the engine prepares the next batch while one is in
        // flight); only those handed out and never answered wait for a fetch.
        let inFlightNames = Set(context.recordIDsToSkip.map(\.recordName))
        let held = (sessions[scope]?.unheardCreates.waiting ?? []).subtracting(inFlightNames)
        if !held.isEmpty { requestFetch(syncEngine) }
        // Cleared before reading, so a save committed after the read sets it again.
        syncEngine.state.hasPendingUntrackedChanges = false
        let prepared: [PreparedUpload]
        let (limit, skipping) = (context.maxRecordCount, context.recordIDsToSkip)
        do {
            prepared = try await transaction {
                try $0.prepareUploads(scope: scope, limit: limit, skipping: skipping, holding: held)
            }.value
        } catch {
            logger.error("reading the pending uploads failed", metadata: ["error": "\(error)"])
            syncEngine.state.hasPendingUntrackedChanges = true
            return nil
        }
        let uploads = prepared.filter { context.options.scope.contains($0.change) }
        guard !uploads.isEmpty else {
            // Records in flight (the engine asks for the next batch while one travels) or skipped
            // in this pass are still pending: if their request fails, they go again in a later
            // pass, which the engine makes only while it knows more may be pending.
            if !context.recordIDsToSkip.isEmpty { syncEngine.state.hasPendingUntrackedChanges = true }
            return nil
        }
        syncEngine.state.hasPendingUntrackedChanges = true
        let records = Dictionary(uploads.compactMap { upload in upload.record.map { ($0.recordID, $0) } }) { first, _ in first }
        var batch = await SyncEngine.RecordZoneChangeBatch(pendingChanges: uploads.map(\.change)) { recordID in
            records[recordID]
        }
        // A delete of a version this device has goes for that version only: another device's edit
        // since comes back as a conflict instead of being deleted unseen.
        for upload in uploads {
            if let tag = upload.deleteChangeTag { batch?.recordChangeTagsToDelete[upload.change.recordID] = tag }
        }
        // What the batch holds (it stops at the engine's size limit) is what is handed out.
        let sent = Dictionary(uploads.map { ($0.change.recordID, $0.sent) }) { first, _ in first }
        for record in batch?.recordsToSave ?? [] {
            inFlight[record.recordID] = sent[record.recordID]
            if record.recordChangeTag == nil, !ShareMetadata.isShareType(record.recordType) {
                sessions[scope]?.unheardCreates.handedOut(record.recordName)
            }
        }
        for recordID in batch?.recordIDsToDelete ?? [] { inFlight[recordID] = sent[recordID] }
        logger.info(
            "uploads handed out",
            metadata: [
                "database": "\(scope.rawValue)",
                "count": "\((batch?.recordsToSave.count ?? 0) + (batch?.recordIDsToDelete.count ?? 0))",
            ])
        return batch
    }

    /// The store's own file of an asset, when it holds those bytes already: the engine does not
    /// download them again.
    nonisolated func existingFile(for asset: Asset, syncEngine: SyncEngine) async -> URL? {
        store.externalDataURL(for: ExternalData(checksum: asset.fileChecksum, size: asset.size))
    }

    /// How many creates wait for a fetch before they go out again.
    var heldBackCreates: Int { sessions.values.reduce(0) { $0 + $1.unheardCreates.waiting.count } }

    /// Asks the engine for a fetch, so creates held back until one covers them go out soon. Only
    /// when syncing automatically: otherwise the app drives fetches (`sync()` fetches after it sends).
    private func requestFetch(_ engine: SyncEngine) {
        let scope = engine.database.scope
        guard options.automaticallySync, sessions[scope]?.fetchRequested == false else { return }
        sessions[scope]?.fetchRequested = true
        Task { try? await engine.fetchChanges() }
    }

    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
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
            // Both engines see the same account; the private one's report is acted on.
            if scope == .private { try await accountChanged(change.changeType) }
        case .fetchedDatabaseChanges(let changes):
            try await databaseChanged(changes, scope: scope)
        case .fetchedRecordZoneChanges(let page):
            try await applyFetched(page, scope: scope)
        case .sentDatabaseChanges(let sent):
            try await zoneChangesSent(sent)
        case .sentRecordZoneChanges(let sent):
            try await acknowledge(sent, scope: scope)
        case .willFetchChanges:
            sessions[scope]?.deletedInFetch = []
            sessions[scope]?.unheardCreates.fetchBegan()
            sessions[scope]?.zoneFetchFailed = false
            sessions[scope]?.fetchRequested = false
            // The shared database reports its work once it has some (most users share nothing).
            if scope == .private { startTracking(\.importTracker, .import, in: scope) }
        case .willFetchRecordZoneChanges(let event):
            if event.fromScratch { sessions[scope]?.fromScratch[event.zoneID] = [] }
        case .didFetchRecordZoneChanges(let event):
            let seen = sessions[scope]?.fromScratch.removeValue(forKey: event.zoneID)
            if let seen, event.error == nil { try await removeUnseen(seen, in: event.zoneID) }
            if let error = event.error {
                // A zone that is not on the server holds none of this device's creates either.
                if error.code != .zoneNotFound { sessions[scope]?.zoneFetchFailed = true }
                sessions[scope]?.importTracker?.failure = PersistentCloudContainer.SyncFailure(error)
            }
        case .didFetchChanges(let event):
            guard var session = sessions[scope] else { return }
            let held = session.unheardCreates.waiting.count
            session.unheardCreates.fetchEnded(completed: event.error == nil && !session.zoneFetchFailed)
            let released = session.unheardCreates.waiting.count < held
            sessions[scope]?.unheardCreates = session.unheardCreates
            if released { signal.uploadsPending() }
            try await importEnded(scope)
        case .willSendChanges:
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

    /// Zones that appeared or went away in a database: a share's zone appearing is mirrored from
    /// now on; the primary zone deleted follows the zone deletion policy; a zone shared with this
    /// user that went away (unshared, deleted) takes its local copy with it.
    private func databaseChanged(_ changes: SyncEngine.Event.FetchedDatabaseChanges, scope: DatabaseScope) async throws {
        startTracking(\.importTracker, .import, in: scope)
        let appeared = changes.modifications.filter { $0 != zoneID }
        if !appeared.isEmpty {
            try await transaction { transaction in
                for zone in appeared { try transaction.adoptZone(zone) }
            }
        }
        for deletion in changes.deletions {
            if deletion.zoneID == zoneID {
                try await zoneDeleted(reason: deletion.reason)
            } else {
                try await shareZoneDeleted(deletion.zoneID, reason: deletion.reason)
            }
        }
    }

    /// Applies one fetched page and stores the token it brought, in one transaction.
    private func applyFetched(_ page: SyncEngine.Event.FetchedRecordZoneChanges, scope: DatabaseScope) async throws {
        startTracking(\.importTracker, .import, in: scope)
        if sessions[scope]?.fromScratch[page.zoneID] != nil {
            for record in page.modifications { sessions[scope]?.fromScratch[page.zoneID]?.insert(record.recordName) }
        }
        let (modifications, deletions, state, zone) = (page.modifications, page.deletions, page.stateSerialization, page.zoneID)
        let deletedBefore = sessions[scope]?.deletedInFetch ?? []
        let key = Self.stateKey(scope)
        let (deleted, counts) = try await transaction { transaction in
            transaction.deletedOnServer = deletedBefore
            try transaction.applyFetched(modifications, deletions: deletions, in: zone)
            try transaction.saveEngineState(state, as: key)
            return transaction.deletedOnServer
        }
        sessions[scope]?.deletedInFetch = deleted
        sessions[scope]?.savedState = state
        if let current = sessions[scope]?.importTracker?.counts { sessions[scope]?.importTracker?.counts = current + counts }
        logger.info(
            "applied fetched changes",
            metadata: [
                "zone": "\(zone)", "count": "\(modifications.count + deletions.count)", "conflicts": "\(counts.conflicts)",
            ])
        reportProgress(scope, \.importTracker, "import progress")
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

    private func zoneChangesSent(_ sent: SyncEngine.Event.SentDatabaseChanges) async throws {
        for failure in sent.failedZoneSaves {
            fail(PersistentCloudContainer.SyncFailure(failure.error))
        }
        let saved = sent.savedZones.map(\.zoneID)
        guard !saved.isEmpty else { return }
        for zone in saved { signal.setZoneSaved(zone, true) }
        let primary = zoneID
        try await transaction { transaction in
            for zone in saved {
                if zone == primary {
                    try transaction.db.setMirrorState(.zoneSaved, encoding: true)
                } else if var row = try transaction.db.mirrorZone(zone) {
                    row.saved = true
                    try transaction.db.save(row)
                }
            }
        }
    }

    /// Settles a batch the server answered, and stores the engine's state, in one transaction.
    private func acknowledge(_ sent: SyncEngine.Event.SentRecordZoneChanges, scope: DatabaseScope) async throws {
        startTracking(\.exportTracker, .export, in: scope)
        let uploads = inFlight
        let key = Self.stateKey(scope)
        let ((missing, refused, refusedShares), counts) = try await transaction { transaction in
            let missing = try transaction.acknowledge(sent, uploads: uploads, stateKey: key)
            return (missing, transaction.refused, transaction.refusedShares)
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
            inFlight[recordID] = nil
            sessions[scope]?.unheardCreates.heard(recordID.recordName)
        }
        if let current = sessions[scope]?.exportTracker?.counts { sessions[scope]?.exportTracker?.counts = current + counts }
        reportProgress(scope, \.exportTracker, "export progress")
        for (name, error) in refused.sorted(by: { $0.key < $1.key }) {
            var failure = PersistentCloudContainer.SyncFailure(error)
            failure.recordName = name
            fail(failure)
            logger.error("the server refused an upload", metadata: ["record": "\(name)", "error": "\(error)"])
        }
        for zone in missing.sorted(by: { $0.description < $1.description }) { try await recreateZone(zone) }
    }

    /// A zone is gone from the server: the primary zone or an owned share's is created again and
    /// everything in it uploaded; a zone shared with this user is gone for good (its owner deleted it).
    private func recreateZone(_ zone: ZoneID) async throws {
        if zone != zoneID, zone.ownerRecordName != nil {
            try await shareZoneDeleted(zone, reason: .deleted)
            return
        }
        logger.warning("the zone is missing on the server; creating it and uploading everything", metadata: ["zone": "\(zone)"])
        signal.setZoneSaved(zone, false)
        let primary = zoneID
        try await transaction { transaction in
            if zone == primary {
                try transaction.db.setMirrorState(.zoneSaved, encoding: false)
                try transaction.uploadEverythingAgain()
            } else if var row = try transaction.db.mirrorZone(zone) {
                row.saved = false
                try transaction.db.save(row)
                try transaction.uploadEverythingAgain(in: row.key)
            }
        }
    }

    /// After a fetch from scratch: objects of the zone that are on the server no more (their
    /// tombstones were compacted away) and not changed here are removed locally. Only the unseen
    /// records are loaded, so a bootstrap's memory does not grow with the store.
    private func removeUnseen(_ seen: Set<String>, in zone: ZoneID) async throws {
        try await transaction { transaction in
            let key = transaction.key(zone)
            for name in try transaction.db.settledRecordNames(in: key, where: { !seen.contains($0) }) {
                // Removing one object can remove or change others' rows (links), so each is read afresh.
                guard let row = try transaction.db.recordMetadata(name), row.zone == key, row.isOnServer, row.pendingUpload == nil else {
                    continue
                }
                try transaction.removeLocalCopy(of: row)
            }
        }
    }

    private func zoneDeleted(reason: Zone.DeletionReason) async throws {
        let policy = reason == .deleted ? options.zoneDeletionPolicy : .deleteLocalData
        logger.notice(
            "the zone was deleted on the server",
            metadata: ["zone": "\(zoneID.zoneName)", "reason": "\(reason)", "policy": "\(policy)"])
        switch policy {
        case .deleteLocalData:
            signal.setZoneSaved(zoneID, false)
            try await transaction { transaction in
                try transaction.db.setMirrorState(.zoneSaved, encoding: false)
                try transaction.deleteMirroredData()
            }
        case .reupload:
            try await recreateZone(zoneID)
        }
    }

    /// A share's zone went away: a zone shared with this user is unshared (removed, the share
    /// stopped, left) or deleted by its owner, and its local copy goes, with the uploads it still
    /// had logged as lost; an owned share's zone deleted on another device of this user goes too.
    private func shareZoneDeleted(_ zone: ZoneID, reason: Zone.DeletionReason) async throws {
        logger.notice("a shared zone went away", metadata: ["zone": "\(zone)", "reason": "\(reason)"])
        try await transaction { transaction in
            guard let row = try transaction.db.mirrorZone(zone) else { return }
            try transaction.removeZoneData(row)
        }
    }

    private func accountChanged(_ change: SyncEngine.Event.AccountChange.ChangeType) async throws {
        logger.notice("account changed", metadata: ["change": "\(change)"])
        switch change {
        case .signIn(let user):
            try await transaction { transaction in
                try transaction.db.setMirrorState(.userRecordName, encoding: user)
                try transaction.db.setMirrorState(.accountStatus, nil)
            }
        case .signOut:
            fail(PersistentCloudContainer.SyncFailure(code: .authenticationFailed, message: ContainerError.credentialsRejected))
            try await transaction { try $0.db.setMirrorState(.accountStatus, encoding: "signedOut") }
        case .switchAccounts(_, let current):
            signal.setZoneSaved(zoneID, false)
            let policy = options.accountChangePolicy
            try await transaction { transaction in
                try transaction.db.setMirrorState(.userRecordName, encoding: current)
                try transaction.db.setMirrorState(.accountStatus, nil)
                try transaction.db.setMirrorState(.zoneSaved, encoding: false)
                switch policy {
                case .replaceLocalData: try transaction.deleteMirroredData(allZones: true)
                case .keepLocalData:
                    // Another user's shares are not this user's to keep; this user's own objects
                    // all go back to the primary zone of the new account.
                    try transaction.dropShares()
                    try transaction.uploadEverythingAgain()
                }
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

    private func requestFailed(_ error: CloudError) {
        fail(PersistentCloudContainer.SyncFailure(error))
    }

    func fail(_ failure: PersistentCloudContainer.SyncFailure) {
        lastFailure = failure
        for scope in Array(sessions.keys) {
            if sessions[scope]?.importTracker != nil { sessions[scope]?.importTracker?.failure = failure }
            if sessions[scope]?.exportTracker != nil { sessions[scope]?.exportTracker?.failure = failure }
        }
        let message = failure.description
        let date = failure.date
        Task { [store] in
            try? await store.write(author: MirrorAuthor.import) { context in
                try context.db.setMirrorState(.lastError, encoding: message)
                try context.db.setMirrorState(.lastErrorDate, encoding: date)
            }
        }
    }

    var currentFailure: PersistentCloudContainer.SyncFailure? { lastFailure }

    /// The server's refusal of a share change of `zone`, once.
    func takeShareRefusal(_ zone: ZoneID) -> ServerError? {
        shareRefusals.removeValue(forKey: zone)
    }
}
