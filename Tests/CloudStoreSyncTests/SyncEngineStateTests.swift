import CloudStoreWire
import Foundation
import Synchronization
import Testing

@testable import CloudStoreSync

@Suite struct SyncEngineStateTests {
    let zone = ZoneID(zoneName: "Notes")
    var a: RecordID { RecordID(recordName: "A", zoneID: zone) }
    var b: RecordID { RecordID(recordName: "B", zoneID: zone) }

    @Test func dedup_saveASaveBSaveAKeepsFirstPosition() {
        let state = SyncEngine.State(nil)
        state.add(pendingRecordZoneChanges: [.saveRecord(a), .saveRecord(b), .saveRecord(a)])
        #expect(state.pendingRecordZoneChanges == [.saveRecord(a), .saveRecord(b)])
    }

    @Test func dedup_saveThenDeleteLeavesDelete() {
        let state = SyncEngine.State(nil)
        state.add(pendingRecordZoneChanges: [.saveRecord(a)])
        state.add(pendingRecordZoneChanges: [.deleteRecord(a)])
        #expect(state.pendingRecordZoneChanges == [.deleteRecord(a)])
    }

    @Test func dedup_deleteThenSaveLeavesSave() {
        let state = SyncEngine.State(nil)
        state.add(pendingRecordZoneChanges: [.saveRecord(b), .deleteRecord(a)])
        state.add(pendingRecordZoneChanges: [.saveRecord(a)])
        #expect(state.pendingRecordZoneChanges == [.saveRecord(b), .saveRecord(a)])
    }

    @Test func dedup_zonesFollowTheSameRules() {
        let state = SyncEngine.State(nil)
        let other = ZoneID(zoneName: "Other")
        state.add(pendingDatabaseChanges: [.saveZone(zone), .saveZone(other), .saveZone(zone)])
        #expect(state.pendingDatabaseChanges == [.saveZone(zone), .saveZone(other)])
        state.add(pendingDatabaseChanges: [.deleteZone(zone)])
        #expect(state.pendingDatabaseChanges == [.deleteZone(zone), .saveZone(other)])
        state.add(pendingDatabaseChanges: [.saveZone(zone)])
        #expect(state.pendingDatabaseChanges == [.saveZone(zone), .saveZone(other)])
    }

    @Test func remove_onlyTheExactChange() {
        let state = SyncEngine.State(nil)
        state.add(pendingRecordZoneChanges: [.deleteRecord(a), .saveRecord(b)])
        state.remove(pendingRecordZoneChanges: [.saveRecord(a)])
        #expect(state.pendingRecordZoneChanges == [.deleteRecord(a), .saveRecord(b)])
        state.remove(pendingRecordZoneChanges: [.deleteRecord(a)])
        #expect(state.pendingRecordZoneChanges == [.saveRecord(b)])
        state.remove(pendingDatabaseChanges: [.saveZone(zone)])
        #expect(state.pendingDatabaseChanges.isEmpty)
    }

    @Test func acknowledgement_keepsAChangeAddedAgainWhileInFlight() {
        var list = PendingChangeList<SyncEngine.PendingRecordZoneChange>([.saveRecord(a), .saveRecord(b)])
        let noted = list.revisionsByKey
        list.add(.saveRecord(a))  // the user edited A again while the batch was in flight
        list.removeAcknowledged([.saveRecord(a), .saveRecord(b)], revisions: noted)
        #expect(list.changes == [.saveRecord(a)])
    }

    @Test func acknowledgement_ofASaveDoesNotRemoveALaterDelete() {
        var list = PendingChangeList<SyncEngine.PendingRecordZoneChange>([.saveRecord(a)])
        let noted = list.revisionsByKey
        list.add(.deleteRecord(a))
        list.removeAcknowledged([.saveRecord(a)], revisions: noted)
        #expect(list.changes == [.deleteRecord(a)])
    }

    @Test func observer_hearsAddsAndRemoves() {
        let state = SyncEngine.State(nil)
        let heard = Mutex<[Bool]>([])
        state.setObserver { added in heard.withLock { $0.append(added) } }
        state.add(pendingRecordZoneChanges: [.saveRecord(a)])
        state.remove(pendingRecordZoneChanges: [.saveRecord(a)])
        state.remove(pendingRecordZoneChanges: [.saveRecord(a)])  // nothing to remove: not heard
        state.hasPendingUntrackedChanges = true
        #expect(heard.withLock { $0 } == [true, false, true])
    }

