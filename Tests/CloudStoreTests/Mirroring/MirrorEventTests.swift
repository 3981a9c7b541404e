@testable import CloudStore
@testable import CloudStoreSync
import CloudStoreTesting
import Foundation
import Testing

/// The mirror's handling of each sync engine event, driven by a scripted engine on a real store,
/// without a server: what each event writes to the ledger, what it asks of the engines, and
/// which events the app hears. The real-server suites prove the same behaviour end to end; these
/// are the quick way to see what one event does.
@Suite("Mirroring: each engine event, with a scripted engine")
struct MirrorEventTests {
    static let zone = MirrorHarness.zoneID
    static let fetchContext = SyncEngine.FetchChangesContext(reason: .scheduled, options: SyncEngine.FetchChangesOptions())
    static let sendContext = SyncEngine.SendChangesContext(reason: .scheduled, options: SyncEngine.SendChangesOptions())

    /// A state whose database token names it.
    static func state(_ token: String) -> SyncEngine.State.Serialization { SyncEngine.State.Serialization(databaseToken: token) }

    /// A note's record as the server has it.
    static func note(_ id: UUID, _ fields: [String: FieldValue], tag: String, by device: String = "B") -> Record {
        var record = Record(recordType: "Note", recordID: RecordID(recordName: id.uuidString, zoneID: zone), fields: fields)
        record.recordChangeTag = tag
        record.created = Record.Stamp(timestamp: Date(millisecondsSince1970: 1_000), deviceID: device)
        record.modified = Record.Stamp(timestamp: Date(millisecondsSince1970: 2_000), deviceID: device)
        return record
    }

    static func page(_ records: [Record], deleting deleted: [UUID] = [], token: String = "page") -> SyncEngine.Event {
        .fetchedRecordZoneChanges(
            SyncEngine.Event.FetchedRecordZoneChanges(
                zoneID: zone, modifications: records,
                deletions: deleted.map { .init(recordID: RecordID(recordName: $0.uuidString, zoneID: zone), recordType: "Note") },
                stateSerialization: state(token)))
    }

    static func sent(
        saved: [Record] = [], failed: [SyncEngine.Event.SentRecordZoneChanges.FailedRecordSave] = [],
        retrying: [RecordID: ServerError] = [:], token: String = "sent"
    ) -> SyncEngine.Event {
        .sentRecordZoneChanges(
            SyncEngine.Event.SentRecordZoneChanges(
                savedRecords: saved, failedRecordSaves: failed, deletedRecordIDs: [], failedRecordDeletes: [:],
                retryingRecordChanges: retrying, stateSerialization: state(token)))
    }

    /// A synced note: saved here, handed out, acknowledged by the server with tag `1`.
    static func syncedNote(_ h: MirrorHarness, title: String = "synced") async throws -> Note {
        let note = Note(title: title)
        try await h.write { try $0.insert(note) }
        let record = try #require(try await h.nextBatch()?.recordsToSave.first)
        var saved = record
        saved.recordChangeTag = "1"
        try await h.deliver(sent(saved: [saved]))
        return note
    }

    static func appEvents(_ h: MirrorHarness, kind: PersistentCloudContainer.Event.Kind) async -> [PersistentCloudContainer.Event] {
        var found: [PersistentCloudContainer.Event] = []
        var iterator = h.events.makeAsyncIterator()
        // The hub buffers what was sent; a marker event ends the read.
        await h.mirror.events.send(EventTracker.sharing([]))
        while let event = await iterator.next() {
            if event.kind == .sharing, event.activity.isEmpty { break }
            if event.kind == kind { found.append(event) }
        }
        return found
    }

    // MARK: stateUpdate

    @Test func stateUpdate_isSavedUnderItsDatabasesKey() async throws {
        let h = try await MirrorHarness.make()
        try await h.deliver(.stateUpdate(.init(stateSerialization: Self.state("private-1"))))
        try await h.deliver(.stateUpdate(.init(stateSerialization: Self.state("shared-1"))), from: .shared)
        let (own, shared) = try await h.ledger {
            (try $0.state(.engineState, as: SyncEngine.State.Serialization.self), try $0.state(.sharedEngineState, as: SyncEngine.State.Serialization.self))
        }
        #expect(own?.databaseSyncToken == "private-1" && shared?.databaseSyncToken == "shared-1")
        await h.close()
    }

