import CloudStoreTesting
import CloudStoreWire
import Synchronization
import Testing

@testable import CloudStoreSync

/// A delegate that keeps its pending changes itself (CKSyncEngine's untracked changes, as
/// CloudStore's mirroring does): the engine asks it for batches, tells it what to skip and how
/// many changes a batch may hold, and treats its transient failures as stuck work to retry.
@Suite(.timeLimit(.minutes(ReliabilityRun.hangLimitMinutes))) struct SyncEngineUntrackedChangesTests {
    /// An outbox of records that builds batches the way the documentation shows.
    actor Outbox: SyncEngineDelegate {
        var pending: [String: Record] = [:]
        private(set) var contexts: [SyncEngine.SendChangesContext] = []
        private(set) var acknowledged: [String] = []

        func add(_ records: [Record], to engine: SyncEngine) {
            for record in records { pending[record.recordName] = record }
            engine.state.hasPendingUntrackedChanges = true
        }

        func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
            guard case .sentRecordZoneChanges(let sent) = event else { return }
            for record in sent.savedRecords {
                pending[record.recordName] = nil
                acknowledged.append(record.recordName)
            }
        }

        func nextRecordZoneChangeBatch(
            _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
        ) async -> SyncEngine.RecordZoneChangeBatch? {
            contexts.append(context)
            syncEngine.state.hasPendingUntrackedChanges = false
            let skipped = Set(context.recordIDsToSkip.map(\.recordName))
            let records = pending.keys.sorted().filter { !skipped.contains($0) }.prefix(context.maxRecordCount).compactMap { pending[$0] }
            guard !records.isEmpty else { return nil }
            syncEngine.state.hasPendingUntrackedChanges = true
            return SyncEngine.RecordZoneChangeBatch(recordsToSave: records)
        }
    }

    @Test func aTransientFailureIsSkippedForTheRestOfTheSendAndRetriedLater() async throws {
        let zone = ZoneID(zoneName: "Notes")
        let sent = Mutex<[String]>([])
        let database = ScriptedDatabase { script in
            script.modifyRecords = { request in
                sent.withLock { $0 += request.operations.map(\.record.recordName) }
                return RecordsResponse(
                    records: request.operations.map { operation in
                        guard operation.record.recordName != "N2" else {
                            return .error(ServerError(.throttled, retryAfter: 30, recordName: "N2"))
                        }
                        var record = operation.record
                        record.recordChangeTag = "1"
                        return .value(record)
                    })
            }
        }
        let outbox = Outbox()
        var configuration = SyncEngine.Configuration(database: database, stateSerialization: nil, delegate: outbox, automaticallySync: false)
        configuration.maxBatchCount = 2
        let engine = SyncEngine(configuration)
        await outbox.add(
            ["N1", "N2", "N3", "N4"].map { Record(recordName: $0, recordType: "Note", zoneID: zone, fields: ["title": "t"]) },
            to: engine)

        try await engine.sendChanges()

        #expect(sent.withLock { $0 } == ["N1", "N2", "N3", "N4"], "N2 was sent once in this send")
        #expect(await outbox.acknowledged == ["N1", "N3", "N4"])
        #expect(await outbox.pending.keys.sorted() == ["N2"])
        let contexts = await outbox.contexts
        #expect(contexts.allSatisfy { $0.maxRecordCount == 2 })
        // The batch after N1, N2 is asked for while they are in flight, skipping them; from then
        // on N2 is skipped for the rest of the send.
        #expect(contexts.dropFirst().first?.recordIDsToSkip.map(\.recordName).sorted() == ["N1", "N2"])
        #expect(contexts.dropFirst(2).allSatisfy { $0.recordIDsToSkip.map(\.recordName).contains("N2") })
        // Last asked while N3 and N4 travelled: nothing was left but N2, which waits for its retry.
        #expect(contexts.last?.recordIDsToSkip.map(\.recordName).sorted() == ["N2", "N3", "N4"])
        #expect(await engine.scheduler.backoffUntil != nil, "the send ended stalled: a retry is scheduled, after retryAfter")
        #expect(engine.state.hasPendingUntrackedChanges, "N2 is still the delegate's to send when the engine retries")
    }
}
