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
    let zoneID: ZoneID
    let options: PersistentCloudContainer.Options
    let logger: Logger
    let events: EventHub
    let signal: PendingUploadSignal
    private(set) var engine: SyncEngine?
    /// This device's ID as the server records it in `modified.deviceID`.
    private var deviceID: String?
    /// What each upload in flight carried, until the server answers.
    private var inFlight: [String: SentUpload] = [:]
    /// The engine state last saved, so an unchanged one is not written again.
    private var savedEngineState: SyncEngine.State.Serialization?
    /// Record names seen while a zone is fetched from scratch.
    private var fromScratch: Set<String>?
    /// Objects whose tombstones the fetch under way brought (see ``MirrorTransaction/deletedOnServer``).
    private var deletedInFetch: Set<UUID> = []
    /// Creates handed out and never answered, held back until a fetch covers them.
    private var unheardCreates = UnheardCreates()
    /// Whether the store's zone failed to fetch in the fetch under way.
    private var zoneFetchFailed = false
    /// Whether a fetch was asked for to release held-back creates (automatic sync only).
    private var fetchRequested = false
    private var importTracker: EventTracker?
    private var exportTracker: EventTracker?
    private var lastFailure: PersistentCloudContainer.SyncFailure?

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
        self.signal = PendingUploadSignal(zoneID: zoneID)
    }

    // MARK: Start and stop

    /// Records pending uploads from now on, prepares the metadata (migrating a store the previous
    /// core wrote) and makes the engine.
    func start(database: (any CloudDatabase)?, deviceID: String?) async throws {
        self.deviceID = deviceID
        var setup = EventTracker(.setup)
        events.send(setup.started)
        do {
            store.add(PendingUploadRecorder(schema: schema, signal: signal))
            let (store, schema, zoneID, policy, logger) = (store, schema, zoneID, options.conflictPolicy, logger)
            let now = store.configuration.now()
            let (saved, zoneSaved, pending, unheard) = try await store.write(author: MirrorAuthor.import) { context in
                let firstMirroring = try MirrorMetadata.prepare(context, store: store, schema: schema)
                if firstMirroring {
                    // Objects saved before the store first mirrored: each is an upload to make,
                    // recorded in the transaction that turns mirroring on.
                    try MirrorTransaction(
                        context: context, schema: schema, zoneID: zoneID, policy: policy, deviceID: deviceID, now: now,
                        logger: logger
                    ).uploadEverythingAgain()
                }
                return (
                    try context.db.mirrorState(.engineState, as: SyncEngine.State.Serialization.self),
                    try context.db.mirrorState(.zoneSaved, as: Bool.self) ?? false,
                    try context.db.pendingUploadCount(),
                    try context.db.unheardCreateNames()
                )
            }
            savedEngineState = saved
            unheardCreates = UnheardCreates(waiting: unheard)
            if let database { makeEngine(database, state: saved, zoneSaved: zoneSaved, pendingUploads: pending) }
            events.send(setup.ended())
            logger.notice(
                "mirroring set up",
                metadata: ["zone": "\(zoneID.zoneName)", "server": "\(database != nil)", "count": "\(pending)"])
        } catch {
            setup.failure = PersistentCloudContainer.SyncFailure(message: "\(error)")
            events.send(setup.ended())
            throw error
        }
    }

    private func makeEngine(
        _ database: any CloudDatabase, state: SyncEngine.State.Serialization?, zoneSaved: Bool, pendingUploads: Int
    ) {
        let observed = ObservedDatabase(base: database) { [weak self] error in
            Task { await self?.requestFailed(error) }
        }
        var configuration = SyncEngine.Configuration(
            database: observed, stateSerialization: state, delegate: self, automaticallySync: options.automaticallySync)
        var engineLogger = Logger(label: "cloudstore.sync")
        engineLogger.logLevel = logger.logLevel
        configuration.logger = engineLogger
        configuration.sendDebounce = options.exportDebounce
        configuration.maxSendDelay = max(options.exportDebounce * 10, .milliseconds(500))
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
        self.engine = engine
        // The record metadata is the queue; a state saved by the previous core listed them too.
        engine.state.remove(pendingRecordZoneChanges: engine.state.pendingRecordZoneChanges)
        signal.attach(engine.state, zoneSaved: zoneSaved)
        if pendingUploads > 0 { signal.uploadsPending() }
    }

    func stop() async {
        await engine?.cancelOperations()
        engine = nil
    }

    // MARK: Transactions

    /// Runs mirroring work in one store transaction, then tells the engine if uploads are pending.
    @discardableResult
    private func transaction<T: Sendable>(
        _ body: @escaping @Sendable (MirrorTransaction) throws -> T
    ) async throws -> (value: T, counts: MirrorCounts) {
        let (schema, zoneID, policy, deviceID, logger) = (schema, zoneID, options.conflictPolicy, deviceID, logger)
        let now = store.configuration.now()
        let (value, counts, pending) = try await store.write(author: MirrorAuthor.import) { context in
            let transaction = MirrorTransaction(
                context: context, schema: schema, zoneID: zoneID, policy: policy, deviceID: deviceID, now: now,
                logger: logger)
            let value = try body(transaction)
            return (value, transaction.counts, transaction.hasPendingUploads)
        }
        if pending { signal.uploadsPending() }
        return (value, counts)
    }

    // MARK: SyncEngineDelegate

    /// The next pending uploads from the record metadata, in upload order, without the records the
    /// engine skips in this pass. The engine is told whether more may be pending.
    func nextRecordZoneChangeBatch(
        _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.RecordZoneChangeBatch? {
        guard context.options.scope.contains(zoneID) else { return nil }
        let held = unheardCreates.waiting
        let skipping = Set(context.recordIDsToSkip.filter { $0.zoneID == zoneID }.map(\.recordName)).union(held)
        if !held.isEmpty { requestFetch(syncEngine) }
        // Cleared before reading, so a save committed after the read sets it again.
        syncEngine.state.hasPendingUntrackedChanges = false
        let prepared: [PreparedUpload]
        do {
            prepared = try await transaction { try $0.prepareUploads(limit: context.maxRecordCount, skipping: skipping) }.value
        } catch {
            logger.error("reading the pending uploads failed", metadata: ["error": "\(error)"])
            syncEngine.state.hasPendingUntrackedChanges = true
            return nil
        }
        let uploads = prepared.filter { context.options.scope.contains($0.change) }
        guard !uploads.isEmpty else { return nil }
        syncEngine.state.hasPendingUntrackedChanges = true
        let records = Dictionary(uniqueKeysWithValues: uploads.compactMap { upload in upload.record.map { ($0.recordName, $0) } })
        let batch = await SyncEngine.RecordZoneChangeBatch(pendingChanges: uploads.map(\.change)) { recordID in
            records[recordID.recordName]
        }
        // What the batch holds (it stops at the engine's size limit) is what is handed out.
        let sent = Dictionary(uniqueKeysWithValues: uploads.map { ($0.change.recordID.recordName, $0.sent) })
        for record in batch?.recordsToSave ?? [] {
            inFlight[record.recordName] = sent[record.recordName]
            if record.recordChangeTag == nil { unheardCreates.handedOut(record.recordName) }
        }
        for recordID in batch?.recordIDsToDelete ?? [] { inFlight[recordID.recordName] = sent[recordID.recordName] }
        logger.info(
            "uploads handed out",
            metadata: ["zone": "\(zoneID.zoneName)", "count": "\((batch?.recordsToSave.count ?? 0) + (batch?.recordIDsToDelete.count ?? 0))"])
        return batch
    }

    /// The store's own file of an asset, when it holds those bytes already: the engine does not
    /// download them again.
    nonisolated func existingFile(for asset: Asset, syncEngine: SyncEngine) async -> URL? {
        store.externalDataURL(for: ExternalData(checksum: asset.fileChecksum, size: asset.size))
    }

    /// How many creates wait for a fetch before they go out again.
    var heldBackCreates: Int { unheardCreates.waiting.count }

    /// Asks the engine for a fetch, so creates held back until one covers them go out soon. Only
    /// when syncing automatically: otherwise the app drives fetches (`sync()` fetches after it sends).
    private func requestFetch(_ engine: SyncEngine) {
        guard options.automaticallySync, !fetchRequested else { return }
        fetchRequested = true
        Task { try? await engine.fetchChanges() }
    }

    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
        do {
            try await handle(event)
        } catch let error as StoreError where error.code == .closed {
            // The container closed while the engine was finishing a step: nothing is lost (the
            // step's work was not committed and is done again on the next open).
            logger.debug("sync event after the store closed", metadata: ["event": "\(event)"])
        } catch {
            logger.error("mirroring could not handle a sync event", metadata: ["event": "\(event)", "error": "\(error)"])
            lastFailure = PersistentCloudContainer.SyncFailure(message: "\(error)")
        }
    }

    private func handle(_ event: SyncEngine.Event) async throws {
        switch event {
        case .stateUpdate(let update):
            try await saveEngineState(update.stateSerialization)
        case .accountChange(let change):
            try await accountChanged(change.changeType)
        case .fetchedDatabaseChanges(let changes):
            if let deletion = changes.deletions.first(where: { $0.zoneID == zoneID }) {
                try await zoneDeleted(reason: deletion.reason)
            }
        case .fetchedRecordZoneChanges(let page):
            try await applyFetched(page)
        case .sentDatabaseChanges(let sent):
            try await zoneChangesSent(sent)
        case .sentRecordZoneChanges(let sent):
            try await acknowledge(sent)
        case .willFetchChanges:
            deletedInFetch = []
            unheardCreates.fetchBegan()
            zoneFetchFailed = false
            fetchRequested = false
            let tracker = EventTracker(.import)
            importTracker = tracker
            events.send(tracker.started)
        case .willFetchRecordZoneChanges(let event):
            if event.zoneID == zoneID && event.fromScratch { fromScratch = [] }
        case .didFetchRecordZoneChanges(let event):
            guard event.zoneID == zoneID else { return }
            if let seen = fromScratch, event.error == nil { try await removeUnseen(seen) }
            fromScratch = nil
            if let error = event.error {
                // A zone that is not on the server holds none of this device's creates either.
                if error.code != .zoneNotFound { zoneFetchFailed = true }
                importTracker?.failure = PersistentCloudContainer.SyncFailure(error)
            }
        case .didFetchChanges(let event):
            let held = unheardCreates.waiting.count
            unheardCreates.fetchEnded(completed: event.error == nil && !zoneFetchFailed)
            if unheardCreates.waiting.count < held { signal.uploadsPending() }
            try await importEnded()
        case .willSendChanges:
            let pending = try await store.read { try $0.db.pendingUploadCount() }
            let tracker = EventTracker(.export, total: pending)
            exportTracker = tracker
            events.send(tracker.started)
        case .didSendChanges:
            try await exportEnded()
        }
    }

    private func saveEngineState(_ state: SyncEngine.State.Serialization) async throws {
        guard state != savedEngineState else { return }
        try await transaction { try $0.saveEngineState(state) }
        savedEngineState = state
    }

    /// Applies one fetched page and stores the token it brought, in one transaction.
    private func applyFetched(_ page: SyncEngine.Event.FetchedRecordZoneChanges) async throws {
        guard page.zoneID == zoneID else { return }
        if fromScratch != nil {
            for record in page.modifications { fromScratch?.insert(record.recordName) }
        }
        let (modifications, deletions, state) = (page.modifications, page.deletions, page.stateSerialization)
        let deletedBefore = deletedInFetch
        let (deleted, counts) = try await transaction { transaction in
            transaction.deletedOnServer = deletedBefore
            try transaction.applyFetched(modifications, deletions: deletions)
            try transaction.saveEngineState(state)
            return transaction.deletedOnServer
        }
        deletedInFetch = deleted
        savedEngineState = state
        if let current = importTracker?.counts { importTracker?.counts = current + counts }
        logger.info(
            "applied fetched changes",
            metadata: [
                "zone": "\(zoneID.zoneName)", "count": "\(modifications.count + deletions.count)",
                "conflicts": "\(counts.conflicts)",
            ])
        reportProgress(&importTracker, "import progress")
    }

    /// Reports work under way: an event after each batch or page, and a level-1 line with the
    /// running totals and rate at most every two seconds.
    private func reportProgress(_ tracker: inout EventTracker?, _ message: Logger.Message) {
        guard var current = tracker else { return }
        events.send(current.progressed)
        let now = Date()
        if current.pacing.due(at: now, startedAt: current.startDate) {
            logger.notice(message, metadata: current.progressMetadata(at: now))
        }
        tracker = current
    }

    private func zoneChangesSent(_ sent: SyncEngine.Event.SentDatabaseChanges) async throws {
        for failure in sent.failedZoneSaves {
            fail(PersistentCloudContainer.SyncFailure(failure.error))
        }
        guard sent.savedZones.contains(where: { $0.zoneID == zoneID }) else { return }
        signal.setZoneSaved(true)
        try await transaction { try $0.db.setMirrorState(.zoneSaved, encoding: true) }
    }

    /// Settles a batch the server answered, and stores the engine's state, in one transaction.
    private func acknowledge(_ sent: SyncEngine.Event.SentRecordZoneChanges) async throws {
        let uploads = inFlight
        let ((zoneMissing, refused), counts) = try await transaction { transaction in
            let zoneMissing = try transaction.acknowledge(sent, uploads: uploads)
            return (zoneMissing, transaction.refused)
        }
        savedEngineState = sent.stateSerialization
        let answered =
            sent.savedRecords.map(\.recordName) + sent.deletedRecordIDs.map(\.recordName)
            + sent.failedRecordSaves.map(\.record.recordName) + sent.failedRecordDeletes.keys.map(\.recordName)
        for name in answered {
            inFlight[name] = nil
            unheardCreates.heard(name)
        }
        if let current = exportTracker?.counts { exportTracker?.counts = current + counts }
        reportProgress(&exportTracker, "export progress")
        for (name, error) in refused.sorted(by: { $0.key < $1.key }) {
            var failure = PersistentCloudContainer.SyncFailure(error)
            failure.recordName = name
            fail(failure)
            logger.error("the server refused an upload", metadata: ["record": "\(name)", "error": "\(error)"])
        }
        if zoneMissing { try await recreateZone() }
    }

    /// The zone is gone from the server: create it again and upload everything.
    private func recreateZone() async throws {
        logger.warning(
            "the zone is missing on the server; creating it and uploading everything", metadata: ["zone": "\(zoneID.zoneName)"])
        signal.setZoneSaved(false)
        try await transaction { transaction in
            try transaction.db.setMirrorState(.zoneSaved, encoding: false)
            try transaction.uploadEverythingAgain()
        }
    }

    /// After a fetch from scratch: objects that are on the server no more (their tombstones were
    /// compacted away) and not changed here are removed locally. Only the unseen records are
    /// loaded, so a bootstrap's memory does not grow with the store.
    private func removeUnseen(_ seen: Set<String>) async throws {
        try await transaction { transaction in
            for name in try transaction.db.settledRecordNames(where: { !seen.contains($0) }) {
                // Removing one object can remove or change others' rows (links), so each is read afresh.
                guard let row = try transaction.db.recordMetadata(name), row.isOnServer, row.pendingUpload == nil else {
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
            signal.setZoneSaved(false)
            try await transaction { transaction in
                try transaction.db.setMirrorState(.zoneSaved, encoding: false)
                try transaction.deleteMirroredData()
            }
        case .reupload:
            try await recreateZone()
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
            signal.setZoneSaved(false)
            let policy = options.accountChangePolicy
            try await transaction { transaction in
                try transaction.db.setMirrorState(.userRecordName, encoding: current)
                try transaction.db.setMirrorState(.accountStatus, nil)
                try transaction.db.setMirrorState(.zoneSaved, encoding: false)
                switch policy {
                case .replaceLocalData: try transaction.deleteMirroredData()
                case .keepLocalData: try transaction.uploadEverythingAgain()
                }
            }
        }
    }

    private func importEnded() async throws {
        deletedInFetch = []
        guard let tracker = importTracker else { return }
        importTracker = nil
        try await ended(tracker, recordingAt: .lastImport, "import finished")
    }

    private func exportEnded() async throws {
        guard let tracker = exportTracker else { return }
        exportTracker = nil
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

    private func fail(_ failure: PersistentCloudContainer.SyncFailure) {
        lastFailure = failure
        if importTracker != nil { importTracker?.failure = failure }
        if exportTracker != nil { exportTracker?.failure = failure }
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
}