    // MARK: accountChange

    @Test func accountChange_signInAndSignOut_areStored() async throws {
        let h = try await MirrorHarness.make()
        try await h.deliver(.accountChange(.init(changeType: .signIn(currentUser: "_alice"))))
        #expect(try await h.ledger { try $0.state(.userRecordName, as: String.self) } == "_alice")
        try await h.deliver(.accountChange(.init(changeType: .signOut(previousUser: "_alice"))))
        let (status, failure) = try await h.ledger {
            (try $0.state(.accountStatus, as: String.self), try $0.state(.lastError, as: MirrorFailure.self))
        }
        #expect(status == "signedOut")
        #expect(failure?.failure.code == .authenticationFailed, "written in the transaction that learned it")
        await h.close()
    }

    @Test func accountChange_anotherUser_asksTheAppAndStopsTheEngines() async throws {
        let h = try await MirrorHarness.make()
        try await h.write { try $0.insert(Note(title: "alice's")) }
        let engine = try await h.engine()
        try await h.deliver(.accountChange(.init(changeType: .switchAccounts(previousUser: "_alice", currentUser: "_bob"))), .willFetchChanges(.init(context: Self.fetchContext)))
        let decision = try await h.ledger { try $0.primaryZone()?.decision }
        #expect(decision?.reason == .accountChanged(previousUser: "_alice", currentUser: "_bob"))
        #expect(decision?.unsentChanges == 1)
        #expect(engine.requests == ["cancel"])
        #expect(await h.mirror.engines.isEmpty, "the new user's engines start once the app decides")
        #expect(await Self.appEvents(h, kind: .localDataDecision).count == 1)
        // An event the stopped engine delivers afterwards changes nothing.
        let writes = h.writes
        await h.mirror.handle([.stateUpdate(.init(stateSerialization: Self.state("bob's")))], from: engine)
        #expect(h.writes == writes)
        await h.close()
    }

    // MARK: fetchedDatabaseChanges

    @Test func fetchedDatabaseChanges_adoptsAnotherDevicesShareAndAsksAboutADeletedPrimaryZone() async throws {
        let h = try await MirrorHarness.make()
        let share = ZoneID(zoneName: MirrorZone.shareZoneName(root: UUID(), primary: Self.zone))
        try await h.deliver(.fetchedDatabaseChanges(.init(modifications: [share, ZoneID(zoneName: "OtherApp")], deletions: [])))
        let zones = try await h.ledger { try $0.sharedZones() }
        #expect(zones.map(\.zoneID) == [share], "the other app's zone is not this store's")
        #expect(zones.first?.role == .ownedShare && zones.first?.serverState == .saved)

        try await h.deliver(.fetchedDatabaseChanges(.init(modifications: [], deletions: [.init(zoneID: Self.zone, reason: .deleted)])))
        #expect(try await h.ledger { try $0.primaryZone()?.decision?.reason } == .zoneDeleted)
        await h.close()
    }

    @Test func fetchedDatabaseChanges_aSharedZoneGoneWithNothingUnsent_isRemoved() async throws {
        let h = try await MirrorHarness.make()
        let shared = ZoneID(zoneName: "Trip", ownerRecordName: "_bob")
        try await h.deliver(.fetchedDatabaseChanges(.init(modifications: [shared], deletions: [])), from: .shared)
        #expect(try await h.ledger { try $0.zone(shared)?.role } == .sharedWithMe)
        try await h.deliver(.fetchedDatabaseChanges(.init(modifications: [], deletions: [.init(zoneID: shared, reason: .deleted)])), from: .shared)
        #expect(try await h.ledger { try $0.zone(shared) } == nil)
        await h.close()
    }

    // MARK: fetchedRecordZoneChanges

