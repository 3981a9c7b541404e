import CloudStoreWire
import Foundation
import Testing

@testable import CloudStoreServer

/// The decisions of records/modify about uniqueness constraints (RecordsModifier+UniqueKeys.swift),
/// driven directly, with the snapshot read as a backend reads it.
extension RecordsModifierTests {
    static func notes(_ constraints: [[String]]) -> CloudSchema {
        CloudSchema(
            recordTypes: [
                .init(
                    name: "Note", fields: [.init(name: "title", type: .string), .init(name: "list", type: .reference)],
                    uniquenessConstraints: constraints)
            ], version: 1)
    }

    static func titleKey(_ title: String) -> String { #"Note(title)=s"\#(title)""# }

    /// Plans as a backend does: the snapshot holds the rows the request names; when the plan asks
    /// for unique keys, their holders (from `held`, key → record) and the holders' rows are read
    /// into it and the plan runs again. Answers the plan, the outcomes and how many times it ran.
    func planReadingKeys(
        _ modifier: RecordsModifier, _ rows: [StoredRecord], held: [String: String], schema: CloudSchema
    ) throws -> (RecordWritePlan, [RecordsModifier.Outcome], runs: Int) {
        let named = modifier.snapshotRequest.names
        var snapshot = snapshot(rows.filter { named.contains($0.name) }, schema: schema)
        var runs = 0
        while true {
            runs += 1
            do {
                let (plan, outcomes) = try modifier.plan(snapshot)
                return (plan, outcomes, runs)
            } catch {
                let keyHolders = held.filter { error.keys.contains($0.key) }
                let holderRows = rows.filter { keyHolders.values.contains($0.name) }
                snapshot.add(uniqueKeys: error.keys, holders: keyHolders, rows: Dictionary(uniqueKeysWithValues: holderRows.map { ($0.name, $0) }))
            }
        }
    }

    func failure(_ outcome: RecordsModifier.Outcome) -> ServerError? {
        if case .failed(let error) = outcome { return error }
        return nil
    }

    @Test func uniqueKeys_aSaveOfAKeyAnotherRecordHoldsFails_withThatRecordAsServerRecord() throws {
        let schema = Self.notes([["title"]])
        let rows = [stored("L1", seq: 1, fields: ["title": "Groceries"])]
        let modifier = modifier(
            [
                (.create, Record(recordName: "L2", recordType: "Note", fields: ["title": "Groceries"])),
                (.create, Record(recordName: "L3", recordType: "Note", fields: ["title": "Food"])),
            ], atomic: false)
        let (plan, outcomes, runs) = try planReadingKeys(modifier, rows, held: [Self.titleKey("Groceries"): "L1"], schema: schema)
        #expect(runs == 2, "the first run asks for the keys, the second decides")
        let error = try #require(failure(outcomes[0]))
        #expect(error.serverErrorCode == .uniqueFieldError && error.recordName == "L2")
        #expect(error.serverRecord?.recordName == "L1")
        #expect(
            error.reason
                == #"record L2 cannot have title = "Groceries": record L1 in zone Notes already has it (uniqueness constraint [title]); merge into L1 or change the value"#
        )
        #expect(outcomes[1] == .saved("L3"))
        #expect(plan.writes.map(\.name) == ["L3"] && plan.writes[0].uniqueKeys == [Self.titleKey("Food")])

        let (_, atomic, _) = try planReadingKeys(
            self.modifier([(.create, Record(recordName: "L2", recordType: "Note", fields: ["title": "Groceries"]))], atomic: true),
            rows, held: [Self.titleKey("Groceries"): "L1"], schema: schema)
        #expect(failure(atomic[0])?.serverErrorCode == .uniqueFieldError)
    }