    @Test func serialization_roundTripsEverything() throws {
        let state = SyncEngine.State(nil)
        state.add(pendingRecordZoneChanges: [.saveRecord(a), .deleteRecord(b)])
        state.add(pendingDatabaseChanges: [.saveZone(zone)])
        state.hasPendingUntrackedChanges = true
        state.withStorage { storage in
            storage.userRecordName = "_u1"
            storage.setDatabaseToken("db-7")
            storage.setZoneToken("z-3", for: zone)
            storage.markUnfetched(ZoneID(zoneName: "Other"))
            storage.setFetchingFromScratch(true, ZoneID(zoneName: "Other"))
        }
        let serialization = state.serialization
        let data = try JSONEncoder().encode(serialization)
        let decoded = try JSONDecoder().decode(SyncEngine.State.Serialization.self, from: data)
        #expect(decoded == serialization)

        let restored = SyncEngine.State(decoded)
        #expect(restored.pendingRecordZoneChanges == [.saveRecord(a), .deleteRecord(b)])
        #expect(restored.pendingDatabaseChanges == [.saveZone(zone)])
        #expect(!restored.hasPendingUntrackedChanges, "the app's own changes are the app's to announce at launch")
        #expect(restored.zoneIDsWithUnfetchedServerChanges == [ZoneID(zoneName: "Other")])
        restored.withStorage { storage in
            #expect(storage.userRecordName == "_u1")
            #expect(storage.databaseToken == "db-7")
            #expect(storage.zoneTokens == [zone: "z-3"])
            #expect(storage.zonesFetchingFromScratch == [ZoneID(zoneName: "Other")])
        }
        // A state saved before zonesFetchingFromScratch existed reads as none under way.
        let older = try JSONDecoder().decode(SyncEngine.State.Serialization.self, from: Data(#"{"format": 1}"#.utf8))
        #expect(older.zonesFetchingFromScratch.isEmpty)
    }

    /// A send moves a zone's token past its own writes only from where the state is, and only
    /// once the zone's last fetch completed.
    @Test func tokenAfterSend_onlyFromTheStatesTokenWithNoFetchUnfinished() {
        let state = SyncEngine.State(nil)
        state.withStorage { storage in
            #expect(storage.acceptsTokenAfterSend(from: nil, in: zone), "a zone never fetched, never written")
            storage.setZoneToken("z-1", for: zone)
            #expect(storage.acceptsTokenAfterSend(from: "z-1", in: zone))
            #expect(!storage.acceptsTokenAfterSend(from: nil, in: zone))
            #expect(!storage.acceptsTokenAfterSend(from: "z-0", in: zone))
            storage.markUnfetched(zone)
            #expect(!storage.acceptsTokenAfterSend(from: "z-1", in: zone), "a fetch of the zone is owed")
            storage.markFetched(zone)
            storage.setFetchingFromScratch(true, zone)
            #expect(!storage.acceptsTokenAfterSend(from: "z-1", in: zone), "a fetch from scratch broke off")
            storage.setFetchingFromScratch(false, zone)
            #expect(storage.acceptsTokenAfterSend(from: "z-1", in: zone))
        }
    }

    @Test func serialization_fromANewerFormatIsRefusedWithAClearError() throws {
        let data = Data(#"{"format": 99}"#.utf8)
        let error = #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(SyncEngine.State.Serialization.self, from: data)
        }
        #expect("\(String(describing: error))".contains("newer than this version"))
    }

    @Test func reset_forAnotherAccountDropsTokensAndPendingChanges() {
        let state = SyncEngine.State(nil)
        state.add(pendingRecordZoneChanges: [.saveRecord(a)])
        state.withStorage { storage in
            storage.userRecordName = "_u1"
            storage.setZoneToken("z", for: zone)
            let before = storage.version
            storage.reset(userRecordName: "_u2")
            #expect(storage.version > before)
        }
        #expect(state.pendingRecordZoneChanges.isEmpty)
        state.withStorage { storage in
            #expect(storage.zoneTokens.isEmpty)
            #expect(storage.userRecordName == "_u2")
        }
    }
}
