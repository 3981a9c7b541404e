import CloudStoreSync
import CloudStoreWire
import Logging

// The example of the DocC article "Using the sync engine", compiled here and run against a server
// by `SyncEngineMultiDeviceTests.example_notesMergeFieldsEditedOnTwoDevices`. Keep the two in step.

/// A note as the app stores it, with the last copy the server acknowledged (the ancestor for merges).
struct Note: Sendable, Equatable {
    var id: String
    var title: String
    var body: String
    var lastServerRecord: Record?

    init(id: String, title: String, body: String, lastServerRecord: Record? = nil) {
        self.id = id
        self.title = title
        self.body = body
        self.lastServerRecord = lastServerRecord
    }

    /// The note as the server has it.
    init(_ record: Record) {
        self.init(
            id: record.recordName, title: record["title"]?.stringValue ?? "", body: record["body"]?.stringValue ?? "",
            lastServerRecord: record)
    }

    /// Three-way merge with a newer server copy, field by field against the last copy both sides
    /// agreed on: a field only we changed keeps our value, every other field takes the server's.
    func merged(with serverRecord: Record) -> Note {
        func merge(_ key: String, _ local: String) -> String {
            let base = lastServerRecord?[key]?.stringValue
            let server = serverRecord[key]?.stringValue ?? ""
            let onlyWeChanged = local != base && server == base
            return onlyWeChanged ? local : server
        }
        return Note(
            id: id, title: merge("title", title), body: merge("body", body), lastServerRecord: serverRecord)
    }
}

/// The app's persistence. A real app keeps this in SQLite and runs each method in one transaction;
/// what matters is that the sync state is saved together with the data it describes.
actor NotesStore {
    private(set) var notes: [String: Note] = [:]
    private(set) var syncState: SyncEngine.State.Serialization?

    func note(_ id: String) -> Note? { notes[id] }
    func put(_ note: Note) { notes[note.id] = note }
    func remove(_ id: String) { notes[id] = nil }
    func deleteAll() { notes.removeAll() }
    func saveSyncState(_ state: SyncEngine.State.Serialization) { syncState = state }

    /// One transaction: the fetched page's records and the state that holds the page's token.
    /// Notes with unsent edits are merged, not overwritten, and not deleted either: one deleted on
    /// the server (or re-created here after a delete) is sent again as a new note.
    func apply(_ changes: SyncEngine.Event.FetchedRecordZoneChanges, unsent: Set<String>) {
        for record in changes.modifications {
            if unsent.contains(record.recordName), let local = notes[record.recordName] {
                notes[record.recordName] = local.merged(with: record)
            } else {
                notes[record.recordName] = Note(record)
            }
        }
        for deletion in changes.deletions {
            let id = deletion.recordID.recordName
            if unsent.contains(id), var local = notes[id] {
                local.lastServerRecord = nil
                notes[id] = local
            } else {
                notes[id] = nil
            }
        }
        syncState = changes.stateSerialization
    }

    /// One transaction: the acknowledged records' new change tags and the state without their changes.
    func acknowledge(_ sent: SyncEngine.Event.SentRecordZoneChanges) {
        for record in sent.savedRecords { notes[record.recordName]?.lastServerRecord = record }
        syncState = sent.stateSerialization
    }
}

extension FieldValue {
    var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }
}

