import CloudStoreLogging
import CloudStoreSync
import Foundation
import GRDB
import Logging

/// Mirrors one store through one sync engine per database: the engines' delegate, and the
/// orchestrator that routes their events to mirror work. One actor per container.
///
/// Every fact the mirror keeps is in the store, in the ledger (``Ledger``): the pending uploads
/// (each save records its own in its transaction, ``PendingUploadRecorder``), the zones (the
/// primary zone among them) and the decisions the app is asked for, the engines' tokens, the last
/// failure. The actor holds only what it was made with and the engines, each with what the mirror
/// tracks of its work in this session (``EngineSession``). Each event batch of an engine is handled
/// in one ``MirrorWrite`` (fetched records, acknowledgements and the engine's state commit
/// together), which returns what follows from it (``MirrorEffects``), applied once it committed.
/// The engines run in CKSyncEngine's "untracked changes" mode: the mirror's batch answer says
/// whether more is pending. What a change of a zone or of the account does is decided by
/// ``MirrorPlan``, a pure value.
actor CloudMirror: SyncEngineDelegate {
    let store: PersistentStore
    /// What every transaction of the mirror is made with: schema, primary zone, public entities,
    /// conflict policy, device ID, logger.
    let setup: MirrorSetup
    let options: PersistentCloudContainer.Options
    let events: EventHub
    /// What mirroring does when an engine reports a change of a zone or of the account.
    let plan: MirrorPlan
    /// The databases the engines sync through, to make them again after a decision; none for a
    /// container without a server.
    let databases: [DatabaseScope: any CloudDatabase]
    /// Where users publish their identity keys for sharing encrypted attributes (the public
    /// database, ``UserKeyRecord``); nil when the schema has none, or without a server.
    let keyDirectory: (any CloudDatabase)?
    /// Makes an engine: a ``SyncEngine`` in an app; a scripted one in tests.
    let makeEngine: @Sendable (SyncEngine.Configuration) -> any MirrorEngine
    /// Tells the engines of saves' uploads, from the recorder's commits and from mirror work.
    let wake = EngineWake()
    /// The engines, one per database, with what the mirror tracks of each one's work.
    var engines: [DatabaseScope: EngineSession] = [:]
    /// The keys that seal and open encrypted attributes, once this device has the user's account
    /// key (``setUpEncryption(passphrase:)``), unlocked from the key store.
    var keyring: EncryptionKeyring?
    /// Watches for other processes' commits to the store file (``watchOtherWriters()``).
    var otherWriters: Task<Void, Never>?
    /// Whether the server was given this schema's uniqueness constraints in this process
    /// (``declareUniquenessConstraints(_:)``).
    var uniquenessDeclared = false
    /// Whether this device's copy was purged in this session
    /// (``PersistentCloudContainer/PurgeScope/thisDevice``): syncing waits until the container is
    /// opened again.
    var purgedLocally = false

    var schema: Schema { setup.schema }
    /// The primary zone: where every object that is not shared lives.
    var zoneID: ZoneID { setup.zoneID }
    /// The entities mirrored in the public database.
    var publicEntities: PublicEntities { setup.publicEntities }
    var logger: Logger { setup.logger }
    /// The private database's engine.
    var engine: (any MirrorEngine)? { engines[.private]?.engine }

    init(
        store: PersistentStore, setup: MirrorSetup, options: PersistentCloudContainer.Options, events: EventHub,
        databases: [DatabaseScope: any CloudDatabase] = [:], keyDirectory: (any CloudDatabase)? = nil,
        makeEngine: @escaping @Sendable (SyncEngine.Configuration) -> any MirrorEngine = { SyncEngine($0) }
    ) {
        self.store = store
        self.setup = setup
        self.options = options
        self.events = events
        self.databases = databases
        self.keyDirectory = keyDirectory
        self.makeEngine = makeEngine
        self.plan = MirrorPlan(
            primaryZone: setup.zoneID, zoneDeletionPolicy: options.zoneDeletionPolicy, accountChangePolicy: options.accountChangePolicy)
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
    /// core wrote; the tables are migrated already, ``MirrorTables/migrate(_:)``) and makes one
    /// engine per database.
    func start() async throws {
        var setupEvent = EventTracker(.setup)
        events.send(setupEvent.started)
        do {
            store.add(
                PendingUploadRecorder(schema: schema, recordKeys: setup.recordKeys, publicEntities: publicEntities, wake: wake))
            let (store, publicEntities) = (store, publicEntities)
            let (opened, _) = try await write { write, effects in
                let firstMirroring = try MirrorTables.prepare(write.context, store: store, schema: write.schema, primaryZone: write.zoneID)
                if firstMirroring {
                    // Objects saved before the store first mirrored: each is an upload to make,
                    // recorded in the transaction that turns mirroring on.
                    try write.uploadEverythingAgain(&effects)
                }
                if try write.ledger.state(.publicEntities, as: [String].self) ?? [] != publicEntities.names.sorted() {
                    try write.ledger.setState(.publicEntities, encoding: publicEntities.names.sorted())
                }
                var states: [DatabaseScope: SyncEngine.State.Serialization] = [:]
                for scope in DatabaseScope.allCases {
                    states[scope] = try write.ledger.state(Self.stateKey(scope), as: SyncEngine.State.Serialization.self)
                }
                return OpenedStore(
                    states: states, pending: try write.ledger.pendingCount(), zonesToSave: try write.ledger.zonesToSave(),
                    unheard: try write.ledger.unheardCreates(), decision: try write.ledger.primaryZone()?.decision)
            }
            for (scope, database) in databases.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
                var session = EngineSession(engine: makeEngine(configuration(for: database, state: opened.states[scope])))
                session.unheardCreates = UnheardCreates(waiting: opened.unheard.filter { $0.scope == scope }.map(\.name))
                // An account change waits for the engine to say whether the credentials are the
                // previous user's again (``MirrorPlan/Step/confirmUserReturned``).
                if case .accountChanged? = opened.decision?.reason, scope == .private { session.accountUnconfirmed = true }
                attach(session, scope: scope)
            }
            if !databases.isEmpty { try await loadKeyring() }
            if opened.pending > 0 { wake.wake(Set(DatabaseScope.allCases), saving: opened.zonesToSave) }
            if !databases.isEmpty { otherWriters = watchOtherWriters() }
            events.send(setupEvent.ended())
            logger.notice(
                "mirroring set up",
                metadata: ["zone": "\(zoneID.zoneName)", "server": "\(!databases.isEmpty)", "count": "\(opened.pending)"])
        } catch {
            setupEvent.failure = PersistentCloudContainer.SyncFailure(message: "\(error)")
            events.send(setupEvent.ended())
            throw error
        }
    }

    /// What the store held for the engines when the mirror started.
    private struct OpenedStore: Sendable {
        var states: [DatabaseScope: SyncEngine.State.Serialization]
        var pending: Int
        var zonesToSave: [ZoneID]
        var unheard: [(name: String, scope: DatabaseScope)]
        var decision: PersistentCloudContainer.LocalDataDecision?
    }

    /// The configuration of an engine of `database`, starting from `state`.
    func configuration(for database: any CloudDatabase, state: SyncEngine.State.Serialization?) -> SyncEngine.Configuration {
        var configuration = SyncEngine.Configuration(
            database: database, stateSerialization: state, delegate: self, automaticallySync: options.automaticallySync)
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
        return configuration
    }

    /// Makes a session's engine the one of `scope`: the mirror's wakes reach it from now on.
    func attach(_ session: EngineSession, scope: DatabaseScope) {
        engines[scope] = session
        // The record metadata is the queue; a state saved by the previous core listed them too.
        session.engine.state.remove(pendingRecordZoneChanges: session.engine.state.pendingRecordZoneChanges)
        wake.attach(session.engine.state, scope: scope)
    }

    /// Makes new engines with no state for `scopes` (the others stay): as the new user's, or to
    /// fetch everyone's public objects again.
    func restartEngines(_ scopes: [DatabaseScope]) async {
        for scope in scopes {
            guard let database = databases[scope] else { continue }
            let stopped = engines.removeValue(forKey: scope)
            await stopped?.engine.cancelOperations()
            attach(EngineSession(engine: makeEngine(configuration(for: database, state: nil))), scope: scope)
        }
    }

    /// Stops the engines: the mirror no longer hands them anything (``engines`` is emptied first,
    /// so an event or batch request of a stopped engine is ignored), and their operations end.
    func stopEngines() async {
        let stopped = engines.values.map(\.engine)
        engines = [:]
        wake.detachAll()
        for engine in stopped { await engine.cancelOperations() }
    }

    func stop() async {
        otherWriters?.cancel()
        await otherWriters?.value
        otherWriters = nil
        // Cancelled before they are dropped: an answer that arrives meanwhile is still settled.
        await stopEngines()
    }

    /// Sends what other processes write to the store file (an app extension, a widget, an import
    /// tool with a plain `PersistentStore`): their units of work record their pending uploads in
    /// their own transactions (``PersistentStore/missingRequiredObserver(_:among:)``); this notices
    /// their commits within the store's observation interval and wakes the engines.
    private func watchOtherWriters() -> Task<Void, Never> {
        Task { [store, wake] in
            var (seen, external) = (store.monitor.latest, store.monitor.externalCommits)
            while !Task.isCancelled, !store.monitor.isClosed {
                await store.waitForCommit(after: seen)
                seen = store.monitor.latest
                let now = store.monitor.externalCommits
                guard now != external else { continue }
                external = now
                // Only what was recorded wakes the engines (a wake also saves a zone not on the
                // server yet, which must not bring back one this device purged).
                let (pending, zones) =
                    (try? await store.read { context in
                        let ledger = Ledger(context.db)
                        return (try ledger.pendingCount(), try ledger.zonesToSave())
                    }) ?? (0, [ZoneID]())
                if pending > 0 { wake.wake(Set(DatabaseScope.allCases), saving: zones) }
            }
        }
    }

    // MARK: Transactions

    /// Runs mirror work in one store transaction; answers its value and what it leaves to do once
    /// it committed (the zones to save with the wake it asks for read before the commit).
    func write<T: Sendable>(
        _ body: @escaping @Sendable (MirrorWrite, inout MirrorEffects) throws -> T
    ) async throws -> (value: T, effects: MirrorEffects) {
        let (setup, now, keyring) = (setup, store.configuration.now(), keyring)
        return try await store.write(author: MirrorAuthor.import) { context in
            context.appliesServerValues = true
            let write = try MirrorWrite(context: context, setup: setup, now: now, keyring: keyring)
            var effects = MirrorEffects()
            let value = try body(write, &effects)
            if effects.wake.contains(.private) { effects.zonesToSave = try write.ledger.zonesToSave() }
            return (value, effects)
        }
    }

    /// Runs mirror work in one store transaction and applies what it leaves to do; answers its value.
    @discardableResult
    func perform<T: Sendable>(_ body: @escaping @Sendable (MirrorWrite, inout MirrorEffects) throws -> T) async throws -> T {
        let (value, effects) = try await write(body)
        await apply(effects)
        return value
    }

    /// Applies what mirror work left to do once its transaction committed: the engines it stops or
    /// starts again, the zones they save and the uploads they send, the app's events, the failures
    /// that mark the work under way, the fetches it asks for, the keyring and the kept files.
    func apply(_ effects: MirrorEffects) async {
        switch effects.engines {
        case .stopAll?: await stopEngines()
        case .restartAll?: await restartEngines(databases.keys.sorted { $0.rawValue < $1.rawValue })
        case .restartPublic?: await restartEngines([.public])
        case nil: break
        }
        wake.cancelSaves(of: effects.zonesNotToSave)
        if !effects.wake.isEmpty { wake.wake(effects.wake, saving: effects.zonesToSave) }
        for failure in effects.failures {
            for scope in Array(engines.keys) {
                if engines[scope]?.importTracker != nil { engines[scope]?.importTracker?.failure = failure }
                if engines[scope]?.exportTracker != nil { engines[scope]?.exportTracker?.failure = failure }
            }
        }
        for event in effects.events { events.send(event) }
        if !effects.shareActivity.isEmpty { events.send(EventTracker.sharing(effects.shareActivity)) }
        if !effects.decryptionRefusals.isEmpty { events.send(EventTracker.decryptionRefused(effects.decryptionRefusals)) }
        for scope in effects.fetch.sorted(by: { $0.rawValue < $1.rawValue }) { requestFetch(scope) }
        if effects.loadKeyring { try? await loadKeyring() }
        if effects.sweepWaitingFiles, store.layout.externalData != nil {
            try? await store.read { try $0.removeUnneededWaitingFiles() }
        }
    }

    /// Wakes every engine for the uploads the store holds, the zones to save first read from
    /// their rows.
    func wakeForPendingUploads() async throws {
        let zones = try await store.read { try Ledger($0.db).zonesToSave() }
        wake.wake(Set(DatabaseScope.allCases), saving: zones)
    }

    /// Asks an engine for a fetch, so creates held back until one covers them go out soon. Only
    /// when syncing automatically: otherwise the app drives fetches (`sync()` fetches after it sends).
    func requestFetch(_ scope: DatabaseScope) {
        guard options.automaticallySync, let session = engines[scope], !session.fetchRequested else { return }
        engines[scope]?.fetchRequested = true
        let engine = session.engine
        Task { try? await engine.fetchChanges(SyncEngine.FetchChangesOptions()) }
    }

    /// The last failure the store keeps (it is cleared once past, ``MirrorWrite/recordSuccess(export:at:)``).
    func currentFailure() async throws -> PersistentCloudContainer.SyncFailure? {
        try await store.read { try Ledger($0.db).state(.lastError, as: MirrorFailure.self)?.failure }
    }

    /// The zone as mirroring names it: the public database has one zone (``ZoneID/publicDefault``),
    /// however the engine named it; other databases' zones are named as their engines name them.
    static func mirrorZoneID(_ zoneID: ZoneID, scope: DatabaseScope) -> ZoneID {
        scope == .public ? .publicDefault : zoneID
    }

    /// Removes files sealed for uploads of encrypted assets (``MirrorWrite/sealedFile(of:field:of:scope:reusing:)``).
    static func removeSealedFiles(_ files: [URL]) {
        for file in files { try? FileManager.default.removeItem(at: file) }
    }
}