    @Test func fetchedRecordZoneChanges_appliesRecordsAndTombstonesWithTheirState() async throws {
        let h = try await MirrorHarness.make()
        let gone = try await Self.syncedNote(h, title: "to go")
        let id = UUID()
        try await h.deliver(Self.page([Self.note(id, ["title": .string("from B")], tag: "5")], deleting: [gone.id], token: "after page"))
        let (row, goneRow, state) = try await h.ledger {
            (try $0.find(id.uuidString), try $0.find(gone.id.uuidString), try $0.state(.engineState, as: SyncEngine.State.Serialization.self))
        }
        #expect(try await h.store.read { try $0.fetch(Note.self, id: id) }?.title == "from B")
        #expect(row?.changeTag == "5" && row?.hasPendingUpload == false)
        #expect(try await h.store.read { try $0.fetch(Note.self, id: gone.id) } == nil && goneRow == nil)
        #expect(state?.databaseSyncToken == "after page", "the token commits with the page")
        await h.close()
    }

    /// Found by the three-device convergence soak (seed 18180407257686163731): a note fetched in a
    /// folder that had not arrived shows no folder here; moved by this device before the folder
    /// came, the fetched folder is replaced unseen, so it is logged as the server's value that lost.
    @Test func fetchedRecordZoneChanges_aReferenceWaitingForItsTarget_isLoggedWhenAnEditReplacesIt() async throws {
        let h = try await MirrorHarness.make()
        let (id, waiting, chosen) = (UUID(), UUID(), Folder(title: "chosen"))
        let folder = FieldValue.reference(Reference(recordName: waiting.uuidString, zoneID: Self.zone))
        try await h.deliver(Self.page([Self.note(id, ["title": .string("from B"), "folder": folder], tag: "5")]))
        #expect(try await h.store.read { try $0.fetch(Note.self, id: id) }?.folder == nil, "the folder has not arrived")
        try await h.write { context in
            try context.insert(chosen)
            try context.move(note: id, to: chosen.id)
        }
        let logged = try PersistentCloudContainer.conflicts(in: h.store)
        #expect(logged.map(\.property) == ["folder"])
        #expect(logged.first?.losingValue == .uuid(waiting) && logged.first?.losingSide == .server)
        #expect(logged.first?.winningValue == .uuid(chosen.id) && logged.first?.policy == "waitingReference")
        let upload = try #require(try await h.nextBatch()?.recordsToSave.first { $0.recordName == id.uuidString })
        #expect(upload["folder"] == .reference(Reference(recordName: chosen.id.uuidString, zoneID: Self.zone)))
        await h.close()
    }

    @Test func fetchedRecordZoneChanges_mergesWithWhatThisDeviceHasNotSent() async throws {
        let h = try await MirrorHarness.make()
        var note = try await Self.syncedNote(h)
        note.title = "mine"
        try await h.write { [note] in try $0.update(note) }
        try await h.deliver(Self.page([Self.note(note.id, ["title": .string("synced"), "body": .string("theirs")], tag: "2")]))
        let noteID = note.id
        let merged = try #require(try await h.store.read { try $0.fetch(Note.self, id: noteID) })
        #expect(merged.title == "mine" && merged.body == "theirs")
        #expect(try await h.ledger { try $0.find(noteID.uuidString)?.pendingUpload?.keysToUpload } == ["title"])
        #expect(try await h.engine().state.hasPendingUntrackedChanges, "what stays pending wakes the engine")
        await h.close()
    }

    // MARK: sentDatabaseChanges

    @Test func sentDatabaseChanges_aSavedZoneIsOnTheServerAndARefusalIsTheLastFailure() async throws {
        let h = try await MirrorHarness.make()
        #expect(try await h.ledger { try $0.primaryZone()?.serverState } == .unsaved)
        try await h.deliver(
            .sentDatabaseChanges(
                .init(
                    savedZones: [Zone(zoneID: Self.zone)], failedZoneSaves: [.init(zoneID: ZoneID(zoneName: "X"), error: ServerError(.badRequest, reason: "no"))],
                    deletedZoneIDs: [], failedZoneDeletes: [:], stateSerialization: Self.state("zones"))))
        let (state, failure) = try await h.ledger { (try $0.primaryZone()?.serverState, try $0.state(.lastError, as: MirrorFailure.self)) }
        #expect(state == .saved)
        #expect(failure?.code == "BAD_REQUEST")
        await h.close()
    }