/// Owns the sync engine for the notes of one user and keeps `NotesStore` in sync with the server.
actor NotesSync: SyncEngineDelegate {
    static let zone = ZoneID(zoneName: "Notes")

    let store: NotesStore
    private let logger: Logger
    private var engine: SyncEngine!

    init(store: NotesStore, database: any CloudDatabase, automaticallySync: Bool = true) async {
        self.store = store
        self.logger = Logger(label: "notes.sync")
        let configuration = SyncEngine.Configuration(
            database: database, stateSerialization: await store.syncState, delegate: self,
            automaticallySync: automaticallySync)
        engine = SyncEngine(configuration)
    }

    nonisolated func recordID(_ id: String) -> RecordID { RecordID(recordName: id, zoneID: Self.zone) }

    // MARK: Called by the app after local edits

    func save(_ note: Note) async {
        var note = note
        note.lastServerRecord = await store.note(note.id)?.lastServerRecord
        await store.put(note)
        engine.state.add(pendingRecordZoneChanges: [.saveRecord(recordID(note.id))])
    }

    func delete(_ id: String) async {
        await store.remove(id)
        engine.state.add(pendingRecordZoneChanges: [.deleteRecord(recordID(id))])
    }

    /// Pull to refresh; tests use it with `automaticallySync` off.
    func sync() async throws {
        try await engine.fetchChanges()
        try await engine.sendChanges()
    }

    // MARK: SyncEngineDelegate

    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
        switch event {
        case .stateUpdate(let update):
            await store.saveSyncState(update.stateSerialization)

        case .accountChange(let change):
            switch change.changeType {
            case .signIn:
                syncEngine.state.add(pendingDatabaseChanges: [.saveZone(Self.zone)])
            case .switchAccounts, .signOut:
                await store.deleteAll()
            }

        case .fetchedDatabaseChanges(let changes):
            for deletion in changes.deletions where deletion.zoneID == Self.zone {
                switch deletion.reason {
                case .purged, .unshared:
                    await store.deleteAll()  // wiped, or no longer shared with us: do not upload it again
                case .deleted:
                    await uploadEverything(syncEngine)  // another device reset the zone: ours is the copy left
                }
            }

        case .fetchedRecordZoneChanges(let changes):
            let unsent = syncEngine.state.pendingRecordZoneChanges.compactMap { change -> String? in
                if case .saveRecord(let recordID) = change { return recordID.recordName }
                return nil
            }
            await store.apply(changes, unsent: Set(unsent))

        case .sentRecordZoneChanges(let sent):
            await store.acknowledge(sent)
            for failure in sent.failedRecordSaves {
                await resolve(failure, syncEngine: syncEngine)
            }

        case .sentDatabaseChanges, .willFetchChanges, .willFetchRecordZoneChanges, .didFetchRecordZoneChanges,
            .didFetchChanges, .willSendChanges, .didSendChanges:
            break
        }
    }

    func nextRecordZoneChangeBatch(_ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine) async
        -> SyncEngine.RecordZoneChangeBatch?
    {
        let changes = syncEngine.state.pendingRecordZoneChanges.filter { context.options.scope.contains($0) }
        return await SyncEngine.RecordZoneChangeBatch(pendingChanges: changes, context: context) { recordID in
            await self.record(for: recordID.recordName)  // nil: the note is gone; the change is skipped
        }
    }

    // MARK: Records

    /// The record to send: the fields on top of the last server copy, so it carries its change tag.
    private func record(for id: String) async -> Record? {
        guard let note = await store.note(id) else { return nil }
        var record = note.lastServerRecord ?? Record(recordType: "Note", recordID: recordID(id))
        record["title"] = .string(note.title)
        record["body"] = .string(note.body)
        return record
    }

    private func resolve(
        _ failure: SyncEngine.Event.SentRecordZoneChanges.FailedRecordSave, syncEngine: SyncEngine
    ) async {
        let recordID = failure.record.recordID
        switch failure.error.code {
        case .conflict, .exists:
            // Someone else saved first: merge with their copy and send the result with its tag.
            guard let serverRecord = failure.error.serverRecord, let note = await store.note(recordID.recordName)
            else { return }
            await store.put(note.merged(with: serverRecord))
            syncEngine.state.add(pendingRecordZoneChanges: [.saveRecord(recordID)])

        case .zoneNotFound:
            syncEngine.state.add(pendingDatabaseChanges: [.saveZone(recordID.zoneID)])
            syncEngine.state.add(pendingRecordZoneChanges: [.saveRecord(recordID)])

        case .notFound:
            // Deleted on the server while we edited it: keep the edit as a new record.
            if var note = await store.note(recordID.recordName) {
                note.lastServerRecord = nil
                await store.put(note)
                syncEngine.state.add(pendingRecordZoneChanges: [.saveRecord(recordID)])
            }

        default:
            logger.error("Could not save a note", metadata: ["record": "\(recordID)", "error": "\(failure.error)"])
        }
    }

    private func uploadEverything(_ syncEngine: SyncEngine) async {
        let ids = await store.notes.keys
        for id in ids {
            if var note = await store.note(id) {
                note.lastServerRecord = nil
                await store.put(note)
            }
        }
        syncEngine.state.add(pendingDatabaseChanges: [.saveZone(Self.zone)])
        syncEngine.state.add(pendingRecordZoneChanges: ids.map { .saveRecord(recordID($0)) })
    }
}
