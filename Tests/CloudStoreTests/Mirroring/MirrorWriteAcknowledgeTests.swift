@testable import CloudStore
@testable import CloudStoreSync
import CloudStoreTesting
import Foundation
import GRDB
import Logging
import Testing

/// Acknowledgements, driven directly on a real store: what stays pending, and what the server's
/// copy brings. The server answers a save with its whole copy of the record (as `records/modify`
/// does): a field it does not carry is null there.
@Suite("Mirroring: acknowledgements settle pending uploads by revision and merge the server's copy")
struct MirrorWriteAcknowledgeTests {
    let zoneID = ZoneID(zoneName: "Notes")

    func transaction<T: Sendable>(
        _ store: PersistentStore, now: Date = Date(), _ body: @escaping @Sendable (MirrorWrite, inout MirrorEffects) throws -> T
    ) async throws -> T {
        let setup = MirrorSetup(
            schema: try Schema.notes(), zoneID: zoneID, publicEntities: .none, policy: .serverWins, deviceID: "A", logger: .quiet)
        return try await store.write(author: MirrorAuthor.import) { context in
            var effects = MirrorEffects()
            return try body(try MirrorWrite(context: context, setup: setup, now: now), &effects)
        }
    }

    func pending(_ store: PersistentStore, _ id: UUID) async throws -> PendingUpload? {
        try await store.read { try Ledger($0.db).find(id.uuidString)?.pendingUpload }
    }

    /// The server answered with its copy holding what was sent and another device's edit of
    /// another field (a retry found this device's first attempt applied, and the engine counted
    /// the conflict as saved): the other device's value is applied here, nothing stays pending.
    @Test func anAcknowledgementBringsWhatElseTheServersCopyHolds() async throws {
        let a = try await TestDevice.make("A", server: nil)
        let note = Note(title: "mine")
        try await a.write { try $0.insert(note) }
        let prepared = try await transaction(a.store) { try $0.prepareUploads(limit: 10, skipping: [], &$1).uploads }
        let upload = try #require(prepared.first)
        var saved = try #require(upload.record)
        saved.recordChangeTag = "2"
        saved.fields["body"] = .string("theirs")
        try await transaction(a.store) { [saved] in try $0.acknowledgeSave(of: saved, sent: upload.sent, &$1) }
        #expect(try a.note(note.id)?.body == "theirs")
        #expect(try a.note(note.id)?.title == "mine")
        #expect(try await pending(a.store, note.id) == nil)
        #expect(try a.container.conflicts().isEmpty)
        await a.close()
    }

    /// The engine asks for the next batch while one is in flight, skipping the records in it: the
    /// batch it gets is the uploads after them, not nothing (which left every bulk upload waiting
    /// for each acknowledgement before preparing the next batch).
    @Test func theBatchPreparedWhileOneIsInFlight_isTheNextUploads() async throws {
        let a = try await TestDevice.make("A", server: nil)
        try await a.write { context in for index in 0..<5 { try context.insert(Note(title: "n\(index)")) } }
        let first = try await transaction(a.store) { try $0.prepareUploads(limit: 2, skipping: [], &$1).uploads }
        let inFlight = Set(first.map(\.change.recordID))
        let next = try await transaction(a.store) { try $0.prepareUploads(limit: 2, skipping: inFlight, &$1).uploads }
        let rest = try await transaction(a.store) { try $0.prepareUploads(limit: 10, skipping: inFlight, &$1).uploads }
        #expect(first.count == 2 && next.count == 2 && rest.count == 3)
        #expect(inFlight.isDisjoint(with: next.map(\.change.recordID)))
        #expect(next.map(\.change.recordID) == Array(rest.map(\.change.recordID).prefix(2)), "in upload order")
        await a.close()
    }

    /// A create the server took as sent, with nothing changed here since (the common answer, which
    /// settles without reading the object): nothing stays pending, the server's version is this
    /// device's, and what was sent is the ancestor a later merge starts from.
    @Test func aCreateTheServerTookAsSent_settlesWithTheSentValuesAsItsAncestor() async throws {
        let a = try await TestDevice.make("A", server: nil)
        let note = Note(title: "mine", body: "text")
        try await a.write { try $0.insert(note) }
        let upload = try #require(try await transaction(a.store) { try $0.prepareUploads(limit: 10, skipping: [], &$1).uploads }.first)
        var saved = try #require(upload.record)
        saved.recordChangeTag = "1"
        try await transaction(a.store) { [saved] in try $0.acknowledgeSave(of: saved, sent: upload.sent, &$1) }
        let row = try #require(try await a.store.read { try Ledger($0.db).find(note.id.uuidString) })
        #expect(try row.pendingUpload == nil)
        #expect(row.changeTag == "1")
        #expect(try row.ancestor == upload.sent.values)
        #expect(try a.note(note.id)?.title == "mine")
        #expect(try a.note(note.id)?.body == "text")
        await a.close()
    }