    // MARK: sentRecordZoneChanges

    @Test func sentRecordZoneChanges_settlesRefusesAndCountsRetries() async throws {
        let h = try await MirrorHarness.make()
        let saved = Note(title: "saved"), refused = Note(title: "refused"), retried = Note(title: "retried")
        try await h.write { for note in [saved, refused, retried] { try $0.insert(note) } }
        let batch = try #require(try await h.nextBatch())
        #expect(batch.recordsToSave.count == 3 && !batch.hasMorePendingChanges)
        func record(_ note: Note) throws -> Record { try #require(batch.recordsToSave.first { $0.recordName == note.id.uuidString }) }
        var acknowledged = try record(saved)
        acknowledged.recordChangeTag = "1"
        let tooLarge = ServerError(.limitExceeded, reason: "too large", recordName: refused.id.uuidString)
        let throttled = ServerError(.throttled, retryAfter: 30, recordName: retried.id.uuidString)
        try await h.deliver(
            Self.sent(
                saved: [acknowledged], failed: [.init(record: try record(refused), error: tooLarge)],
                retrying: [try record(retried).recordID: throttled]))
        let rows = try await h.ledger { ledger in try [saved, refused, retried].map { try ledger.find($0.id.uuidString) } }
        #expect(rows[0]?.changeTag == "1" && rows[0]?.hasPendingUpload == false)
        #expect(rows[1]?.refusal == tooLarge)
        #expect(rows[2]?.retry?.attempts == 1 && rows[2]?.hasPendingUpload == true)
        let failure = try await h.ledger { try $0.state(.lastError, as: MirrorFailure.self) }
        #expect(failure?.recordName == refused.id.uuidString, "the refusal is the last failure")
        await h.close()
    }

    @Test func sentRecordZoneChanges_aMissingZoneIsMarkedMissingForTheNextFetchToExplain() async throws {
        let h = try await MirrorHarness.make()
        _ = try await Self.syncedNote(h)
        try await h.deliver(.sentDatabaseChanges(.init(savedZones: [Zone(zoneID: Self.zone)], failedZoneSaves: [], deletedZoneIDs: [], failedZoneDeletes: [:], stateSerialization: Self.state("zones"))))
        try await h.write { try $0.insert(Note(title: "into a missing zone")) }
        let record = try #require(try await h.nextBatch()?.recordsToSave.first)
        try await h.deliver(Self.sent(failed: [.init(record: record, error: ServerError(.zoneNotFound, recordName: record.recordName))]))
        #expect(try await h.ledger { try $0.primaryZone()?.serverState } == .missing)
        await h.close()
    }

    // MARK: willFetchChanges, willSendChanges

    @Test func willFetchAndWillSend_writeNothingAndStartTheirEvents() async throws {
        let h = try await MirrorHarness.make()
        try await h.write { try $0.insert(Note(title: "pending")) }
        let writes = h.writes
        try await h.deliver(.willFetchChanges(.init(context: Self.fetchContext)))
        try await h.deliver(.willSendChanges(.init(context: Self.sendContext)))
        #expect(h.writes == writes)
        #expect(await Self.appEvents(h, kind: .export).first?.total == 1, "the export starts with what is pending")
        await h.close()
    }

    @Test func willFetchChanges_withoutAnotherUser_confirmsTheUserReturned() async throws {
        let directory = try TemporaryDirectory()
        let first = try await MirrorHarness.make(directory: directory)
        try await first.deliver(.accountChange(.init(changeType: .switchAccounts(previousUser: "_alice", currentUser: "_bob"))))
        await first.close()
        // Opened again: the engine's first operation reports no other user this time.
        let h = try await MirrorHarness.make(directory: directory)
        #expect(try await h.mirror.pausingDecision() == nil, "unconfirmed: syncing goes on until the engine says")
        try await h.deliver(.willFetchChanges(.init(context: Self.fetchContext)))
        #expect(try await h.ledger { try $0.primaryZone()?.decision } == nil)
        await h.close()
    }

    // MARK: willFetchRecordZoneChanges, didFetchRecordZoneChanges

    @Test func aZoneFetchedFromScratch_dropsWhatTheServerNoLongerHas() async throws {
        let h = try await MirrorHarness.make()
        let kept = try await Self.syncedNote(h, title: "kept")
        let gone = try await Self.syncedNote(h, title: "compacted away")
        try await h.deliver(
            .willFetchRecordZoneChanges(.init(zoneID: Self.zone, fromScratch: true)),
            Self.page([Self.note(kept.id, ["title": .string("kept")], tag: "1", by: "A")]),
            .didFetchRecordZoneChanges(.init(zoneID: Self.zone, error: nil)))
        #expect(try await h.store.read { try $0.fetch(Note.self, sortBy: [.ascending("title")]) }.map(\.title) == ["kept"])
        #expect(try await h.ledger { try $0.find(gone.id.uuidString) } == nil)
        await h.close()
    }

    @Test func didFetchRecordZoneChanges_thePrimaryZoneNotFound_uploadsEverythingAgain() async throws {
        let h = try await MirrorHarness.make()
        let note = try await Self.syncedNote(h)
        try await h.deliver(
            .willFetchRecordZoneChanges(.init(zoneID: Self.zone, fromScratch: true)),
            .didFetchRecordZoneChanges(.init(zoneID: Self.zone, error: CloudError.server(ServerError(.zoneNotFound), httpStatus: 404))))
        let (row, primary) = try await h.ledger { (try $0.find(note.id.uuidString), try $0.primaryZone()) }
        #expect(try row?.pendingUpload?.keysToUpload == nil && row?.hasPendingUpload == true, "whole, as a new record")
        #expect(primary?.serverState == .unsaved)
        #expect(try await h.engine().state.pendingDatabaseChanges == [.saveZone(Self.zone)], "the zone is saved first")
        await h.close()
    }

    // MARK: didFetchChanges, didSendChanges

    @Test func didFetchAndDidSend_stampTheirSuccessOrRecordTheirFailure() async throws {
        let h = try await MirrorHarness.make()
        let unreachable = CloudError(.network, message: "the network is down")
        try await h.deliver(.willFetchChanges(.init(context: Self.fetchContext)), .didFetchChanges(.init(context: Self.fetchContext, error: unreachable)))
        let failed = try await h.ledger { (try $0.state(.lastImport, as: Date.self), try $0.state(.lastError, as: MirrorFailure.self)) }
        #expect(failed.0 == nil && failed.1?.message == unreachable.description)

        try await h.deliver(.willFetchChanges(.init(context: Self.fetchContext)), .didFetchChanges(.init(context: Self.fetchContext)))
        try await h.deliver(.willSendChanges(.init(context: Self.sendContext)), .didSendChanges(.init(context: Self.sendContext)))
        let succeeded = try await h.ledger {
            (try $0.state(.lastImport, as: Date.self), try $0.state(.lastExport, as: Date.self), try $0.state(.lastError, as: MirrorFailure.self))
        }
        #expect(succeeded.0 != nil && succeeded.1 != nil)
        #expect(succeeded.2 == nil, "past once an import and an export succeeded after it")
        await h.close()
    }

    /// A send's last answer and its end come in one call: one transaction settles the batch,
    /// stores the state and stamps the export.
    @Test func aSendsAnswerAndItsEnd_areOneTransaction() async throws {
        let h = try await MirrorHarness.make()
        try await h.write { try $0.insert(Note(title: "one")) }
        var record = try #require(try await h.nextBatch()?.recordsToSave.first)
        record.recordChangeTag = "1"
        let writes = h.writes
        try await h.deliver(Self.sent(saved: [record], token: "done"), .didSendChanges(.init(context: Self.sendContext)))
        #expect(h.writes == writes + 1)
        let (pending, exported) = try await h.ledger { (try $0.pendingCount(), try $0.state(.lastExport, as: Date.self)) }
        #expect(pending == 0 && exported != nil)
        await h.close()
    }
}
