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
/// ``MirrorWrite``: fetched records, acknowledgements and the engine's state commit together.
/// What a change of a zone or of the account does is decided by ``MirrorPlan``, a pure value; this
/// actor runs its steps.
actor CloudMirror: SyncEngineDelegate {
    let store: PersistentStore
    let schema: Schema
    /// The primary zone: where every object that is not shared lives.
    let zoneID: ZoneID
    /// The entities mirrored in the public database.
    let publicEntities: PublicEntities
    let options: PersistentCloudContainer.Options
    let logger: Logger
    let events: EventHub
    let signal: PendingUploadSignal
    /// One engine per database, as CKSyncEngine: the private database's mirrors the primary zone
    /// and the shares this user owns, the shared database's the zones others shared with this
    /// user, and the public database's (with public entities) their records of every user.
    var engines: [DatabaseScope: SyncEngine] = [:]
    /// Each engine's bookkeeping of the fetch or send under way.
    var sessions: [DatabaseScope: EngineSession] = [:]
    /// This device's ID as the server records it in `modified.deviceID`.
    var deviceID: String?
    /// What each upload in flight carried, until the server answers.
    var inFlight: [RecordID: SentUpload] = [:]
    var lastFailure: PersistentCloudContainer.SyncFailure?
    /// Share changes the server refused for good, until the call that made them reads them.
    var shareRefusals: [ZoneID: ServerError] = [:]
    /// The databases the engines sync through, to make them again after a decision.
    var databases: [DatabaseScope: any CloudDatabase] = [:]
    /// The decision about local data that stops syncing until the app makes it: a copy of the
    /// one the store keeps (``MirrorStateKey/localDataDecision``), set once that is committed.
    /// The primary zone's saves wait while there is one.
    var pausedDecision: PersistentCloudContainer.LocalDataDecision? {
        didSet { signal.setZoneHeld(zoneID, pausedDecision != nil) }
    }
    /// The shares that ended while this device held unsent changes of them, by zone: copies of
    /// what their rows keep (``MirrorZone/ended``), set once that is committed. Their zones'
    /// uploads wait until the app decides.
    var endedShares: [ZoneID: PersistentCloudContainer.LocalDataDecision] = [:]
    /// Whether the store keeps a decision about an account change that the engine has not
    /// confirmed since the container opened: the credentials may be the previous user's again.
    var unconfirmedAccountDecision = false
    /// Where the primary zone stands on the server: a copy of what the store keeps
    /// (``MirrorStateKey/primaryZone``), set once the transaction that stored it committed.
    var primaryZone = ZoneServerState.unsaved
    /// What mirroring does when an engine reports a change of a zone or of the account.
    let plan: MirrorPlan
    /// Watches for other processes' commits to the store file (``watchOtherWriters()``).
    var otherWriters: Task<Void, Never>?
    /// Whether this device's copy was purged (``PersistentCloudContainer/PurgeScope/thisDevice``):
    /// syncing waits until the container is opened again.
    var purgedLocally = false
    /// The keys that seal and open encrypted attributes, once this device has the user's account
    /// key (``setUpEncryption(passphrase:)``): a copy of what the key store keeps.
    var keyring: EncryptionKeyring?
    /// Where users publish their identity keys for sharing encrypted attributes (the public
    /// database, ``UserKeyRecord``); nil when the schema has none, or without a server.
    var keyDirectory: (any CloudDatabase)?
    /// Whether the server was given this schema's uniqueness constraints in this process
    /// (``declareUniquenessConstraints(_:)``).
    var uniquenessDeclared = false

    /// The private database's engine.
    var engine: SyncEngine? { engines[.private] }

    /// What mirroring tracks for one engine between its events.
    struct EngineSession {
        /// The engine state last saved, so an unchanged one is not written again.
        var savedState: SyncEngine.State.Serialization?
        /// Record names seen while a zone is fetched from scratch, by zone.
        var fromScratch: [ZoneID: RecordNameSet] = [:]
        /// Objects whose tombstones the fetch under way brought (see ``MirrorWrite/deletedOnServer``).
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
        store: PersistentStore, schema: Schema, zoneID: ZoneID, publicEntities: PublicEntities = .none,
        options: PersistentCloudContainer.Options, events: EventHub, logger: Logger
    ) {
        self.store = store
        self.schema = schema
        self.zoneID = zoneID
        self.publicEntities = publicEntities
        self.options = options
        self.events = events
        self.logger = logger
        self.signal = PendingUploadSignal()
        self.plan = MirrorPlan(
            primaryZone: zoneID, zoneDeletionPolicy: options.zoneDeletionPolicy, accountChangePolicy: options.accountChangePolicy)
    }

    /// Where an engine's state is stored.
    static func stateKey(_ scope: DatabaseScope) -> MirrorStateKey {
        switch scope {
        case .private: .engineState
        case .shared: .sharedEngineState
        case .public: .publicEngineState
        }
    }

    /// Every database's engine state key.
    static let stateKeys = DatabaseScope.allCases.map(stateKey)

    // MARK: Start and stop

    /// Records pending uploads from now on, prepares the metadata (migrating a store the previous
    /// core wrote) and makes one engine per database given (private, and shared for sharing).
    func start(databases: [DatabaseScope: any CloudDatabase], keyDirectory: (any CloudDatabase)? = nil, deviceID: String?) async throws {
        self.deviceID = deviceID
        self.keyDirectory = keyDirectory
        var setup = EventTracker(.setup)
        events.send(setup.started)
        do {
            store.add(PendingUploadRecorder(schema: schema, primaryZone: zoneID, publicEntities: publicEntities, signal: signal))
            let (store, schema, zoneID, policy, logger) = (store, schema, zoneID, options.conflictPolicy, logger)
            let publicEntities = publicEntities
            let now = store.configuration.now()
            let (states, primaryZone, zones, pending, unheard, decision) = try await store.write(author: MirrorAuthor.import) { context in
                let firstMirroring = try MirrorTables.prepare(context, store: store, schema: schema)
                if firstMirroring {
                    // Objects saved before the store first mirrored: each is an upload to make,
                    // recorded in the transaction that turns mirroring on.
                    try MirrorWrite(
                        context: context, schema: schema, zoneID: zoneID, publicEntities: publicEntities, policy: policy,
                        deviceID: deviceID, now: now, logger: logger
                    ).uploadEverythingAgain()
                }
                if try context.db.mirrorState(.primaryZoneName, as: String.self) != zoneID.zoneName {
                    try context.db.setMirrorState(.primaryZoneName, encoding: zoneID.zoneName)
                }
                if try context.db.mirrorState(.publicEntities, as: [String].self) ?? [] != publicEntities.names.sorted() {
                    try context.db.setMirrorState(.publicEntities, encoding: publicEntities.names.sorted())
                }
                var states: [DatabaseScope: SyncEngine.State.Serialization] = [:]
                for scope in DatabaseScope.allCases {
                    states[scope] = try context.db.mirrorState(Self.stateKey(scope), as: SyncEngine.State.Serialization.self)
                }
                return (
                    states,
                    try context.db.primaryZoneState(),
                    try context.db.mirrorZones(),
                    try context.db.pendingUploadCount(),
                    try context.db.unheardCreateNames(),
                    try context.db.mirrorState(.localDataDecision, as: PersistentCloudContainer.LocalDataDecision.self)
                )
            }
            if let decision {
                // A deleted zone waits for the app; an account change is checked again by the
                // engine, which may find the previous user's credentials.
                if case .accountChanged = decision.reason {
                    unconfirmedAccountDecision = true
                } else {
                    pausedDecision = decision
                }
            }
            self.databases = databases
            self.primaryZone = primaryZone
            signal.setNeedsSave(zoneID, primaryZone.needsSave)
            for zone in zones where zone.role == .ownedShare && !zone.saved { signal.setNeedsSave(zone.zoneID, true) }
            for zone in zones { endedShares[zone.zoneID] = zone.ended }
            for (scope, database) in databases.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
                var session = EngineSession()
                session.savedState = states[scope]
                session.unheardCreates = UnheardCreates(waiting: unheard.filter { $0.scope == scope }.map(\.name))
                sessions[scope] = session
                makeEngine(database, state: states[scope])
            }
            if !databases.isEmpty { try await loadKeyring() }
            if pending > 0 { signal.uploadsPending() }
            if !databases.isEmpty { otherWriters = watchOtherWriters() }
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

    func makeEngine(_ database: any CloudDatabase, state: SyncEngine.State.Serialization?) {
        let observed = ObservedDatabase(base: database) { [weak self] error in
            Task { await self?.requestFailed(error) }
        }
        var configuration = SyncEngine.Configuration(
            database: observed, stateSerialization: state, delegate: self, automaticallySync: options.automaticallySync)
        var engineLogger = Logger(label: database.scope == .private ? "cloudstore.sync" : "cloudstore.sync.\(database.scope.rawValue)")
        engineLogger.logLevel = logger.logLevel
        configuration.logger = engineLogger
        configuration.sendDebounce = options.exportDebounce
        configuration.maxSendDelay = max(options.exportDebounce * 10, .milliseconds(500))
        // A save after a quiet spell goes at once; saves that follow it are gathered.
        configuration.sendsAtLeadingEdge = true
        configuration.pollInterval = options.pollInterval
        configuration.fetchResultsLimit = options.fetchPageSize
        if database.scope == .public {
            // Only the public entities' records, kept current by a query subscription each.
            configuration.recordTypes = publicEntities.names
        }
        if let transfers = store.layout.externalData?.transfers,
            schema.mirroredEntities.contains(where: { $0.attributes.contains { $0.type == .data } })
        {
            // Assets download beside the store's files, so adopting one is a rename.
            try? FileManager.default.createDirectory(at: transfers, withIntermediateDirectories: true)
            configuration.assetDirectory = transfers
            // No upload of this database is under way yet: files sealed for earlier ones are left over.
            let leftovers = (try? FileManager.default.contentsOfDirectory(atPath: transfers.path)) ?? []
            Self.removeSealedFiles(
                leftovers.filter { $0.hasSuffix(".\(database.scope.rawValue).sealed") }.map { transfers.appendingPathComponent($0) })
        }
        options.configureEngine?(&configuration)
        let engine = SyncEngine(configuration)
        engines[database.scope] = engine
        // The record metadata is the queue; a state saved by the previous core listed them too.
        engine.state.remove(pendingRecordZoneChanges: engine.state.pendingRecordZoneChanges)
        signal.attach(engine.state, scope: database.scope)
    }

    func stop() async {
        otherWriters?.cancel()
        await otherWriters?.value
        otherWriters = nil
        // Cancelled before they are dropped: an answer that arrives meanwhile is still settled.
        for engine in engines.values { await engine.cancelOperations() }
        engines = [:]
    }

    /// Sends what other processes write to the store file (an app extension, a widget, an import
    /// tool with a plain `PersistentStore`): their units of work record their pending uploads in
    /// their own transactions (``PersistentStore/missingRequiredObserver(_:among:)``); this notices
    /// their commits within the store's observation interval and wakes the engines.
    private func watchOtherWriters() -> Task<Void, Never> {
        Task { [store, signal] in
            var (seen, external) = (store.monitor.latest, store.monitor.externalCommits)
            while !Task.isCancelled, !store.monitor.isClosed {
                await store.waitForCommit(after: seen)
                seen = store.monitor.latest
                let now = store.monitor.externalCommits
                guard now != external else { continue }
                external = now
                // Only what was recorded wakes the engines (a wake also saves a zone not on the
                // server yet, which must not bring back one this device purged).
                let pending = (try? await store.read { try $0.db.pendingUploadCount() }) ?? 0
                if pending > 0 { signal.uploadsPending() }
            }
        }
    }

    // MARK: Transactions

    /// Runs mirroring work in one store transaction, then tells the engines if uploads are pending
    /// and the app what happened to its shares. Zone states the transaction stored reach the
    /// engines as it commits (``PendingUploadSignal/setNeedsSave(_:_:)``).
    @discardableResult
    func transaction<T: Sendable>(
        _ body: @escaping @Sendable (MirrorWrite) throws -> T
    ) async throws -> (value: T, counts: MirrorCounts) {
        let (schema, zoneID, policy, deviceID, logger) = (schema, zoneID, options.conflictPolicy, deviceID, logger)
        let now = store.configuration.now()
        let (signal, publicEntities, keyring) = (signal, publicEntities, keyring)
        let (value, counts, pending, activity, primaryZone, refusals) = try await store.write(author: MirrorAuthor.import) { context in
            let transaction = try MirrorWrite(
                context: context, schema: schema, zoneID: zoneID, publicEntities: publicEntities, policy: policy,
                deviceID: deviceID, now: now, logger: logger, keyring: keyring)
            let value = try body(transaction)
            let zonesToSave = transaction.zonesToSave
            if !zonesToSave.isEmpty {
                context.db.afterNextTransaction { _ in
                    for (zone, needsSave) in zonesToSave { signal.setNeedsSave(zone, needsSave) }
                }
            }
            return (
                value, transaction.counts, transaction.hasPendingUploads || transaction.hasPendingShareChanges,
                transaction.activity, transaction.primaryZoneState, transaction.decryptionRefusals
            )
        }
        if let primaryZone { self.primaryZone = primaryZone }
        if pending { signal.uploadsPending() }
        if !activity.isEmpty { events.send(EventTracker.sharing(activity)) }
        if !refusals.isEmpty { events.send(EventTracker.decryptionRefused(refusals)) }
        return (value, counts)
    }

    // MARK: SyncEngineDelegate

    /// The next pending uploads through the engine's database from the record metadata, in upload
    /// order, without the records the engine skips in this pass; the batch says whether more
    /// are pending after it (``SyncEngine/RecordZoneChangeBatch/hasMorePendingChanges``).
    func nextRecordZoneChangeBatch(
        _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.RecordZoneChangeBatch? {
        let scope = syncEngine.database.scope
        // An engine stopped for a decision about local data sends nothing more.
        guard engines[scope] === syncEngine else { return nil }
        // While the app decides about the deleted primary zone, its records wait.
        // So do those of a share that ended, until the app decides what becomes of them.
        let heldZones = Set(endedShares.keys.map(MirrorZone.Key.init)).union(pausedDecision == nil ? [] : [.primary])
        // Creates in flight are skipped anyway (the engine prepares the next batch while one is in
        // flight); only those handed out and never answered wait for a fetch.
        let inFlightNames = Set(context.recordIDsToSkip.map(\.recordName))
        let held = (sessions[scope]?.unheardCreates.waiting ?? []).subtracting(inFlightNames)
        if !held.isEmpty { requestFetch(syncEngine) }
        // The server enforces unique keys it was given before the first record that has one.
        if !uniquenessDeclared, await !declareUniquenessConstraints(syncEngine) {
            // Asked again after the engine's back-off.
            syncEngine.state.hasPendingUntrackedChanges = true
            return nil
        }
        let prepared: PreparedUploads
        let (limit, skipping) = (context.maxRecordCount, context.recordIDsToSkip)
        // Uploads handed out before and not answered go again: their sealed assets serve again.
        let sealedBefore = inFlight.compactMapValues { $0.sealedFiles.isEmpty ? nil : $0.sealed }
        do {
            prepared = try await transaction {
                try $0.prepareUploads(
                    scope: scope, limit: limit, skipping: skipping, holding: held, holdingZones: heldZones, sealedBefore: sealedBefore)
            }.value
        } catch {
            logger.error("reading the pending uploads failed", metadata: ["error": "\(error)"])
            syncEngine.state.hasPendingUntrackedChanges = true
            return nil
        }
        let uploads = prepared.uploads.filter { context.options.scope.contains($0.change) }
        guard !uploads.isEmpty else { return nil }
        let records = Dictionary(uploads.compactMap { upload in upload.record.map { ($0.recordID, $0) } }) { first, _ in first }
        var batch = await SyncEngine.RecordZoneChangeBatch(pendingChanges: uploads.map(\.change), context: context) { recordID in
            records[recordID]
        }
        // Uploads the batch left out (it stops at the engine's size limit) are still to send.
        let handedOutCount = (batch?.recordsToSave.count ?? 0) + (batch?.recordIDsToDelete.count ?? 0)
        batch?.hasMorePendingChanges = prepared.hasMore || handedOutCount < uploads.count
        // A delete of a version this device has goes for that version only: another device's edit
        // since comes back as a conflict instead of being deleted unseen.
        for upload in uploads {
            if let tag = upload.deleteChangeTag { batch?.recordChangeTagsToDelete[upload.change.recordID] = tag }
        }
        // What the batch holds (it stops at the engine's size limit) is what is handed out.
        let sent = Dictionary(uploads.map { ($0.change.recordID, $0.sent) }) { first, _ in first }
        // Files sealed for records the batch left out go; those of a record handed out again replace its last ones.
        let handedOut = Set((batch?.recordsToSave ?? []).map(\.recordID))
        Self.removeSealedFiles(uploads.filter { !handedOut.contains($0.change.recordID) }.flatMap(\.sent.sealedFiles))
        for record in batch?.recordsToSave ?? [] {
            if let previous = inFlight[record.recordID]?.sealedFiles, previous != sent[record.recordID]?.sealedFiles {
                Self.removeSealedFiles(previous)
            }
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

    /// Removes files sealed for uploads of encrypted assets (``MirrorWrite/sealedFile(of:field:of:scope:reusing:)``).
    static func removeSealedFiles(_ files: [URL]) {
        for file in files { try? FileManager.default.removeItem(at: file) }
    }

    /// The store's own file of an asset, when it holds those bytes already: the engine does not
    /// download them again. For a sealed asset (an encrypted attribute's) this device sealed or
    /// opened before, the file of its plain bytes: the import takes them as they are when the
    /// record's field names that sealed file (``Database/plainBytes(of:field:record:in:)``), and
    /// fails to open them as sealed anywhere else.
    nonisolated func existingFile(for asset: Asset, syncEngine: SyncEngine) async -> URL? {
        if let file = store.externalDataURL(for: ExternalData(checksum: asset.fileChecksum, size: asset.size)) { return file }
        guard schema.entities.contains(where: { $0.attributes.contains(where: RecordSealing.sealsFile) }),
            let plain = try? await store.read({ try $0.db.plainBytes(of: asset) })
        else { return nil }
        return store.externalDataURL(for: plain)
    }

    /// How many creates wait for a fetch before they go out again.
    var heldBackCreates: Int { sessions.values.reduce(0) { $0 + $1.unheardCreates.waiting.count } }

    /// Asks the engine for a fetch, so creates held back until one covers them go out soon. Only
    /// when syncing automatically: otherwise the app drives fetches (`sync()` fetches after it sends).
    func requestFetch(_ engine: SyncEngine) {
        let scope = engine.database.scope
        guard options.automaticallySync, sessions[scope]?.fetchRequested == false else { return }
        sessions[scope]?.fetchRequested = true
        Task { try? await engine.fetchChanges() }
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
