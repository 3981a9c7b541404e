import CloudStoreSync
import CloudStoreWire
import Foundation
import Synchronization

/// One device of a sync test: its records (standing in for the app's database), the engine state
/// it saved, and every event it handled. It resolves conflicts by a policy, recreates missing
/// zones, and waits for events without sleeping.
actor EngineDevice: SyncEngineDelegate {
    enum ConflictPolicy {
        /// Take the server's copy (the WWDC23 talk's test).
        case serverWins
        /// Keep the local values, take the server's change tag, send again.
        case localWins
    }

    let name: String
    private nonisolated let engineReference = Mutex<SyncEngine?>(nil)
    /// The device's engine; set once by `init`.
    nonisolated var engine: SyncEngine { engineReference.withLock { $0! } }
    private(set) var records: [RecordID: Record] = [:]
    private(set) var savedState: SyncEngine.State.Serialization?
    private(set) var events: [SyncEngine.Event] = []
    var conflictPolicy = ConflictPolicy.serverWins
    /// Sends each zone's changes all-or-nothing.
    var atomic = false
    /// Records the app tracks itself (``SyncEngine/State/hasPendingUntrackedChanges``), handed
    /// out once the tracked changes are sent.
    private var untracked: [Record] = []
    var recreatesMissingZones = true
    /// Records of a zone not seen yet in a fetch from scratch; deleted locally when it completes.
    private var unseenInFullFetch: [ZoneID: Set<RecordID>] = [:]
    /// Files that already hold assets' bytes, by checksum (``existingFile(for:syncEngine:)``).
    private var assetFiles: [String: URL] = [:]
    /// Where fetched assets are moved to, as an app keeps them; nil leaves them to the engine.
    private var assetKeepDirectory: URL?
    /// What each fetched asset's file held when its page was delivered, by `record.field`.
    private(set) var deliveredAssetBytes: [String: Data] = [:]
    private var waiters: [(from: Int, matches: @Sendable (SyncEngine.Event) -> Bool, continuation: CheckedContinuation<SyncEngine.Event, Never>)] = []

    init(
        _ name: String, database: any CloudDatabase, state: SyncEngine.State.Serialization? = nil,
        automaticallySync: Bool = false, configure: (inout SyncEngine.Configuration) -> Void = { _ in }
    ) async {
        self.name = name
        var configuration = SyncEngine.Configuration(
            database: database, stateSerialization: state, delegate: self, automaticallySync: automaticallySync)
        configure(&configuration)
        let engine = SyncEngine(configuration)
        engineReference.withLock { $0 = engine }
    }

    // MARK: Local edits

    /// Saves a record locally and queues it for sending.
    func save(_ record: Record) {
        records[record.recordID] = record
        engine.state.add(pendingRecordZoneChanges: [.saveRecord(record.recordID)])
    }

    /// Changes fields of a record locally (keeping its change tag) and queues it.
    func edit(_ recordID: RecordID, _ fields: [String: FieldValue]) {
        guard var record = records[recordID] else { return }
        record.fields.merge(fields) { $1 }
        save(record)
    }

    func delete(_ recordID: RecordID) {
        records[recordID] = nil
        engine.state.add(pendingRecordZoneChanges: [.deleteRecord(recordID)])
    }

    func record(_ recordID: RecordID) -> Record? { records[recordID] }

    /// The names of the records the device holds, sorted.
    func recordNames() -> [String] { records.keys.map(\.recordName).sorted() }

    func setConflictPolicy(_ policy: ConflictPolicy) { conflictPolicy = policy }
    func setAtomic(_ value: Bool) { atomic = value }

    /// Saves a record locally without telling the engine which one: it only learns that there are
    /// untracked changes.
    func saveUntracked(_ record: Record) {
        records[record.recordID] = record
        untracked.append(record)
        engine.state.hasPendingUntrackedChanges = true
    }
    func setRecreatesMissingZones(_ value: Bool) { recreatesMissingZones = value }

    // MARK: Assets

    func setAssetFile(_ file: URL, for fileChecksum: String) { assetFiles[fileChecksum] = file }
    func keepAssets(in directory: URL) { assetKeepDirectory = directory }

    func existingFile(for asset: Asset, syncEngine: SyncEngine) async -> URL? { assetFiles[asset.fileChecksum] }

    /// Notes what each asset's file holds, and moves the file into the keep directory if there is one.
    private func keepAssets(of record: inout Record) {
        for (name, value) in record.fields {
            guard case .asset(var asset) = value, let file = asset.fileURL else { continue }
            deliveredAssetBytes["\(record.recordName).\(name)"] = try? Data(contentsOf: file)
            guard let directory = assetKeepDirectory, file.pathExtension == "asset" else { continue }
            let kept = directory.appendingPathComponent(file.lastPathComponent)
            try? FileManager.default.moveItem(at: file, to: kept)
            asset.fileURL = kept
            record.fields[name] = .asset(asset)
        }
    }

    // MARK: Events

    /// The names of the events handled so far, from `index` on.
    func eventNames(from index: Int = 0) -> [String] {
        events[index...].map(\.name)
    }

    /// Returns the first event from `index` on that matches, waiting for it if needed.
    @discardableResult
    func waitForEvent(from index: Int = 0, _ matches: @escaping @Sendable (SyncEngine.Event) -> Bool) async
        -> SyncEngine.Event
    {
        if let event = events[min(index, events.count)...].first(where: matches) { return event }
        return await withCheckedContinuation { waiters.append((index, matches, $0)) }
    }

    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
        events.append(event)
        switch event {
        case .stateUpdate(let update):
            savedState = update.stateSerialization
        case .fetchedDatabaseChanges(let changes):
            // A zone whose data is gone for good (purged, or no longer shared with this user) takes
            // the local copy with it; a zone deleted by an app is the app's decision, left as is.
            for deletion in changes.deletions where deletion.reason != .deleted {
                records = records.filter { $0.key.zoneID != deletion.zoneID }
            }
        case .willFetchRecordZoneChanges(let will) where will.fromScratch:
            unseenInFullFetch[will.zoneID] = Set(records.keys.filter { $0.zoneID == will.zoneID })
        case .fetchedRecordZoneChanges(let changes):
            let pending = syncEngine.state.pendingRecordZoneChanges
            for var record in changes.modifications {
                keepAssets(of: &record)
                unseenInFullFetch[changes.zoneID]?.remove(record.recordID)
                records[record.recordID] = fetched(record, pending: pending)
            }
            for deletion in changes.deletions {
                records[deletion.recordID] = deleted(deletion.recordID, pending: pending)
            }
            savedState = changes.stateSerialization
        case .didFetchRecordZoneChanges(let did):
            // After a complete fetch from scratch, what did not come back no longer exists.
            if did.error == nil, let unseen = unseenInFullFetch.removeValue(forKey: did.zoneID) {
                let pending = Set(syncEngine.state.pendingRecordZoneChanges.map(\.recordID))
                for recordID in unseen where !pending.contains(recordID) { records[recordID] = nil }
            }
        case .sentRecordZoneChanges(let sent):
            for record in sent.savedRecords { records[record.recordID] = record }
            for failure in sent.failedRecordSaves { resolve(failure, syncEngine: syncEngine) }
            savedState = sent.stateSerialization
        case .accountChange(let change):
            if case .switchAccounts = change.changeType { records.removeAll() }
        default:
            break
        }
        let ready = waiters.filter { events.count - 1 >= $0.from && $0.matches(event) }
        waiters.removeAll { events.count - 1 >= $0.from && $0.matches(event) }
        for waiter in ready { waiter.continuation.resume(returning: event) }
    }

    /// What a fetched record becomes locally: it never brings back a record deleted here and not
    /// yet sent, and under `.localWins` an unsent local edit keeps its fields (taking the server's
    /// change tag), so a fetch between an edit and its send loses nothing.
    private func fetched(_ record: Record, pending: [SyncEngine.PendingRecordZoneChange]) -> Record? {
        if pending.contains(.deleteRecord(record.recordID)) { return nil }
        guard conflictPolicy == .localWins, pending.contains(.saveRecord(record.recordID)),
            var mine = records[record.recordID]
        else { return record }
        mine.recordChangeTag = record.recordChangeTag
        return mine
    }

    /// What a record deleted on the server becomes locally: gone, unless it has an unsent save
    /// (an edit, or a re-creation after a local delete), which is kept without its change tag so it
    /// is sent again as a new record.
    private func deleted(_ recordID: RecordID, pending: [SyncEngine.PendingRecordZoneChange]) -> Record? {
        guard pending.contains(.saveRecord(recordID)), var mine = records[recordID] else { return nil }
        mine.recordChangeTag = nil
        return mine
    }

    private func resolve(_ failure: SyncEngine.Event.SentRecordZoneChanges.FailedRecordSave, syncEngine: SyncEngine) {
        let recordID = failure.record.recordID
        switch failure.error.code {
        case .conflict, .exists:
            guard let serverRecord = failure.error.serverRecord else { return }
            switch conflictPolicy {
            case .serverWins:
                records[recordID] = serverRecord
            case .localWins:
                var mine = records[recordID] ?? failure.record
                mine.recordChangeTag = serverRecord.recordChangeTag
                records[recordID] = mine
                syncEngine.state.add(pendingRecordZoneChanges: [.saveRecord(recordID)])
            }
        case .zoneNotFound where recreatesMissingZones:
            syncEngine.state.add(pendingDatabaseChanges: [.saveZone(recordID.zoneID)])
            syncEngine.state.add(pendingRecordZoneChanges: [.saveRecord(recordID)])
        default:
            break
        }
    }

    func nextRecordZoneChangeBatch(_ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine) async
        -> SyncEngine.RecordZoneChangeBatch?
    {
        let changes = syncEngine.state.pendingRecordZoneChanges.filter { context.options.scope.contains($0) }
        if changes.isEmpty && !untracked.isEmpty {
            defer {
                untracked = []
                syncEngine.state.hasPendingUntrackedChanges = false
            }
            return SyncEngine.RecordZoneChangeBatch(recordsToSave: untracked, atomicByZone: atomic)
        }
        return await SyncEngine.RecordZoneChangeBatch(pendingChanges: changes, context: context, atomicByZone: atomic) { recordID in
            await self.record(recordID)
        }
    }
}

extension SyncEngine.Event {
    /// The case name, e.g. `fetchedRecordZoneChanges`.
    var name: String {
        String(description.prefix { $0 != "(" })
    }
}