    /// The mirror asks for references waiting for an arriving object, and for its links, only
    /// where the schema allows them: a note's folder waits for a folder; notes and tags link.
    @Test func waitingReferencesAndLinks_areLookedUpForTheEntitiesThatCanHaveThem() throws {
        let setup = MirrorSetup(
            schema: try Schema.notes(), zoneID: zoneID, publicEntities: .none, policy: .serverWins, deviceID: "A", logger: .quiet)
        #expect(setup.referencedEntities == ["Folder"])
        #expect(setup.linkedEntities == ["Note", "Tag"])
    }

    /// An edit saved while the upload was in flight stays pending; an acknowledgement of the
    /// revision that was sent clears the pending upload.
    @Test func onlyTheRevisionThatWasSentIsCleared() async throws {
        let a = try await TestDevice.make("A", server: nil)
        var note = Note(title: "first")
        try await a.write { [note] in try $0.insert(note) }
        let first = try #require(try await transaction(a.store) { try $0.prepareUploads(limit: 10, skipping: [], &$1).uploads }.first)
        note.title = "second"
        try await a.write { [note] in try $0.update(note) }
        var saved = try #require(first.record)
        saved.recordChangeTag = "1"
        try await transaction(a.store) { [saved] in try $0.acknowledgeSave(of: saved, sent: first.sent, &$1) }
        #expect(try await pending(a.store, note.id)?.keysToUpload == ["title"], "the later edit is still to upload")

        let second = try #require(try await transaction(a.store) { try $0.prepareUploads(limit: 10, skipping: [], &$1).uploads }.first)
        #expect(second.record?.fields.keys.contains("body") == false, "only the title is sent")
        // The server answers with its whole copy: every field, the ones not sent included.
        var savedAgain = saved
        savedAgain.fields.merge(try #require(second.record).fields) { _, sent in sent }
        savedAgain.recordChangeTag = "2"
        try await transaction(a.store) { [savedAgain] in try $0.acknowledgeSave(of: savedAgain, sent: second.sent, &$1) }
        #expect(try await pending(a.store, note.id) == nil)
        await a.close()
    }

    /// A batch whose note the server did not take counts the attempt on the note's row, with the
    /// error and the transaction's time plus `retryAfter`, in the transaction that stores the
    /// engine's state; a retry of a record of the same name in another zone leaves it alone, and
    /// the server's refusal for good ends it.
    @Test func anUploadTheServerDidNotTake_countsItsAttemptsUntilAnotherAnswerEndsThem() async throws {
        let a = try await TestDevice.make("A", server: nil)
        let note = Note(title: "waits")
        try await a.write { [note] in try $0.insert(note) }
        let upload = try #require(try await transaction(a.store) { try $0.prepareUploads(limit: 10, skipping: [], &$1).uploads }.first)
        let recordID = upload.change.recordID
        @Sendable func sent(
            retrying: [RecordID: ServerError] = [:], failed: [SyncEngine.Event.SentRecordZoneChanges.FailedRecordSave] = []
        ) -> SyncEngine.Event.SentRecordZoneChanges {
            SyncEngine.Event.SentRecordZoneChanges(
                savedRecords: [], failedRecordSaves: failed, deletedRecordIDs: [], failedRecordDeletes: [:],
                retryingRecordChanges: retrying, stateSerialization: SyncEngine.State.Serialization(databaseToken: "after"))
        }
        func retry() async throws -> PersistentCloudContainer.ObjectSyncState.UploadRetry? {
            try await a.store.read { try Ledger($0.db).find(recordID.recordName)?.retry }
        }
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let throttled = ServerError(.throttled, reason: "slow down", retryAfter: 5, recordName: recordID.recordName)
        try await transaction(a.store, now: now) { _ = try $0.acknowledge(sent(retrying: [recordID: throttled]), uploads: [:], &$1) }
        #expect(try await retry() == .init(error: throttled, attempts: 1, nextAttempt: now.addingTimeInterval(5)))
        #expect(
            try await a.store.read { try Ledger($0.db).state(.engineState, as: SyncEngine.State.Serialization.self)?.databaseToken }
                == "after")

        let internalError = ServerError(.internalError, recordName: recordID.recordName)
        try await transaction(a.store, now: now) { _ = try $0.acknowledge(sent(retrying: [recordID: internalError]), uploads: [:], &$1) }
        #expect(try await retry() == .init(error: internalError, attempts: 2, nextAttempt: nil))
        let elsewhere = RecordID(recordName: recordID.recordName, zoneID: ZoneID(zoneName: "Notes.share-other"))
        try await transaction(a.store) { _ = try $0.acknowledge(sent(retrying: [elsewhere: throttled]), uploads: [:], &$1) }
        #expect(try await retry()?.attempts == 2, "a record of another zone is another record")

        let tooLarge = ServerError(.limitExceeded, reason: "too large", recordName: recordID.recordName)
        let record = try #require(upload.record)
        try await transaction(a.store) { _ = try $0.acknowledge(sent(failed: [.init(record: record, error: tooLarge)]), uploads: [:], &$1) }
        #expect(try await retry() == nil, "refused for good: no longer retried")
        #expect(try await a.store.read { try Ledger($0.db).find(recordID.recordName)?.refusal } == tooLarge)
        await a.close()
    }

