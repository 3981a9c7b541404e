import CloudStoreWire
import Foundation
import Testing

@testable import CloudStoreServer

/// The decisions of records/modify, driven directly without HTTP or storage.
@Suite("RecordsModifier")
struct RecordsModifierTests {
    /// A record name may not hold control characters: the check compares scalar values, and
    /// refuses exactly the scalars Unicode puts in the general category Cc.
    @Test func recordNames_refuseExactlyTheControlCharacters() {
        for value in UInt32(0)...0x2FFFF {
            guard let scalar = Unicode.Scalar(value) else { continue }
            let isControl = scalar.properties.generalCategory == .control
            #expect((RecordRules.recordNameProblem("N\(Character(scalar))") != nil) == isControl, "U+\(String(value, radix: 16))")
        }
        #expect(RecordRules.recordNameProblem("N-1 é\u{2028}") == nil)
    }

    let zone = DatabasePartition(container: "c", environment: .development, scope: .private, owner: "_u1").zone("Notes")
    let stamp = Record.Stamp(timestamp: Date(timeIntervalSince1970: 1_800_000_000), userRecordName: "_u1", deviceID: "d")

    func modifier(
        _ operations: [(RecordsModifyRequest.OperationType, Record)], atomic: Bool, by writer: String = "_u1",
        onlyCreatorMayChange: Bool = false
    ) -> RecordsModifier {
        let rules = RecordRules(zone: zone, maxRecordBytes: 1 << 20)
        var stamp = stamp
        stamp.userRecordName = writer
        return RecordsModifier(
            operations: operations.map { .init(type: $0.0, record: $0.1, failure: rules.check($0.1)) }, atomic: atomic,
            stamp: stamp, environment: .development, onlyCreatorMayChange: onlyCreatorMayChange, rules: rules,
            present: { Record(recordName: $0.name) })
    }

    /// The public database's rule: only the creator changes or deletes a record; anyone creates.
    @Test func onlyTheCreatorMayChangeOrDeleteWhenTheRuleApplies() throws {
        let rows = [stored("A", seq: 1), stored("B", seq: 2)]
        let operations: [(RecordsModifyRequest.OperationType, Record)] = [
            (.update, Record(recordName: "A", recordChangeTag: "1", fields: ["x": 1])),
            (.forceUpdate, Record(recordName: "B", fields: ["x": 1])),
            (.create, Record(recordName: "C", recordType: "Note", fields: ["x": 1])),
            (.forceReplace, Record(recordName: "D", recordType: "Note", fields: ["x": 1])),
        ]
        let deletes: [(RecordsModifyRequest.OperationType, Record)] = [
            (.delete, Record(recordName: "A", recordChangeTag: "1")), (.forceDelete, Record(recordName: "B")),
        ]
        for batch in [operations, deletes] {
            let (plan, outcomes) = try modifier(batch, atomic: false, by: "_u2", onlyCreatorMayChange: true)
                .plan(snapshot(rows))
            let denied = outcomes.map { outcome -> Bool in
                if case .failed(let error) = outcome { return error.serverErrorCode == .accessDenied }
                return false
            }
            #expect(denied == batch.map { $0.1.recordName == "A" || $0.1.recordName == "B" })
            #expect(!plan.writes.contains { $0.name == "A" || $0.name == "B" })
        }
        let (byCreator, _) = try modifier(deletes, atomic: true, by: "_u1", onlyCreatorMayChange: true).plan(snapshot(rows))
        #expect(byCreator.writes.map(\.name) == ["A", "B"], "the creator may delete")
        let (unrestricted, _) = try modifier(deletes, atomic: true, by: "_u2").plan(snapshot(rows))
        #expect(unrestricted.writes.map(\.name) == ["A", "B"], "private zones have no such rule")
    }

    func stored(_ name: String, seq: Int64, fields: [String: FieldValue] = [:]) -> StoredRecord {
        StoredRecord(
            name: name, type: "Note", seq: seq, content: try! StoredContent(RecordContent(fields: fields, created: stamp, modified: stamp)),
            deletedAt: nil)
    }

    func snapshot(_ records: [StoredRecord], referrers: [String: Set<String>] = [:], schema: CloudSchema = .empty) -> RecordSnapshot {
        RecordSnapshot(
            zone: StoredZone(name: "Notes", seq: 10, dbSeq: 1, incarnation: 1, purgedThrough: 0, deleted: false),
            records: Dictionary(uniqueKeysWithValues: records.map { ($0.name, $0) }), deleteSelfReferrers: referrers,
            schema: schema)
    }

    func validating(_ name: String, to target: String) -> Record {
        Record(recordName: name, recordType: "Note", fields: ["ref": .reference(Reference(recordName: target, action: .validate))])
    }

    @Test func validateFailuresPropagateAlongAChainOfNewRecords() throws {
        let existing = stored("A", seq: 3)
        let modifier = modifier(
            [
                (.update, Record(recordName: "A", recordChangeTag: "stale", fields: ["x": 1])),
                (.create, validating("B", to: "N")),
                (.create, validating("C", to: "B")),
                (.forceDelete, Record(recordName: "N")),
            ], atomic: false)
        let (plan, outcomes) = try modifier.plan(snapshot([existing, stored("N", seq: 4)]))
        let codes = outcomes.map { outcome -> ServerErrorCode? in
            if case .failed(let error) = outcome { return error.serverErrorCode }
            return nil
        }
        #expect(codes == [.conflict, .validatingReferenceError, .validatingReferenceError, nil])
        #expect(plan.writes.map(\.name) == ["N"], "only the delete is written")
    }

    @Test func cascadeSkipsRecordsTheRequestWritesItself() throws {
        let modifier = modifier(
            [(.forceDelete, Record(recordName: "F")), (.forceUpdate, Record(recordName: "K", fields: ["keep": 1]))],
            atomic: true)
        let rows = [stored("F", seq: 1), stored("K", seq: 2), stored("G", seq: 3), stored("H", seq: 4)]
        let (plan, _) = try modifier.plan(snapshot(rows, referrers: ["F": ["K", "G"], "G": ["H"]]))
        #expect(plan.writes.map(\.name) == ["F", "K", "G", "H"])
        #expect(plan.writes.filter { $0.change == .delete }.map(\.name) == ["F", "G", "H"])
    }

    @Test func atomicFailureWritesNothingAndNoSchema() throws {
        let modifier = modifier(
            [(.create, Record(recordName: "New", recordType: "Fresh", fields: ["f": "x"])), (.create, validating("B", to: "nowhere"))],
            atomic: true)
        let (plan, outcomes) = try modifier.plan(snapshot([]))
        #expect(plan.writes.isEmpty && plan.schema == nil)
        #expect(outcomes.first == .atomicError("New"))
    }

    @Test func developmentSavesExtendTheSchema() throws {
        let modifier = modifier([(.create, Record(recordName: "New", recordType: "Fresh", fields: ["f": "x"]))], atomic: true)
        let (plan, _) = try modifier.plan(snapshot([]))
        #expect(plan.schema?.recordType(named: "Fresh")?.field(named: "f")?.type == .string)
    }
}
