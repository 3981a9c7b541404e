@testable import CloudStore
@testable import CloudStoreSync
import CloudStoreTesting
import Foundation
import Testing

/// The mirror's answers to the engine's questions and its wakes, with a scripted engine: a save
/// wakes the engine (and asks for the zone to be saved first while it is not on the server), a
/// batch says whether more waits after it, and a zone a decision holds hands out nothing.
@Suite("Mirroring: batches and wakes, with a scripted engine")
struct MirrorBatchTests {
    @Test func aSave_wakesTheEngineWithTheZoneToSaveFirst_untilTheZoneIsSaved() async throws {
        let h = try await MirrorHarness.make()
        let engine = try await h.engine()
        #expect(!engine.state.hasPendingUntrackedChanges)
        try await h.write { try $0.insert(Note(title: "first")) }
        #expect(engine.state.hasPendingUntrackedChanges)
        #expect(engine.state.pendingDatabaseChanges == [.saveZone(MirrorHarness.zoneID)])

        try await h.deliver(
            .sentDatabaseChanges(
                .init(
                    savedZones: [Zone(zoneID: MirrorHarness.zoneID)], failedZoneSaves: [], deletedZoneIDs: [], failedZoneDeletes: [:],
                    stateSerialization: SyncEngine.State.Serialization())))
        engine.state.hasPendingUntrackedChanges = false
        try await h.write { try $0.insert(Note(title: "second")) }
        #expect(engine.state.hasPendingUntrackedChanges)
        #expect(engine.state.pendingDatabaseChanges.isEmpty, "the zone is on the server now")
        await h.close()
    }

    @Test func aBatch_saysWhetherMoreWaitsAfterIt() async throws {
        let h = try await MirrorHarness.make()
        try await h.write { context in for index in 0..<3 { try context.insert(Note(title: "n\(index)")) } }
        let first = try #require(try await h.nextBatch(limit: 2))
        #expect(first.recordsToSave.count == 2 && first.hasMorePendingChanges)
        let inFlight = Set(first.recordsToSave.map(\.recordID))
        let last = try #require(try await h.nextBatch(limit: 2, skipping: inFlight))
        #expect(last.recordsToSave.count == 1 && !last.hasMorePendingChanges)
        #expect(try await h.nextBatch(limit: 2, skipping: inFlight.union(last.recordsToSave.map(\.recordID))) == nil)
        // Handed out: each may be on the server from now on.
        let onServer = try await h.ledger { ledger in try ledger.allRecords().filter(\.mayBeOnServer).count }
        #expect(onServer == 3)
        await h.close()
    }

    @Test func aZoneADecisionHolds_handsOutNothing() async throws {
        let h = try await MirrorHarness.make()
        try await h.write { try $0.insert(Note(title: "waits")) }
        try await h.deliver(
            .fetchedDatabaseChanges(.init(modifications: [], deletions: [.init(zoneID: MirrorHarness.zoneID, reason: .deleted)])))
        #expect(try await h.nextBatch() == nil)
        let held = await #expect(throws: ContainerError.self) { try await h.mirror.checkCanSync() }
        #expect(held?.code == .localDataDecisionNeeded)
        await h.close()
    }

    /// What an engine that stopped (a decision stopped it) asks is not answered.
    @Test func aStoppedEngine_getsNoBatch() async throws {
        let h = try await MirrorHarness.make()
        try await h.write { try $0.insert(Note(title: "pending")) }
        let engine = try await h.engine()
        await h.mirror.stopEngines()
        var context = SyncEngine.SendChangesContext(reason: .scheduled, options: SyncEngine.SendChangesOptions())
        context.limits = SyncEngine.BatchLimits.default
        #expect(await h.mirror.nextBatch(context, for: engine) == nil)
        await h.close()
    }
}
