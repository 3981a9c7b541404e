import CloudStoreWire
import Testing

@testable import CloudStoreSync

@Suite struct RecordSendOutcomeTests {
    let zone = ZoneID(zoneName: "Notes")

    func request(_ operations: [RecordsModifyRequest.Operation]) -> RecordBatchPlan.Request {
        RecordBatchPlan.Request(zoneID: zone, atomic: false, operations: operations)
    }

    func save(_ name: String, title: String = "mine", tag: String? = nil) -> RecordsModifyRequest.Operation {
        RecordBatchPlan.operation(
            saving: Record(recordName: name, recordType: "Note", recordChangeTag: tag, zoneID: zone, fields: ["title": .string(title)]))
    }

    func delete(_ name: String) -> RecordsModifyRequest.Operation {
        RecordBatchPlan.operation(deleting: RecordID(recordName: name, zoneID: zone))
    }

    func server(_ name: String, title: String, tag: String = "s2") -> Record {
        Record(recordName: name, recordType: "Note", recordChangeTag: tag, fields: ["title": .string(title)])
    }

    /// The token advance runs only through requests that each carried the token the one before
    /// was answered: a request that broke the chain ends it where it was.
    @Test func tokenAdvance_followsOnlyAnUnbrokenChainOfAnswers() {
        var outcome = RecordSendOutcome()
        outcome.advanceToken(of: zone, sent: "T0", answered: nil)
        #expect(outcome.tokenAdvances.isEmpty, "an answer without a token proves nothing")
        outcome.advanceToken(of: zone, sent: "T0", answered: "T1")
        outcome.advanceToken(of: zone, sent: "T1", answered: "T2")
        #expect(outcome.tokenAdvances[zone] == .init(from: "T0", to: "T2"))
        outcome.advanceToken(of: zone, sent: "T2", answered: nil)
        outcome.advanceToken(of: zone, sent: "T7", answered: "T8")
        #expect(outcome.tokenAdvances[zone] == .init(from: "T0", to: "T2"), "a gap after T2 ends the advance there")
        let other = ZoneID(zoneName: "Other")
        outcome.advanceToken(of: other, sent: nil, answered: "O1")
        outcome.advanceToken(of: other, sent: nil, answered: "O9")
        #expect(outcome.tokenAdvances[other] == .init(from: nil, to: "O1"), "a zone never written starts without a token")
    }

    @Test func results_sortIntoSavedDeletedFailedAndRetained() throws {
        var outcome = RecordSendOutcome()
        let operations = [save("ok"), delete("del"), delete("missing"), save("bad"), save("busy"), save("sibling")]
        try outcome.absorb(
            RecordsResponse(records: [
                .value(server("ok", title: "mine", tag: "t1")),
                .value(Record(recordName: "del", deleted: true)),
                .error(ServerError(.notFound, recordName: "missing")),
                .error(ServerError(.validatingReferenceError, recordName: "bad")),
                .error(ServerError(.throttled, retryAfter: 7, recordName: "busy")),
                .error(ServerError(.atomicError, recordName: "sibling")),
            ]), for: request(operations))
        #expect(outcome.savedRecords.map(\.recordName) == ["ok"])
        #expect(outcome.savedRecords.first?.zoneID == zone)
        #expect(outcome.deletedRecordIDs.map(\.recordName) == ["del", "missing"], "NOT_FOUND on delete counts as deleted")
        #expect(outcome.failedRecordSaves.map(\.record.recordName) == ["bad"])
        #expect(Set(outcome.retained.keys.map(\.recordName)) == ["busy", "sibling"])
        #expect(outcome.retryAfter == 7)
        #expect(outcome.needsRetry)
    }