    /// Found by the shared-zone convergence soak: change tags are per zone, and a note another
    /// device moved into the primary zone came with the same tag its copy had in the share's zone;
    /// the import took it for the version it had and skipped it, and the old copy's tombstone then
    /// deleted the note.
    @Test func aRecordArrivingInAnotherZoneWithTheSameTag_isApplied() async throws {
        let a = try await TestDevice.make("A", server: nil)
        var note = Note(title: "before")
        try await a.write { [note] in try $0.insert(note) }
        let shareZone = MirrorZone.Key(name: "Notes.share-\(UUID().uuidString)", owner: nil)
        let (id, zoneID) = (note.id, zoneID)
        let snapshot = try #require(try await a.store.read { try $0.fetchSnapshot(entityName: "Note", id: id) })
        var inShare = try Schema.notes().record(for: snapshot, in: ZoneID(zoneName: try #require(shareZone.name)))
        inShare.recordChangeTag = "7"
        try await transaction(a.store) { [inShare] write, effects in
            var row = try #require(try write.ledger.find(id.uuidString))
            row.zone = shareZone
            row.serverHas(inShare, deviceID: write.deviceID)
            try write.ledger.setPending(nil, of: &row)
            try write.save(row, &effects)
        }
        note.title = "moved"
        var moved = try Schema.notes().record(for: snapshot, in: zoneID)
        moved.fields["title"] = .string("moved")
        moved.recordChangeTag = "7"
        try await transaction(a.store) { [moved] in try $0.applyFetched([moved], deletions: [], in: zoneID, &$1) }
        #expect(try a.note(id)?.title == "moved", "applied, not taken for the share zone's version 7")
        #expect(try await a.store.read { try Ledger($0.db).find(id.uuidString)?.zone } == .primary)
        await a.close()
    }

    /// Found by the shared-zone convergence soak: another device moved a note out of the shared
    /// folder (a create in the primary zone, then a delete of the copy in the share's zone). This
    /// device fetched the primary zone first, then the share's zone, where the copy was still there
    /// with an edit made before the move: it took that copy for the note moving back, and the
    /// copy's tombstone then deleted the note. A copy the server wrote before the version this
    /// device has is one a move left behind: skipped. A later one is a move, and is applied.
    @Test func aCopyFromAnotherZone_isAMoveOnlyIfTheServerWroteItAfterTheVersionHere() async throws {
        let a = try await TestDevice.make("A", server: nil)
        let note = Note(title: "first")
        try await a.write { [note] in try $0.insert(note) }
        let shareZoneID = ZoneID(zoneName: "Notes.share-\(UUID().uuidString)")
        let (id, zoneID) = (note.id, zoneID)
        let snapshot = try #require(try await a.store.read { try $0.fetchSnapshot(entityName: "Note", id: id) })
        func version(_ title: String, in zone: ZoneID, tag: String, at milliseconds: Int64) throws -> CloudStore.Record {
            var record = try Schema.notes().record(for: snapshot, in: zone)
            record.fields["title"] = .string(title)
            record.recordChangeTag = tag
            record.modified = CloudStore.Record.Stamp(timestamp: Date(millisecondsSince1970: milliseconds), deviceID: "B")
            return record
        }
        func apply(_ records: [CloudStore.Record], deleting: [CloudStore.Record] = [], in zone: ZoneID) async throws {
            let deletions = deleting.map {
                SyncEngine.Event.FetchedRecordZoneChanges.Deletion(recordID: $0.recordID, recordType: $0.recordType)
            }
            try await transaction(a.store) { try $0.applyFetched(records, deletions: deletions, in: zone, &$1) }
        }
        func state() async throws -> (title: String?, zone: MirrorZone.Key?) {
            (try a.note(id)?.title, try await a.store.read { try Ledger($0.db).find(id.uuidString)?.zone })
        }
        // The note as the primary zone has it since another device moved it there at 3,000 (the
        // note was in the share's zone before; its tags there are other tags).
        try await apply([try version("moved out", in: zoneID, tag: "1", at: 3_000)], in: zoneID)
        // The share's zone, fetched next: the copy as it was edited at 2,000, before the move, and
        // then the move's delete of it.
        let leftBehind = try version("edited before the move", in: shareZoneID, tag: "5", at: 2_000)
        try await apply([leftBehind], in: shareZoneID)
        #expect(try await state() == ("moved out", .primary), "the older copy is not the note moving back")
        try await apply([], deleting: [leftBehind], in: shareZoneID)
        #expect(try await state() == ("moved out", .primary), "its tombstone is not the note's")
        // A copy the server wrote after the version here is the note moving (back) into the share.
        try await apply([try version("moved back", in: shareZoneID, tag: "6", at: 4_000)], in: shareZoneID)
        #expect(try await state() == ("moved back", MirrorZone.Key(shareZoneID)))
        await a.close()
    }
}
