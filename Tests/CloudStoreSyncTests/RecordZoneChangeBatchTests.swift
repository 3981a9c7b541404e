import CloudStoreWire
import Foundation
import Synchronization
import Testing

@testable import CloudStoreSync

@Suite struct RecordZoneChangeBatchTests {
    let zone = ZoneID(zoneName: "Notes")

    func id(_ name: String, _ zone: ZoneID? = nil) -> RecordID { RecordID(recordName: name, zoneID: zone ?? self.zone) }

    func note(_ recordID: RecordID, body: String = "", tag: String? = nil) -> Record {
        var record = Record(recordType: "Note", recordID: recordID, fields: ["body": .string(body)])
        record.recordChangeTag = tag
        return record
    }

    func fill(
        _ changes: [SyncEngine.PendingRecordZoneChange], limits: SyncEngine.BatchLimits,
        provider: @escaping @Sendable (RecordID) -> Record?
    ) async -> SyncEngine.RecordZoneChangeBatch? {
        var context = SyncEngine.SendChangesContext(reason: .manual, options: SyncEngine.SendChangesOptions())
        context.limits = limits
        return await SyncEngine.RecordZoneChangeBatch(pendingChanges: changes, context: context) { provider($0) }
    }

    @Test func filling_stopsAtTheCountLimit() async throws {
        let changes = (0..<10).map { SyncEngine.PendingRecordZoneChange.saveRecord(id("N\($0)")) }
        let asked = Mutex(0)
        let batch = try #require(
            await fill(changes, limits: .init(maxCount: 4, maxBytes: 1 << 20)) { recordID in
                asked.withLock { $0 += 1 }
                return note(recordID)
            })
        #expect(batch.recordsToSave.map(\.recordName) == ["N0", "N1", "N2", "N3"])
        #expect(asked.withLock { $0 } == 4, "records past the limit are not loaded")
    }

    @Test func filling_stopsAtTheByteLimitButAlwaysTakesTheFirst() async throws {
        let big = String(repeating: "x", count: 1000)
        let changes = (0..<5).map { SyncEngine.PendingRecordZoneChange.saveRecord(id("N\($0)")) }
        let batch = try #require(
            await fill(changes, limits: .init(maxCount: 200, maxBytes: 2500)) { note($0, body: big) })
        #expect(batch.recordsToSave.count == 2)

        let single = try #require(
            await fill(changes, limits: .init(maxCount: 200, maxBytes: 10)) { note($0, body: big) })
        #expect(single.recordsToSave.count == 1, "a record over the limit alone is sent; the server decides")
    }

    @Test func filling_skipsChangesTheProviderDoesNotHave() async throws {
        let changes: [SyncEngine.PendingRecordZoneChange] = [
            .saveRecord(id("gone")), .saveRecord(id("N1")), .deleteRecord(id("D1")),
        ]
        let batch = try #require(
            await fill(changes, limits: .default) { $0.recordName == "gone" ? nil : note($0) })
        #expect(batch.recordsToSave.map(\.recordName) == ["N1"])
        #expect(batch.recordIDsToDelete == [id("D1")])
    }

    @Test func filling_leavesOutExcludedRecordsAndIsNilWhenEmpty() async {
        let changes: [SyncEngine.PendingRecordZoneChange] = [.saveRecord(id("N1"))]
        let limits = SyncEngine.BatchLimits(maxCount: 200, maxBytes: 1 << 20, excludedRecordIDs: [id("N1")])
        #expect(await fill(changes, limits: limits) { note($0) } == nil)
        #expect(await fill(changes, limits: .default) { _ in nil } == nil)
    }

    @Test func plan_choosesUpdateCreateAndForceDelete() {
        let batch = SyncEngine.RecordZoneChangeBatch(
            recordsToSave: [note(id("new")), note(id("old"), tag: "t1")], recordIDsToDelete: [id("gone")],
            atomicByZone: true)
        let plan = RecordBatchPlan(batch, maxCount: 200, maxBytes: 1 << 20)
        #expect(plan.requests.count == 1)
        let request = plan.requests[0]
        #expect(request.atomic)
        #expect(request.zoneID == zone)
        #expect(request.operations.map(\.operationType) == [.create, .update, .forceDelete])
        #expect(request.operations[1].record.recordChangeTag == "t1")
    }

    @Test func plan_sendsOnlyIdentityTypeTagAndFields() {
        var record = note(id("N1"), tag: "t")
        record.modified = Record.Stamp(timestamp: Date(), deviceID: "d")
        let operation = RecordBatchPlan.operation(saving: record)
        #expect(operation.record.modified == nil)
        #expect(operation.record.fields == record.fields)
    }

    @Test func plan_makesOneRequestPerZoneAndSplitsByCountAndBytes() {
        let other = ZoneID(zoneName: "Other")
        let records = (0..<5).map { note(id("N\($0)")) } + [note(id("O1", other))]
        let plan = RecordBatchPlan(.init(recordsToSave: records), maxCount: 2, maxBytes: 1 << 20)
        #expect(plan.requests.map(\.zoneID) == [zone, zone, zone, other])
        #expect(plan.requests.map(\.operations.count) == [2, 2, 1, 1])

        let big = String(repeating: "x", count: 1000)
        let bigRecords = (0..<4).map { note(id("B\($0)"), body: big) }
        let size = RecordBatchPlan.encodedSize(of: RecordBatchPlan.operation(saving: bigRecords[0]))
        let bytePlan = RecordBatchPlan(
            .init(recordsToSave: bigRecords), maxCount: 200, maxBytes: 2 * size + 10 + RecordBatchPlan.envelopeBytes)
        #expect(bytePlan.requests.map(\.operations.count) == [2, 2])
    }

    @Test func plan_sendsARecordNamedTwiceOnce() {
        let plan = RecordBatchPlan(
            .init(recordsToSave: [note(id("N1")), note(id("N1"), body: "again")], recordIDsToDelete: [id("N1")]),
            maxCount: 200, maxBytes: 1 << 20)
        #expect(plan.requests.flatMap(\.operations).count == 1)
    }

    @Test func halves_splitTheOperationsInTwo() throws {
        let plan = RecordBatchPlan(.init(recordsToSave: (0..<5).map { note(id("N\($0)")) }), maxCount: 200, maxBytes: 1 << 20)
        let (first, second) = plan.requests[0].halves()
        #expect(first.operations.map(\.record.recordName) == ["N0", "N1"])
        #expect(second.operations.map(\.record.recordName) == ["N2", "N3", "N4"])
        for half in [first, second] { #expect(half.body == (try WireCoding.encode(half.wireRequest))) }
    }

    /// Each operation is encoded once: the request sent is put together from those bytes, and is
    /// what the encoder writes for the whole request.
    @Test func requestBody_isTheEncodersBytesOfTheRequest() throws {
        let owned = ZoneID(zoneName: "Shared", ownerRecordName: "_u2")
        var tricky = note(id("N\"/é"), body: "line\nbreak \u{1} 🙂", tag: "t")
        tricky.fields["count"] = .int64(-5)
        tricky.fields["when"] = .timestamp(Date(millisecondsSince1970: 1_763_700_000_000))
        tricky.fields["gone"] = .null
        for atomic in [false, true] {
            let batch = SyncEngine.RecordZoneChangeBatch(
                recordsToSave: [note(id("new")), tricky, note(id("S1", owned))], recordIDsToDelete: [id("gone")], atomicByZone: atomic)
            for request in RecordBatchPlan(batch, maxCount: 200, maxBytes: 1 << 20).requests {
                #expect(request.body == (try WireCoding.encode(request.wireRequest)))
            }
        }
        var broken = note(id("nan"))
        broken.fields["x"] = .double(.nan)
        let plan = RecordBatchPlan(.init(recordsToSave: [broken, note(id("ok"))]), maxCount: 200, maxBytes: 1 << 20)
        #expect(plan.requests[0].body == nil)
    }

    /// A filled batch keeps each save's JSON from sizing it, and the request sends those bytes; a
    /// record changed after the batch was filled is encoded again, so what goes is what the batch holds.
    @Test func filledBatch_sendsTheBytesItSizedUnlessARecordChanged() async throws {
        let changes = (0..<3).map { SyncEngine.PendingRecordZoneChange.saveRecord(id("N\($0)")) }
        var batch = try #require(await fill(changes, limits: .default) { note($0, body: "b") })
        #expect(batch.encodedSaves.count == 3)
        let request = try #require(RecordBatchPlan(batch, maxCount: 200, maxBytes: 1 << 20).requests.first)
        #expect(request.encodedOperations == batch.recordsToSave.map { RecordBatchPlan.encoded(RecordBatchPlan.operation(saving: $0)) })
        #expect(request.body == (try WireCoding.encode(request.wireRequest)))

        // The engine's pass over the batch (zones named its way, records it skips left out)
        // keeps the bytes; a record whose zone it renames is encoded again.
        var kept = batch
        kept.keepSaves(normalizing: { $0 }, excluding: [batch.recordsToSave[0].recordID])
        #expect(kept.recordsToSave.count == 2 && kept.encodedSaves.count == 3)
        var renamed = batch
        renamed.keepSaves(
            normalizing: { record in
                var record = record
                record.zoneID = ZoneID(zoneName: "Elsewhere")
                return record
            }, excluding: [])
        #expect(renamed.recordsToSave.map(\.zoneID?.zoneName) == ["Elsewhere", "Elsewhere", "Elsewhere"])
        #expect(renamed.encodedSaves.isEmpty)

        batch.recordsToSave[1].fields["body"] = .string("changed after filling")
        #expect(batch.encodedSaves.isEmpty)
        let changed = try #require(RecordBatchPlan(batch, maxCount: 200, maxBytes: 1 << 20).requests.first)
        #expect(changed.operations[1].record.fields["body"] == .string("changed after filling"))
        #expect(changed.body == (try WireCoding.encode(changed.wireRequest)))
    }
}