    @Test func results_countMismatchIsAnInvalidResponse() {
        var outcome = RecordSendOutcome()
        #expect(throws: CloudError.self) {
            try outcome.absorb(RecordsResponse(records: []), for: request([save("a")]))
        }
    }

    @Test func conflict_withServerRecordFailsWithIt() throws {
        var outcome = RecordSendOutcome()
        try outcome.absorb(
            RecordsResponse(records: [
                .error(ServerError(.conflict, recordName: "n", serverRecord: server("n", title: "theirs")))
            ]), for: request([save("n", tag: "s1")]))
        let failure = try #require(outcome.failedRecordSaves.first)
        #expect(failure.error.code == .conflict)
        #expect(failure.error.serverRecord?.fields["title"] == .string("theirs"))
        #expect(failure.error.serverRecord?.zoneID == zone)
        #expect(failure.record.fields["title"] == .string("mine"))
    }

    @Test func conflict_withoutServerRecordWaitsForALookup() throws {
        var outcome = RecordSendOutcome()
        try outcome.absorb(
            RecordsResponse(records: [.error(ServerError(.conflict, recordName: "n"))]), for: request([save("n", tag: "s1")]))
        #expect(outcome.failedRecordSaves.isEmpty)
        let waiting = try #require(outcome.conflictsAwaitingServerRecord.first)

        var resolved = outcome
        resolved.resolveConflict(waiting, lookup: .value(server("n", title: "theirs")))
        #expect(resolved.failedRecordSaves.first?.error.serverRecord?.fields["title"] == .string("theirs"))

        var gone = outcome
        gone.resolveConflict(waiting, lookup: .error(ServerError(.notFound, recordName: "n")))
        #expect(gone.failedRecordSaves.first?.error.code == .notFound)

        var unreachable = outcome
        unreachable.resolveConflict(waiting, lookup: nil)
        #expect(unreachable.failedRecordSaves.isEmpty)
        #expect(unreachable.retained[RecordID(recordName: "n", zoneID: zone)] != nil, "the change stays pending")
    }

    @Test func conflict_whoseServerCopyHoldsWhatWasSentCountsAsSaved() throws {
        // A retry after the first attempt's answer was lost: the server already has our values.
        var outcome = RecordSendOutcome()
        try outcome.absorb(
            RecordsResponse(records: [
                .error(ServerError(.exists, recordName: "n", serverRecord: server("n", title: "mine", tag: "t9")))
            ]), for: request([save("n")]))
        #expect(outcome.failedRecordSaves.isEmpty)
        #expect(outcome.savedRecords.map(\.recordChangeTag) == ["t9"])
    }

    @Test func exists_withOtherContentIsAFailedSave() throws {
        var outcome = RecordSendOutcome()
        var theirs = server("n", title: "mine")
        theirs.fields["extra"] = .int64(1)
        try outcome.absorb(
            RecordsResponse(records: [.error(ServerError(.exists, recordName: "n", serverRecord: theirs))]),
            for: request([save("n")]))
        #expect(outcome.failedRecordSaves.map(\.error.code) == [.exists])
    }

    @Test func requestError_zoneNotFoundFailsSavesAndSettlesDeletes() {
        var outcome = RecordSendOutcome()
        outcome.absorb(requestError: ServerError(.zoneNotFound), for: request([save("a"), delete("b")]))
        #expect(outcome.failedRecordSaves.map(\.error.code) == [.zoneNotFound])
        #expect(outcome.failedRecordSaves.first?.error.recordName == "a")
        #expect(outcome.deletedRecordIDs.map(\.recordName) == ["b"])
    }

    @Test func serverHolds_comparesOnlySentFieldsForUpdates() {
        let sent = Record(recordName: "n", recordType: "Note", fields: ["title": "x"])
        var server = Record(recordName: "n", recordType: "Note", fields: ["title": "x", "body": "y"])
        #expect(RecordSendOutcome.serverHolds(sent, server, exactly: false))
        #expect(!RecordSendOutcome.serverHolds(sent, server, exactly: true))
        server.fields["title"] = "z"
        #expect(!RecordSendOutcome.serverHolds(sent, server, exactly: false))
        let clearing = Record(recordName: "n", fields: ["body": .null])
        #expect(RecordSendOutcome.serverHolds(clearing, Record(recordName: "n", fields: ["title": "z"]), exactly: false))
    }

    /// A share change that conflicts was not already saved unless the server's share grants what
    /// it asks: a removal the server has not applied must go again with the server's tag.
    @Test func serverHolds_aShareOnlyWhenItGrantsTheSentAccess() {
        func share(_ participants: [(String, SharePermission)], owner: Bool) -> ShareMetadata {
            var list = participants.map { ShareParticipant.invite($0.0, permission: $0.1) }
            if owner {
                list.insert(
                    ShareParticipant(role: .owner, permission: .readWrite, userIdentity: .init(userRecordName: "_alice")), at: 0)
            }
            return ShareMetadata(publicPermission: SharePermission.none, participants: list)
        }
        var sent = Record(recordName: ShareMetadata.zoneShareRecordName, recordType: ShareMetadata.recordType, fields: ["title": "x"])
        sent.share = share([("_carol", .readOnly)], owner: false)
        var server = sent
        server.share = share([("_bob", .readWrite), ("_carol", .readOnly)], owner: true)
        #expect(!RecordSendOutcome.serverHolds(sent, server, exactly: false), "bob is still in: the removal is not saved")
        server.share = share([("_carol", .readOnly)], owner: true)
        #expect(RecordSendOutcome.serverHolds(sent, server, exactly: false))
        server.share = share([("_carol", .readWrite)], owner: true)
        #expect(!RecordSendOutcome.serverHolds(sent, server, exactly: false), "another permission")
        server.share = nil
        #expect(!RecordSendOutcome.serverHolds(sent, server, exactly: false), "a server copy without its share proves nothing")
    }

    @Test func serverHolds_comparesAssetsByChecksumAndSize() {
        let checksum = "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
        let sent = Record(
            recordName: "n", recordType: "Note",
            fields: ["photo": .asset(Asset(fileChecksum: checksum, size: 0, receipt: "r1"))])
        var server = Record(
            recordName: "n", recordType: "Note",
            fields: ["photo": .asset(Asset(fileChecksum: checksum, size: 0, downloadURL: "/assets/e3"))])
        #expect(RecordSendOutcome.serverHolds(sent, server, exactly: true), "a lost answer's retry counts as saved")
        server.fields["photo"] = .asset(Asset(fileChecksum: "other", size: 0, downloadURL: "/assets/00"))
        #expect(!RecordSendOutcome.serverHolds(sent, server, exactly: false))
    }
}
