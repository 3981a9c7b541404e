import CloudStoreWire
import Foundation
import Testing

@testable import CloudStoreServer

/// The decisions of records/modify, driven directly without HTTP or storage.
@Suite("RecordsModifier")
struct RecordsModifierTests {
    let zone = DatabasePartition(container: "c", environment: .development, scope: .private, owner: "_u1").zone("Notes")
    let stamp = Record.Stamp(timestamp: Date(timeIntervalSince1970: 1_800_000_000), userRecordName: "_u1", deviceID: "d")

    func modifier(_ operations: [(RecordsModifyRequest.OperationType, Record)], atomic: Bool) -> RecordsModifier {
        let rules = RecordRules(zone: zone, maxRecordBytes: 1 << 20)
        return RecordsModifier(
            operations: operations.map { .init(type: $0.0, record: $0.1, failure: rules.check($0.1)) }, atomic: atomic,
            stamp: stamp, environment: .development, rules: rules, present: { Record(recordName: $0.name) })
    }

    func stored(_ name: String, seq: Int64, fields: [String: FieldValue] = [:]) -> StoredRecord {
        StoredRecord(
            name: name, type: "Note", seq: seq, content: RecordContent(fields: fields, created: stamp, modified: stamp),
            deletedAt: nil)
    }

    func snapshot(_ records: [StoredRecord], referrers: [String: Set<String>] = [:]) -> RecordSnapshot {
        RecordSnapshot(
            zone: StoredZone(name: "Notes", seq: 10, dbSeq: 1, incarnation: 1, purgedThrough: 0, deleted: false),
            records: Dictionary(uniqueKeysWithValues: records.map { ($0.name, $0) }), deleteSelfReferrers: referrers,
            schema: .empty)
    }

    func validating(_ name: String, to target: String) -> Record {
        Record(recordName: name, recordType: "Note", fields: ["ref": .reference(Reference(recordName: target, action: .validate))])
    }

    @Test func validateFailuresPropagateAlongAChainOfNewRecords() {
        let existing = stored("A", seq: 3)
        let modifier = modifier(
            [
                (.update, Record(recordName: "A", recordChangeTag: "stale", fields: ["x": 1])),
                (.create, validating("B", to: "N")),
                (.create, validating("C", to: "B")),
                (.forceDelete, Record(recordName: "N")),
            ], atomic: false)
        let (plan, outcomes) = modifier.plan(snapshot([existing, stored("N", seq: 4)]))
        let codes = outcomes.map { outcome -> ServerErrorCode? in
            if case .failed(let error) = outcome { return error.serverErrorCode }
            return nil
        }
        #expect(codes == [.conflict, .validatingReferenceError, .validatingReferenceError, nil])
        #expect(plan.writes.map(\.name) == ["N"], "only the delete is written")
    }

    @Test func cascadeSkipsRecordsTheRequestWritesItself() {
        let modifier = modifier(
            [(.forceDelete, Record(recordName: "F")), (.forceUpdate, Record(recordName: "K", fields: ["keep": 1]))],
            atomic: true)
        let rows = [stored("F", seq: 1), stored("K", seq: 2), stored("G", seq: 3), stored("H", seq: 4)]
        let (plan, _) = modifier.plan(snapshot(rows, referrers: ["F": ["K", "G"], "G": ["H"]]))
        #expect(plan.writes.map(\.name) == ["F", "K", "G", "H"])
        #expect(plan.writes.filter { $0.change == .delete }.map(\.name) == ["F", "G", "H"])
    }

    @Test func atomicFailureWritesNothingAndNoSchema() {
        let modifier = modifier(
            [(.create, Record(recordName: "New", recordType: "Fresh", fields: ["f": "x"])), (.create, validating("B", to: "nowhere"))],
            atomic: true)
        let (plan, outcomes) = modifier.plan(snapshot([]))
        #expect(plan.writes.isEmpty && plan.schema == nil)
        #expect(outcomes.first == .atomicError("New"))
    }

    @Test func developmentSavesExtendTheSchema() {
        let modifier = modifier([(.create, Record(recordName: "New", recordType: "Fresh", fields: ["f": "x"]))], atomic: true)
        let (plan, _) = modifier.plan(snapshot([]))
        #expect(plan.schema?.recordType(named: "Fresh")?.field(named: "f")?.type == .string)
    }
}
