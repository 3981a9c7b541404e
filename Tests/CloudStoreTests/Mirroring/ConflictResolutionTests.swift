@testable import CloudStore
import CloudStoreSync
import Foundation
import Testing

/// Every conflict kind, decided by ``ConflictResolution`` without I/O.
@Suite("Conflict resolution: every kind of conflict, decided without I/O")
struct ConflictResolutionTests {
    let id = UUID()
    let then = Date(timeIntervalSince1970: 1000)
    let later = Date(timeIntervalSince1970: 2000)
    var note: ConflictResolution.Object { .init(entityName: "Note", id: id) }

    func resolution(_ policy: ConflictPolicy) -> ConflictResolution {
        ConflictResolution(policy: policy, now: later)
    }

    func merge(
        local: [String: AttributeValue], changed: [String: Date], ancestor: [String: AttributeValue]?,
        server: [String: AttributeValue], serverModified: Date? = nil, policy: ConflictPolicy
    ) -> ConflictResolution.FieldOutcome {
        resolution(policy).editAgainstEdit(
            .init(local: local, localChanges: changed, ancestor: ancestor, server: server, serverModified: serverModified),
            of: note)
    }

    // MARK: Edit against edit

    @Test func editAgainstEdit_differentFieldsBothSurvive() {
        let outcome = merge(
            local: ["title": "mine", "body": "old"], changed: ["title": then],
            ancestor: ["title": "old", "body": "old"], server: ["title": "old", "body": "theirs"], policy: .serverWins)
        #expect(outcome.merged == ["title": "mine", "body": "theirs"])
        #expect(outcome.keysToUpload == ["title"])
        #expect(outcome.conflicts.isEmpty)
    }