    /// Operations run in order: a record changed or deleted earlier frees its keys, a save takes
    /// them for the operations after it, and a record saving its own key again is no collision.
    @Test func uniqueKeys_operationsRunInOrder_freeingAndTakingKeys() throws {
        let schema = Self.notes([["title"]])
        let rows = [
            stored("L1", seq: 1, fields: ["title": "A"]), stored("L4", seq: 2, fields: ["title": "C"]),
            stored("L6", seq: 3, fields: ["title": "D"]), stored("K", seq: 4, fields: ["title": "E"]),
        ]
        let held = [
            Self.titleKey("A"): "L1", Self.titleKey("C"): "L4", Self.titleKey("D"): "L6", Self.titleKey("E"): "K",
        ]
        let modifier = modifier(
            [
                (.update, Record(recordName: "L1", recordChangeTag: "1", fields: ["title": "B"])),
                (.create, Record(recordName: "L2", recordType: "Note", fields: ["title": "A"])),
                (.create, Record(recordName: "L3", recordType: "Note", fields: ["title": "B"])),
                (.forceDelete, Record(recordName: "L4")),
                (.create, Record(recordName: "L5", recordType: "Note", fields: ["title": "C"])),
                (.forceUpdate, Record(recordName: "L6", fields: ["title": "D"])),
                (.create, Record(recordName: "L7", recordType: "Note", fields: ["title": "E"])),
            ], atomic: false)
        let planned = try planReadingKeys(modifier, rows, held: held, schema: schema)
        #expect(planned.1.map { failure($0)?.serverErrorCode } == [nil, nil, .uniqueFieldError, nil, nil, nil, .uniqueFieldError])
        let taken = try #require(failure(planned.1[2]))
        #expect(taken.serverRecord == nil, "nothing stored holds it yet")
        #expect(taken.reason?.contains("record L1, saved earlier in this request, has it") == true, "\(taken.reason ?? "")")
        #expect(failure(planned.1[6])?.serverRecord?.recordName == "K")
        let keys = Dictionary(uniqueKeysWithValues: planned.0.writes.map { ($0.name, $0.uniqueKeys) })
        #expect(keys["L1"] == [Self.titleKey("B")] && keys["L2"] == [Self.titleKey("A")] && keys["L4"] == [])

        // A record deleted by a DELETE_SELF cascade holds its keys until every operation ran.
        let cascading = self.modifier(
            [(.forceDelete, Record(recordName: "L1")), (.create, Record(recordName: "L8", recordType: "Note", fields: ["title": "E"]))],
            atomic: false)
        let named = cascading.snapshotRequest.names
        var snapshot = snapshot(rows.filter { named.contains($0.name) || $0.name == "K" }, referrers: ["L1": ["K"]], schema: schema)
        snapshot.add(uniqueKeys: [Self.titleKey("E")], holders: [Self.titleKey("E"): "K"], rows: [:])
        let (cascadePlan, cascadeOutcomes) = try cascading.plan(snapshot)
        #expect(failure(cascadeOutcomes[1])?.serverErrorCode == .uniqueFieldError)
        #expect(cascadePlan.writes.map(\.name) == ["L1", "K"] && cascadePlan.writes.allSatisfy { $0.uniqueKeys == [] })
    }

    /// An update that sends one field of a composite constraint holds the key of the stored
    /// others; a save whose key was to be freed by a write that failed (its reference) fails too,
    /// and a validating reference to a save that failed for its key fails in turn.
    @Test func uniqueKeys_followTheRecordsFinalFields_andWritesThatFailKeepTheirKeys() throws {
        let schema = Self.notes([["list", "title"]])
        let list = FieldValue.reference(Reference(recordName: "R1"))
        let rows = [stored("L1", seq: 1, fields: ["list": list, "title": "A"]), stored("L2", seq: 2, fields: ["list": list, "title": "B"])]
        let key = #"Note(list,title)=r"R1",s"A""#
        let partial = modifier([(.update, Record(recordName: "L2", recordChangeTag: "2", fields: ["title": "A"]))], atomic: false)
        let (_, outcomes, _) = try planReadingKeys(partial, rows, held: [key: "L1"], schema: schema)
        #expect(failure(outcomes[0])?.reason?.hasPrefix(#"record L2 cannot have list = R1, title = "A": record L1"#) == true)

        let freedByAFailure = modifier(
            [
                (.update, Record(recordName: "L1", recordChangeTag: "1", fields: ["title": "Z", "ref": .reference(Reference(recordName: "gone", action: .validate))])),
                (.create, Record(recordName: "L3", recordType: "Note", fields: ["list": list, "title": "A"])),
            ], atomic: false)
        let (plan, refused, _) = try planReadingKeys(freedByAFailure, rows, held: [key: "L1"], schema: schema)
        #expect(refused.map { failure($0)?.serverErrorCode } == [.validatingReferenceError, .uniqueFieldError])
        #expect(plan.writes.isEmpty)

        let chained = modifier(
            [(.create, Record(recordName: "L3", recordType: "Note", fields: ["list": list, "title": "A"])), (.create, validating("L4", to: "L3"))],
            atomic: false)
        let (chainedPlan, chainedOutcomes, _) = try planReadingKeys(chained, rows, held: [key: "L1"], schema: schema)
        #expect(chainedOutcomes.map { failure($0)?.serverErrorCode } == [.uniqueFieldError, .validatingReferenceError])
        #expect(chainedPlan.writes.isEmpty)
    }

    /// Records of types without constraints cost no read of keys and write none.
    @Test func uniqueKeys_typesWithoutConstraintsReadAndWriteNoKeys() throws {
        let rows = [stored("L1", seq: 1, fields: ["title": "A"])]
        let modifier = modifier(
            [(.create, Record(recordName: "L2", recordType: "Note", fields: ["title": "A"])), (.forceDelete, Record(recordName: "L1"))],
            atomic: true)
        let (plan, outcomes, runs) = try planReadingKeys(modifier, rows, held: [:], schema: Self.notes([]))
        #expect(runs == 1 && outcomes == [.saved("L2"), .deleted("L1")])
        #expect(plan.writes.allSatisfy { $0.uniqueKeys == nil })
    }
}
