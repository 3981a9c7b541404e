import CloudStoreSync
import Foundation
import GRDB
import Logging

/// Mirrors one store through a sync engine: the delegate that turns local history into uploads and
/// fetched records into rows. One actor per container; the engine calls it serially.
actor CloudMirror: SyncEngineDelegate {
    let store: PersistentStore
    let schema: Schema
    let zoneID: ZoneID
    let options: PersistentCloudContainer.Options
    let logger: Logger
    let events: EventHub
    private(set) var engine: SyncEngine?
    /// What each record carried when it was put in a batch, to tell acknowledged edits from later ones.
    private var inFlight: [String: PendingExport] = [:]
    private var zoneSaved = false
    /// This device's ID as the server records it in `modified.deviceID`.
    private var deviceID: String?
    /// Record names seen while a zone is fetched from scratch.
    private var fromScratch: Set<String>?
    private var importTracker: EventTracker?
    private var exportTracker: EventTracker?
    /// Uploads the server refused for good in this session.
    private(set) var refusedUploads: [String: ServerError] = [:]
    private var lastFailure: PersistentCloudContainer.SyncFailure?
    private var exporting = false
    private var exportAgain = false
    private var observer: Task<Void, Never>?

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
    }

    // MARK: Start and stop

    /// Prepares the metadata, makes the engine and catches up with local history.
    func start(database: (any CloudDatabase)?, deviceID: String?) async throws {
        self.deviceID = deviceID
        var setup = EventTracker(.setup)
        events.send(setup.started)
        do {
            let (saved, zone) = try await store.write(author: MirrorAuthor.import) { context in
                try MirrorMetadata.create(context.db)
                return (
                    try context.db.mirrorState(.engineState, as: SyncEngine.State.Serialization.self),
                    try context.db.mirrorState(.zoneSaved, as: Bool.self) ?? false
                )
            }
            zoneSaved = zone
            if let database {
                let observed = ObservedDatabase(base: database) { [weak self] error in
                    Task { await self?.requestFailed(error) }
                }
                var configuration = SyncEngine.Configuration(
                    database: observed, stateSerialization: saved, delegate: self,
                    automaticallySync: options.automaticallySync)
                var engineLogger = Logger(label: "cloudstore.sync")
                engineLogger.logLevel = logger.logLevel
                configuration.logger = engineLogger
                configuration.sendDebounce = options.exportDebounce
                configuration.maxSendDelay = max(options.exportDebounce * 10, .milliseconds(500))
                configuration.pollInterval = options.pollInterval
                configuration.fetchResultsLimit = options.fetchPageSize
                options.configureEngine?(&configuration)
                let engine = SyncEngine(configuration)
                self.engine = engine
                let pending = try await store.read { context in
                    try context.db.mirroredRecords(pendingOnly: true).map { ($0.recordName, $0.pending!) }
                }
                var work: [String: EngineWork] = [:]
                for (name, pending) in pending {
                    if case .delete = pending { work[name] = .delete } else { work[name] = .save }
                }
                hand(work)
            }
            try await exportLocalChanges()
            if options.automaticallySync { observeLocalCommits() }
            events.send(setup.ended())
            logger.notice("mirroring set up", metadata: ["zone": "\(zoneID.zoneName)", "server": "\(database != nil)"])
        } catch {
            setup.failure = PersistentCloudContainer.SyncFailure(message: "\(error)")
            events.send(setup.ended())
            throw error
        }
    }

    func stop() async {
        observer?.cancel()
        observer = nil
        await engine?.cancelOperations()
        engine = nil
    }

    /// Exports shortly after every local save that is not an import.
    private func observeLocalCommits() {
        let store = store
        let start = try? store.currentHistoryToken()
        observer = Task { [weak self] in
            do {
                for try await transaction in store.transactions(after: start) where transaction.author != MirrorAuthor.import {
                    guard let self else { return }
                    await self.localCommit()
                }
            } catch {
                self?.logger.warning("history observation stopped", metadata: ["error": "\(error)"])
            }
        }
    }

    private func localCommit() async {
        do {
            try await exportLocalChanges()
        } catch {
            logger.warning("export analysis failed", metadata: ["error": "\(error)"])
        }
    }

    // MARK: Transactions

    /// Runs mirroring work in one store transaction, then hands the engine what changed.
    @discardableResult
    private func transaction<T: Sendable>(
        _ body: @escaping @Sendable (MirrorTransaction) throws -> T
    ) async throws -> (value: T, counts: MirrorCounts) {
        let (schema, zoneID, policy, deviceID) = (schema, zoneID, options.conflictPolicy, deviceID)
        let (value, work, counts) = try await store.write(author: MirrorAuthor.import) { context in
            let transaction = MirrorTransaction(
                context: context, schema: schema, zoneID: zoneID, policy: policy, deviceID: deviceID, now: Date())
            let value = try body(transaction)
            return (value, transaction.engineWork, transaction.counts)
        }
        hand(work)
        return (value, counts)
    }

    /// Tells the engine what it must have pending, saving the zone first if it is not on the server.
    private func hand(_ work: [String: EngineWork]) {
        guard let engine, !work.isEmpty else { return }
        let (add, remove) = EngineWork.changes(work, zoneID: zoneID)
        engine.state.remove(pendingRecordZoneChanges: remove)
        if !add.isEmpty && !zoneSaved {
            engine.state.add(pendingDatabaseChanges: [.saveZone(zoneID)])
        }
        engine.state.add(pendingRecordZoneChanges: add)
    }

    // MARK: Export

    /// Folds local history since the last export into pending uploads. Concurrent calls coalesce.
    func exportLocalChanges() async throws {
        if exporting {
            exportAgain = true
            return
        }
        exporting = true
        defer { exporting = false }
        repeat {
            exportAgain = false
            var complete = false
            while !complete {
                let store = store
                do {
                    complete = try await transaction { try $0.foldUnexportedHistory(of: store, limit: 500) }.value
                } catch let error as StoreError where error.code == .historyTokenExpired {
                    logger.warning("history was purged past the last export; comparing every object with the server copy")
                    let current = try store.currentHistoryToken()
                    try await transaction { transaction in
                        try transaction.markEverythingForUpload(forgetServer: false)
                        try transaction.db.setMirrorState(.exportedThrough, encoding: current)
                    }
                    complete = true
                }
            }
        } while exportAgain
    }

    // MARK: SyncEngineDelegate

    func nextRecordZoneChangeBatch(
        _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.RecordZoneChangeBatch? {
        let pending = syncEngine.state.pendingRecordZoneChanges.filter { context.options.scope.contains($0) }
        guard !pending.isEmpty else { return nil }
        let names = pending.prefix(SyncEngine.Configuration.defaultMaxBatchCount).compactMap { change -> String? in
            if case .saveRecord(let id) = change { return id.recordName }
            return nil
        }
        let (schema, zoneID) = (schema, zoneID)
        let prepared: [String: (Record, PendingExport)]
        do {
            prepared = try await store.read { context in
                var records: [String: (Record, PendingExport)] = [:]
                for name in names {
                    if let upload = try context.recordToUpload(name, schema: schema, zoneID: zoneID) { records[name] = upload }
                }
                return records
            }
        } catch {
            logger.error("reading records to upload failed", metadata: ["error": "\(error)"])
            return nil
        }
        let stale = names.filter { prepared[$0] == nil }.map { SyncEngine.PendingRecordZoneChange.saveRecord(RecordID(recordName: $0, zoneID: zoneID)) }
        if !stale.isEmpty { syncEngine.state.remove(pendingRecordZoneChanges: stale) }
        for (name, upload) in prepared { inFlight[name] = upload.1 }
        let records = prepared.mapValues { $0.0 }
        return await SyncEngine.RecordZoneChangeBatch(pendingChanges: pending.filter { !stale.contains($0) }) { recordID in
            records[recordID.recordName]
        }
    }

    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
        do {
            try await handle(event)
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
            guard page.zoneID == zoneID else { return }
            if fromScratch != nil {
                for record in page.modifications { fromScratch?.insert(record.recordName) }
            }
            let state = page.stateSerialization
            let (modifications, deletions) = (page.modifications, page.deletions)
            let store = store
            let (_, counts) = try await transaction { transaction in
                // Local saves export has not folded yet become pending first, in this transaction, so
                // the merge sees them: otherwise a fetched record would overwrite them unnoticed.
                try transaction.foldAllUnexportedHistory(of: store)
                try transaction.applyFetched(modifications, deletions: deletions)
                try transaction.db.setMirrorState(.engineState, encoding: state)
            }
            if let current = importTracker?.counts { importTracker?.counts = current + counts }
            logger.info(
                "applied fetched changes",
                metadata: ["zone": "\(zoneID.zoneName)", "count": "\(modifications.count + deletions.count)"])
        case .sentDatabaseChanges(let sent):
            if sent.savedZones.contains(where: { $0.zoneID == zoneID }) {
                zoneSaved = true
                try await store.write(author: MirrorAuthor.import) { context in
                    try context.db.setMirrorState(.zoneSaved, encoding: true)
                }
            }
            for failure in sent.failedZoneSaves {
                fail(PersistentCloudContainer.SyncFailure(failure.error))
            }
        case .sentRecordZoneChanges(let sent):
            try await acknowledge(sent)
        case .willFetchChanges:
            let tracker = EventTracker(.import)
            importTracker = tracker
            events.send(tracker.started)
        case .willFetchRecordZoneChanges(let event):
            if event.zoneID == zoneID && event.fromScratch { fromScratch = [] }
        case .didFetchRecordZoneChanges(let event):
            guard event.zoneID == zoneID else { return }
            if let seen = fromScratch, event.error == nil { try await removeUnseen(seen) }
            fromScratch = nil
            if let error = event.error { importTracker?.failure = PersistentCloudContainer.SyncFailure(error) }
        case .didFetchChanges:
            guard let tracker = importTracker else { return }
            importTracker = nil
            if tracker.failure == nil {
                try await store.write(author: MirrorAuthor.import) { context in
                    try context.db.setMirrorState(.lastImport, encoding: Date())
                }
            }
            events.send(tracker.ended())
            logger.notice(
                "import finished",
                metadata: ["saved": "\(tracker.counts.saved)", "deleted": "\(tracker.counts.deleted)",
                           "conflicts": "\(tracker.counts.conflicts)",
                           "duration": "\(Date().timeIntervalSince(tracker.startDate))s"])
        case .willSendChanges:
            let tracker = EventTracker(.export)
            exportTracker = tracker
            events.send(tracker.started)
        case .didSendChanges:
            guard let tracker = exportTracker else { return }
            exportTracker = nil
            if tracker.failure == nil {
                try await store.write(author: MirrorAuthor.import) { context in
                    try context.db.setMirrorState(.lastExport, encoding: Date())
                }
            }
            events.send(tracker.ended())
            logger.notice(
                "export finished",
                metadata: ["saved": "\(tracker.counts.saved)", "deleted": "\(tracker.counts.deleted)",
                           "failed": "\(tracker.counts.failed)",
                           "duration": "\(Date().timeIntervalSince(tracker.startDate))s"])
        }
    }

    private func saveEngineState(_ state: SyncEngine.State.Serialization) async throws {
        try await store.write(author: MirrorAuthor.import) { context in
            try context.db.setMirrorState(.engineState, encoding: state)
        }
    }

    private func acknowledge(_ sent: SyncEngine.Event.SentRecordZoneChanges) async throws {
        let inFlight = inFlight
        let state = sent.stateSerialization
        let ((zoneMissing, refused), counts) = try await transaction { transaction in
            var zoneMissing = false
            var refused: [String: ServerError] = [:]
            for record in sent.savedRecords {
                try transaction.acknowledgeSave(of: record, sent: inFlight[record.recordName])
            }
            for recordID in sent.deletedRecordIDs {
                try transaction.acknowledgeDelete(of: recordID)
            }
            for (recordID, error) in sent.failedRecordDeletes {
                if error.serverErrorCode == .notFound {
                    try transaction.acknowledgeDelete(of: recordID)
                } else if error.serverErrorCode == .zoneNotFound {
                    zoneMissing = true
                } else {
                    refused[recordID.recordName] = error
                }
            }
            for failure in sent.failedRecordSaves {
                switch try transaction.resolveFailedSave(
                    failure.record, error: failure.error, sent: inFlight[failure.record.recordName])
                {
                case .handled: break
                case .zoneMissing: zoneMissing = true
                case .failed(let error): refused[failure.record.recordName] = error
                }
            }
            try transaction.logOrphans()
            try transaction.db.setMirrorState(.engineState, encoding: state)
            return (zoneMissing, refused)
        }
        for record in sent.savedRecords { self.inFlight[record.recordName] = nil }
        for failure in sent.failedRecordSaves { self.inFlight[failure.record.recordName] = nil }
        if let current = exportTracker?.counts { exportTracker?.counts = current + counts }
        for (name, error) in refused {
            refusedUploads[name] = error
            var failure = PersistentCloudContainer.SyncFailure(error)
            failure.recordName = name
            exportTracker?.failure = failure
            fail(failure)
            logger.error("the server refused an upload", metadata: ["record": "\(name)", "error": "\(error)"])
        }
        if zoneMissing { try await recreateZone() }
    }

    /// The zone is gone from the server: create it again and upload everything.
    private func recreateZone() async throws {
        logger.warning("the zone is missing on the server; creating it and uploading everything", metadata: ["zone": "\(zoneID.zoneName)"])
        zoneSaved = false
        try await transaction { transaction in
            try transaction.db.setMirrorState(.zoneSaved, encoding: false)
            try transaction.markEverythingForUpload(forgetServer: true)
        }
        engine?.state.add(pendingDatabaseChanges: [.saveZone(zoneID)])
    }

    /// After a fetch from scratch: objects that are on the server no more (their tombstones were
    /// compacted away) and not changed here are removed locally. Only the unseen records are
    /// loaded, so a bootstrap's memory does not grow with the store.
    private func removeUnseen(_ seen: Set<String>) async throws {
        try await transaction { transaction in
            for name in try transaction.db.settledRecordNames(where: { !seen.contains($0) }) {
                // Removing one object can remove or change others' rows (links), so each is read afresh.
                guard let row = try transaction.db.mirroredRecord(name), row.isOnServer, row.pending == nil else { continue }
                try transaction.removeLocalCopy(of: row)
            }
        }
    }

    private func zoneDeleted(reason: Zone.DeletionReason) async throws {
        let policy = reason == .purged ? .deleteLocalData : options.zoneDeletionPolicy
        logger.notice("the zone was deleted on the server", metadata: ["zone": "\(zoneID.zoneName)", "reason": "\(reason)", "policy": "\(policy)"])
        zoneSaved = false
        switch policy {
        case .deleteLocalData:
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
            try await store.write(author: MirrorAuthor.import) { context in
                try context.db.setMirrorState(.userRecordName, encoding: user)
                try context.db.setMirrorState(.accountStatus, nil)
            }
        case .signOut:
            fail(PersistentCloudContainer.SyncFailure(
                code: .authenticationFailed,
                message: "the server rejected the credentials; local data and pending changes are kept until a valid token is given"))
            try await store.write(author: MirrorAuthor.import) { context in
                try context.db.setMirrorState(.accountStatus, encoding: "signedOut")
            }
        case .switchAccounts(_, let current):
            zoneSaved = false
            let policy = options.accountChangePolicy
            try await transaction { transaction in
                try transaction.db.setMirrorState(.userRecordName, encoding: current)
                try transaction.db.setMirrorState(.accountStatus, nil)
                try transaction.db.setMirrorState(.zoneSaved, encoding: false)
                switch policy {
                case .replaceLocalData: try transaction.deleteMirroredData()
                case .keepLocalData: try transaction.markEverythingForUpload(forgetServer: true)
                }
            }
        }
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