    @Test func editAgainstEdit_sameFieldServerWins() {
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

    @Test func editAgainstEdit_sameFieldLocalWins() {
        let outcome = merge(
            local: ["title": "B"], changed: ["title": then], ancestor: ["title": "old"], server: ["title": "A"],
            policy: .localWins)
        #expect(outcome.merged == ["title": "B"])
        #expect(outcome.keysToUpload == ["title"])
        #expect(outcome.conflicts.map(\.losingValue) == ["A"])
        #expect(outcome.conflicts.first?.losingSide == .server)
    }

    @Test func editAgainstEdit_sameFieldLastWriterWins() {
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

    @Test func editAgainstEdit_customMergesBothAndLogsBoth() {
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

    @Test func editAgainstEdit_equalChangesDoNotConflict() {
        let outcome = merge(
            local: ["title": "same"], changed: ["title": then], ancestor: ["title": "old"], server: ["title": "same"],
            policy: .serverWins)
        #expect(outcome.conflicts.isEmpty)
        #expect(outcome.keysToUpload.isEmpty)
    }

    @Test func editAgainstEdit_withoutAncestorEveryServerValueCounts() {
        let outcome = merge(
            local: ["title": "mine", "body": "x"], changed: ["title": then, "body": then], ancestor: nil,
            server: ["title": "theirs", "body": "x"], policy: .serverWins)
        #expect(outcome.merged == ["title": "theirs", "body": "x"])
        #expect(outcome.conflicts.count == 1)
    }

    // MARK: Acknowledged upload

    @Test func acknowledgedUpload_ofWhatWasSentChangesNothing() {
        let outcome = resolution(.serverWins).acknowledgedUpload(
            .init(local: ["title": "mine", "body": "old"], localChanges: [:], ancestor: ["title": "old", "body": "old"],
                  server: ["title": "mine", "body": "old"]),
            sent: ["title": "mine"], stillPending: [:], of: note)
        #expect(outcome.merged == ["title": "mine", "body": "old"])
        #expect(outcome.keysToUpload.isEmpty)
        #expect(outcome.conflicts.isEmpty)
    }

    /// With nothing changed here since sending, the acknowledgement skips the merge: its outcome
    /// is still the merge's (every key the server's, a key only this device has cleared), under
    /// every policy.
    @Test func acknowledgedUpload_withNothingPending_isTheMergeWithNoLocalChange() {
        let fields = ConflictResolution.Fields(
            local: ["title": "mine", "body": "old", "color": "red"], localChanges: [:], ancestor: ["title": "old"],
            server: ["title": "mine", "body": "theirs"])
        for policy in [ConflictPolicy.serverWins, .localWins, .lastWriterWins] {
            let outcome = resolution(policy).acknowledgedUpload(fields, sent: ["title": "mine"], stillPending: [:], of: note)
            var believed = fields
            believed.ancestor = ["title": "mine"]
            #expect(outcome == resolution(policy).editAgainstEdit(believed, of: note))
            #expect(outcome.merged == ["title": "mine", "body": "theirs", "color": .null])
        }
    }

    /// A retry found this device's first attempt applied and another device's later edit of
    /// another field: the acknowledgement brings that edit here instead of hiding it.
    @Test func acknowledgedUpload_takesAnotherDevicesEditOfAnotherField() {
        let outcome = resolution(.serverWins).acknowledgedUpload(
            .init(local: ["title": "mine", "body": "old"], localChanges: [:], ancestor: ["title": "old", "body": "old"],
                  server: ["title": "mine", "body": "theirs"]),
            sent: ["title": "mine"], stillPending: [:], of: note)
        #expect(outcome.merged == ["title": "mine", "body": "theirs"])
        #expect(outcome.keysToUpload.isEmpty)
        #expect(outcome.conflicts.isEmpty)
    }

    /// The same, when this device edited that field again after sending: a real conflict, logged.
    @Test func acknowledgedUpload_anEditAfterSendingMeetsAnotherDevicesEditAsAConflict() {
        let outcome = resolution(.serverWins).acknowledgedUpload(
            .init(local: ["title": "mine", "body": "mine later"], localChanges: [:], ancestor: ["title": "old", "body": "old"],
                  server: ["title": "mine", "body": "theirs"]),
            sent: ["title": "mine"], stillPending: ["body": later], of: note)
        #expect(outcome.merged["body"] == "theirs")
        #expect(outcome.conflicts.map(\.losingValue) == ["mine later"])
    }

    @Test func acknowledgedUpload_keepsWhatChangedHereAfterSending() {
        let outcome = resolution(.serverWins).acknowledgedUpload(
            .init(local: ["title": "second"], localChanges: [:], ancestor: ["title": "old"], server: ["title": "first"]),
            sent: ["title": "first"], stillPending: ["title": later], of: note)
        #expect(outcome.merged == ["title": "second"])
        #expect(outcome.keysToUpload == ["title"])
        #expect(outcome.conflicts.isEmpty)
    }

    // MARK: Edit against deletion

    @Test func editAgainstDeletion_theDeletionWinsAndEveryEditedValueIsLogged() {
        let (winner, conflicts) = resolution(.serverWins).editAgainstDeletion(
            of: note, pendingKeys: ["title", "body"], local: ["title": "mine", "body": "more"])
        #expect(winner == .server)
        #expect(conflicts.map(\.property) == ["body", "title"])
        #expect(conflicts.map(\.losingValue) == ["more", "mine"])
        #expect(conflicts.allSatisfy { $0.losingSide == .local && $0.winningValue == .null })
    }

    @Test func editAgainstDeletion_localWinsUploadsTheObjectAgain() {
        let (winner, conflicts) = resolution(.localWins).editAgainstDeletion(
            of: note, pendingKeys: ["title"], local: ["title": "mine"])
        #expect(winner == .local)
        #expect(conflicts.map(\.property) == ["*"])
        #expect(conflicts.first?.losingSide == .server)
    }

    @Test func deletionAgainstEdit_theServersEditBringsTheObjectBackUnlessLocalWins() {
        let (serverWins, logged) = resolution(.serverWins).deletionAgainstEdit(of: note)
        #expect(serverWins == .server)
        #expect(logged.map(\.losingSide) == [.local])
        let (localWins, loggedToo) = resolution(.localWins).deletionAgainstEdit(of: note)
        #expect(localWins == .local)
        #expect(loggedToo.map(\.losingSide) == [.server])
    }

    @Test func deletionAgainstEdit_ofThisDevicesOwnUnheardWriteKeepsTheDeletionUnlogged() {
        let (winner, logged) = resolution(.serverWins).deletionAgainstEdit(of: note, writtenByThisDevice: true)
        #expect(winner == .local)
        #expect(logged.isEmpty)
    }

    // MARK: Unheard creates

    @Test func unheardCreates_waitForAFetchThatBeganAfterTheyWereHandedOut() {
        var creates = UnheardCreates(waiting: ["from an earlier launch"])
        #expect(creates.waiting == ["from an earlier launch"])
        creates.fetchBegan()
        creates.handedOut("during the fetch")
        creates.fetchEnded(completed: true)
        #expect(creates.waiting == ["during the fetch"], "a fetch that began before the hand-out does not cover it")
        creates.handedOut("answered")
        creates.heard("answered")
        creates.fetchBegan()
        creates.fetchEnded(completed: false)
        #expect(creates.waiting == ["during the fetch"], "a fetch that failed covers nothing")
        creates.fetchBegan()
        creates.fetchEnded(completed: true)
        #expect(creates.waiting.isEmpty)
    }

    /// A note moved into a share: its create into the share's zone, handed out and never answered,
    /// waits for a fetch even when the server answers the delete it left in the zone it came from.
    @Test func anAnswerAboutTheRecordInAnotherZone_leavesItsCreateWaiting() {
        let (from, to) = (ZoneID(zoneName: "Notes"), ZoneID(zoneName: "Notes.share-1"))
        var creates = UnheardCreates()
        creates.handedOut("moved", in: to)
        creates.heard("moved", in: from)
        #expect(creates.waiting == ["moved"])
        creates.heard("moved", in: to)
        #expect(creates.waiting.isEmpty)
    }

    @Test func anUploadWhoseVersionTheServerLost_waitsForOneFetch_thenIsDecided() {
        var creates = UnheardCreates()
        creates.fetchBegan()
        creates.lostOnServer("moved away")
        #expect(creates.waiting == ["moved away"])
        creates.fetchEnded(completed: true)
        #expect(creates.waiting == ["moved away"], "a fetch that began before the failure does not cover it")
        #expect(creates.lostAndFetched.isEmpty)
        creates.fetchBegan()
        creates.fetchEnded(completed: false)
        #expect(creates.lostAndFetched.isEmpty, "a fetch that failed covers nothing")
        creates.fetchBegan()
        creates.fetchEnded(completed: true)
        #expect(creates.waiting.isEmpty)
        #expect(creates.lostAndFetched == ["moved away"], "its next failure is decided at once")
        creates.heard("moved away")
        #expect(creates.lostAndFetched.isEmpty)
    }

    // MARK: Links

    @Test func links_addedAgainstDeletedAndRemovedAgainstSaved() {
        let tag = UUID()
        let link = ConflictResolution.Link(entityName: "Note", relationship: "tags", source: id, target: tag)
        let (removed, logged) = resolution(.serverWins).linkAgainstDeletion(link)
        #expect(removed == .server)
        #expect(logged.first?.losingValue == .uuid(tag) && logged.first?.property == "tags")
        #expect(resolution(.localWins).linkAgainstDeletion(link).0 == .local)
        let (kept, keptLog) = resolution(.serverWins).linkDeletionAgainstSave(link)
        #expect(kept == .server)
        #expect(keptLog.first?.winningValue == .uuid(tag) && keptLog.first?.losingSide == .local)
        #expect(resolution(.localWins).linkDeletionAgainstSave(link).0 == .local)
    }

    @Test func referenceAgainstDeletion_logsTheReferenceWhateverThePolicy() {
        let folder = UUID()
        let object = ConflictResolution.Object(entityName: "Note", id: id)
        for policy in [ConflictPolicy.serverWins, .localWins, .lastWriterWins] {
            for side in [ConflictRecord.Side.local, .server] {
                let logged = resolution(policy).referenceAgainstDeletion(of: object, property: "folder", target: folder, side: side)
                #expect(logged.objectID == id && logged.property == "folder")
                #expect(logged.losingValue == .uuid(folder) && logged.winningValue == .null)
                #expect(logged.losingSide == side)
            }
        }
    }

    // MARK: Own unheard write

    @Test func ownUnheardWrite_isTheAncestorOnlyWhenThisDeviceWroteIt() {
        let current: [String: AttributeValue] = ["title": "old"]
        let server: [String: AttributeValue] = ["title": "mine"]
        func ancestor(writtenBy writer: String?, createdBy creator: String? = "B", thisDevice: String?, versionKnown: Bool = true)
            -> [String: AttributeValue]?
        {
            ConflictResolution.ancestor(
                current, server: server, writtenBy: writer, createdBy: creator, thisDevice: thisDevice, versionKnown: versionKnown)
        }
        #expect(ancestor(writtenBy: "A", thisDevice: "A") == server)
        #expect(ancestor(writtenBy: "B", thisDevice: "A") == current)
        #expect(ancestor(writtenBy: nil, thisDevice: nil) == current)
        // Without a version here, `current` is what this device's create carried: the ancestor of
        // a copy this device created and another edited, not of a copy another device created.
        #expect(ancestor(writtenBy: "B", createdBy: "A", thisDevice: "A", versionKnown: false) == current)
        #expect(ancestor(writtenBy: "B", createdBy: "B", thisDevice: "A", versionKnown: false) == nil)
        #expect(ancestor(writtenBy: "A", createdBy: "B", thisDevice: "A", versionKnown: false) == server)
        #expect(ancestor(writtenBy: "B", createdBy: "A", thisDevice: nil, versionKnown: false) == nil)
    }

    // MARK: Pending uploads

    @Test func pendingUploadsFollowTheRules() {
        typealias P = PendingUpload
        let insert = P.adding(.insert(keys: ["title", "body"]), at: then, to: nil, mayBeOnServer: false)
        #expect(insert == .save(full: true, keys: ["title": then, "body": then]))
        let insertUpdate = P.adding(.update(keys: ["title"]), at: later, to: insert, mayBeOnServer: false)
        #expect(insertUpdate == .save(full: true, keys: ["title": later, "body": then]), "insert + update → one save")
        #expect(P.adding(.delete, at: later, to: insertUpdate, mayBeOnServer: false) == nil, "insert + delete → nothing")
        #expect(P.adding(.delete, at: later, to: insertUpdate, mayBeOnServer: true) == .delete, "handed out, then deleted → delete")
        let update = P.adding(.update(keys: ["title"]), at: then, to: nil, mayBeOnServer: true)
        #expect(update == .save(full: false, keys: ["title": then]))
        #expect(update?.keysToUpload == ["title"])
        #expect(P.adding(.delete, at: later, to: update, mayBeOnServer: true) == .delete, "update + delete → delete")
        let recreated = P.adding(.insert(keys: ["title"]), at: later, to: .delete, mayBeOnServer: true)
        #expect(recreated == .save(full: true, keys: ["title": later]), "delete + insert → the whole object again")
        #expect(recreated?.keysToUpload == nil)
    }
}
