@testable import CloudStore
import Foundation
import Testing

@Suite("Three-way field merge and pending export folding")
struct FieldMergeTests {
    let id = UUID()
    let then = Date(timeIntervalSince1970: 1000)
    let later = Date(timeIntervalSince1970: 2000)

    func merge(
        local: [String: AttributeValue], changed: [String: Date], ancestor: [String: AttributeValue]?,
        server: [String: AttributeValue], serverModified: Date? = nil, policy: ConflictPolicy
    ) -> FieldMerge.Outcome {
        FieldMerge(local: local, localChanges: changed, ancestor: ancestor, server: server, serverModified: serverModified)
            .resolve(entityName: "Note", objectID: id, policy: policy, now: later)
    }

    @Test func differentFieldsBothSurvive() {
        let outcome = merge(
            local: ["title": "mine", "body": "old"], changed: ["title": then],
            ancestor: ["title": "old", "body": "old"], server: ["title": "old", "body": "theirs"], policy: .serverWins)
        #expect(outcome.merged == ["title": "mine", "body": "theirs"])
        #expect(outcome.keysToUpload == ["title"])
        #expect(outcome.conflicts.isEmpty)
    }

    @Test func sameFieldServerWins() {
        let outcome = merge(
            local: ["title": "B"], changed: ["title": then], ancestor: ["title": "old"], server: ["title": "A"],
            policy: .serverWins)
        #expect(outcome.merged == ["title": "A"])
        #expect(outcome.keysToUpload.isEmpty)
        #expect(outcome.conflicts.map(\.losingValue) == ["B"])
        #expect(outcome.conflicts.first?.losingSide == .local)
        #expect(outcome.conflicts.first?.winningValue == "A")
        #expect(outcome.conflicts.first?.policy == "serverWins")
    }

    @Test func sameFieldLocalWins() {
        let outcome = merge(
            local: ["title": "B"], changed: ["title": then], ancestor: ["title": "old"], server: ["title": "A"],
            policy: .localWins)
        #expect(outcome.merged == ["title": "B"])
        #expect(outcome.keysToUpload == ["title"])
        #expect(outcome.conflicts.map(\.losingValue) == ["A"])
        #expect(outcome.conflicts.first?.losingSide == .server)
    }

    @Test func sameFieldLastWriterWins() {
        let newerHere = merge(
            local: ["title": "B"], changed: ["title": later], ancestor: ["title": "old"], server: ["title": "A"],
            serverModified: then, policy: .lastWriterWins)
        #expect(newerHere.merged == ["title": "B"])
        let newerThere = merge(
            local: ["title": "B"], changed: ["title": then], ancestor: ["title": "old"], server: ["title": "A"],
            serverModified: later, policy: .lastWriterWins)
        #expect(newerThere.merged == ["title": "A"])
        #expect(newerThere.conflicts.map(\.losingValue) == ["B"])
    }

    @Test func customMergesBothAndLogsBoth() {
        let outcome = merge(
            local: ["title": "B"], changed: ["title": then], ancestor: ["title": "old"], server: ["title": "A"],
            policy: .custom { conflict in
                guard case .string(let local) = conflict.localValue, case .string(let server) = conflict.serverValue else {
                    return .server
                }
                return .value(.string(server + "+" + local))
            })
        #expect(outcome.merged == ["title": "A+B"])
        #expect(outcome.keysToUpload == ["title"])
        #expect(Set(outcome.conflicts.map(\.losingValue)) == ["A", "B"])
    }

    @Test func equalChangesDoNotConflict() {
        let outcome = merge(
            local: ["title": "same"], changed: ["title": then], ancestor: ["title": "old"], server: ["title": "same"],
            policy: .serverWins)
        #expect(outcome.conflicts.isEmpty)
        #expect(outcome.keysToUpload.isEmpty)
    }

    @Test func withoutAncestorEveryServerValueCounts() {
        let outcome = merge(
            local: ["title": "mine", "body": "x"], changed: ["title": then, "body": then], ancestor: nil,
            server: ["title": "theirs", "body": "x"], policy: .serverWins)
        #expect(outcome.merged == ["title": "theirs", "body": "x"])
        #expect(outcome.conflicts.count == 1)
    }

    @Test func foldingFollowsTheRules() {
        typealias P = PendingExport
        let insert = P.folding(.insert(keys: ["title", "body"]), at: then, into: nil, isOnServer: false)
        #expect(insert == .save(full: true, keys: ["title": then, "body": then]))
        let insertUpdate = P.folding(.update(keys: ["title"]), at: later, into: insert, isOnServer: false)
        #expect(insertUpdate == .save(full: true, keys: ["title": later, "body": then]), "insert + update → one save")
        #expect(P.folding(.delete, at: later, into: insertUpdate, isOnServer: false) == nil, "insert + delete → nothing")
        let update = P.folding(.update(keys: ["title"]), at: then, into: nil, isOnServer: true)
        #expect(update == .save(full: false, keys: ["title": then]))
        #expect(update?.keysToUpload == ["title"])
        #expect(P.folding(.delete, at: later, into: update, isOnServer: true) == .delete, "update + delete → delete")
        let recreated = P.folding(.insert(keys: ["title"]), at: later, into: .delete, isOnServer: true)
        #expect(recreated == .save(full: true, keys: ["title": later]), "delete + insert → the whole object again")
        #expect(recreated?.keysToUpload == nil)
    }
}