/// One engine of the mirror and what the mirror tracks of its work in this session. Nothing here is
/// kept in the store: it is about what the engine is doing now (the fetch or send under way, the
/// uploads in flight, the events reporting them).
struct EngineSession: Sendable {
    let engine: any MirrorEngine
    /// Record names seen while a zone is fetched from scratch, by zone.
    var fromScratch: [ZoneID: RecordNameSet] = [:]
    /// Objects whose tombstones the fetch under way brought (``FetchedPage/deletedOnServer``).
    var deletedInFetch: Set<UUID> = []
    /// Creates handed out and never answered, held back until a fetch covers them.
    var unheardCreates = UnheardCreates()
    /// What each upload in flight carried, until the server answers.
    var inFlight: [RecordID: SentUpload] = [:]
    /// Whether a zone failed to fetch in the fetch under way.
    var zoneFetchFailed = false
    /// Whether a fetch was asked for to release held-back creates (automatic sync only).
    var fetchRequested = false
    /// Whether the store keeps a decision about an account change that this engine has not
    /// confirmed since the container opened: the credentials may be the previous user's again
    /// (the private database's engine only).
    var accountUnconfirmed = false
    var importTracker: EventTracker?
    var exportTracker: EventTracker?

    init(engine: any MirrorEngine) {
        self.engine = engine
    }
}
