import CloudStoreWire
import Foundation
import Testing

@testable import CloudStoreServer

/// The decisions of sharing (``ShareRules``, ``ShareAcceptance``, and ``RecordsModifier`` for the
/// share record and writes through the shared database), driven directly without HTTP or storage.
@Suite("ShareRules")
struct ShareRulesTests {
    let zone = DatabasePartition(container: "c", environment: .development, scope: .private, owner: "_alice").zone("List")
    let stamp = Record.Stamp(timestamp: Date(timeIntervalSince1970: 1_800_000_000), userRecordName: "_alice", deviceID: "d")
    let rules = ShareRules(
        isKnownUser: { ["_alice", "_bob", "_carol", "_dave"].contains($0) || $0.hasPrefix("_u") },
        makeShortGUID: { "GUID-1" }, makeParticipantID: { "P-\(UUID().uuidString.prefix(4))" })

    func share(_ participants: [(String, SharePermission, ShareParticipant.AcceptanceStatus)], public permission: SharePermission = .none)
        -> StoredShare
    {
        StoredShare(
            shortGUID: "GUID-1", owner: "_alice", ownerParticipantID: "P-owner", publicPermission: permission,
            participants: Dictionary(
                uniqueKeysWithValues: participants.map {
                    ($0.0, StoredParticipant(user: $0.0, participantID: "P\($0.0)", permission: $0.1, status: $0.2))
                }))
    }

    func invite(_ users: [(String, SharePermission)], public permission: SharePermission? = nil) -> ShareMetadata {
        ShareMetadata(publicPermission: permission, participants: users.map { .invite($0.0, permission: $0.1) })
    }

    @Test func creating_invitesUsersAndMakesTheOwner() throws {
        let created = try rules.saved(invite([("_bob", .readWrite), ("_alice", .readOnly)]), over: nil, owner: "_alice").get()
        #expect(created.shortGUID == "GUID-1" && created.owner == "_alice" && created.publicPermission == SharePermission.none)
        #expect(created.participants.keys.sorted() == ["_bob"], "the owner is not a participant of their own share")
        #expect(created.participants["_bob"]?.status == .invited && created.participants["_bob"]?.permission == .readWrite)
        let metadata = created.metadata(for: "_bob")
        #expect(metadata.participants?.map(\.user) == ["_alice", "_bob"])
        #expect(metadata.owner?.role == .owner && metadata.currentUserParticipant?.user == "_bob")
        #expect(created.metadata(for: "_mallory").currentUserParticipant == nil)
    }

    @Test func updating_keepsStatusChangesPermissionAndRemovesTheOmitted() throws {
        let before = share([("_bob", .readOnly, .accepted), ("_carol", .readWrite, .invited), ("_dave", .readOnly, .removed)])
        let after = try rules.saved(
            invite([("_bob", .readWrite), ("_dave", .readOnly)], public: .readOnly), over: before, owner: "_alice"
        ).get()
        #expect(after.participants["_bob"] == StoredParticipant(user: "_bob", participantID: "P_bob", permission: .readWrite, status: .accepted))
        #expect(after.participants["_carol"]?.status == .removed)
        #expect(after.participants["_dave"]?.status == .invited, "a removed user invited again must accept again")
        #expect(after.participants["_dave"]?.participantID == "P_dave")
        #expect(after.publicPermission == .readOnly)
        #expect(ShareRules.sharedDatabases(before: before, after: after) == ["_bob"])
        let untouched = try rules.saved(ShareMetadata(), over: before, owner: "_alice").get()
        #expect(untouched == before, "a save without participants keeps them")
    }

    @Test func refused_otherLookupKeysUnknownUsersDuplicatesAndTheLimit() {
        func problem(_ participants: [ShareParticipant]) -> ShareRules.Problem? {
            if case .failure(let problem) = rules.saved(ShareMetadata(participants: participants), over: nil, owner: "_alice") {
                return problem
            }
            return nil
        }
        let email = problem([ShareParticipant(permission: .readOnly, userIdentity: .init(lookupInfo: .init(emailAddress: "b@x")))])
        #expect(email?.code == .badRequest && email?.reason.contains("emailAddress") == true)
        let phone = problem([ShareParticipant(permission: .readOnly, userIdentity: .init(lookupInfo: .init(phoneNumber: "1")))])
        #expect(phone?.reason.contains("phoneNumber") == true)
        #expect(problem([.invite("_mallory", permission: .readOnly)])?.reason.contains("_mallory") == true)
        #expect(problem([.invite("_bob", permission: .readOnly), .invite("_bob", permission: .readWrite)])?.code == .badRequest)
        #expect(problem([.invite("_bob", permission: .none)])?.code == .badRequest)
        #expect(problem((0...100).map { .invite("_u\($0)", permission: .readOnly) })?.code == .limitExceeded)
        #expect(problem((0..<100).map { .invite("_u\($0)", permission: .readOnly) }) == nil)
    }

    @Test func stoppingAndLeaving_removeAccess() {
        let before = share([("_bob", .readOnly, .accepted), ("_carol", .readWrite, .invited)])
        let stopped = ShareRules.stopped(before)
        #expect(stopped.participants.values.allSatisfy { $0.status == .removed })
        #expect(ShareRules.sharedDatabases(before: before, after: nil) == ["_bob"])
        let left = ShareRules.leaving(before, user: "_bob")
        #expect(ShareRules.permission(of: left.participants["_bob"]) == nil)
        #expect(ShareRules.permission(of: before.participants["_bob"]) == .readOnly)
        #expect(ShareRules.permission(of: before.participants["_carol"]) == nil, "invited is not yet accepted")
    }

    // MARK: - Accepting

    func acceptance(_ caller: String, guid: String = "GUID-1") -> ShareAcceptance {
        ShareAcceptance(shortGUID: guid, caller: caller, stamp: stamp, makeParticipantID: { "P-new" })
    }

    func code(_ result: Result<ShareAcceptance.Joined, ServerError>) -> ServerErrorCode? {
        if case .failure(let error) = result { return error.serverErrorCode }
        return nil
    }

    @Test func accepting_invitedJoinsOthersNeedThePublicPermission() throws {
        let closed = share([("_bob", .readWrite, .invited), ("_carol", .readOnly, .removed)])
        let bob = try acceptance("_bob").decide(closed).get()
        #expect(bob.share.participants["_bob"]?.status == .accepted && bob.participant.permission == .readWrite)
        #expect(code(acceptance("_carol").decide(closed)) == .accessDenied, "removed, and the link is closed")
        #expect(code(acceptance("_dave").decide(closed)) == .accessDenied)
        #expect(code(acceptance("_bob", guid: "other").decide(closed)) == .notFound)
        #expect(code(acceptance("_bob").decide(nil)) == .notFound)
        #expect(try acceptance("_alice").decide(closed).get().share == closed, "the owner's accept changes nothing")

        let open = share([("_carol", .readWrite, .removed)], public: .readOnly)
        let carol = try acceptance("_carol").decide(open).get()
        #expect(carol.participant.permission == .readOnly && carol.participant.participantID == "P_carol")
        let dave = try acceptance("_dave").decide(open).get()
        #expect(dave.participant.acceptanceStatus == .accepted && dave.participant.participantID == "P-new")

        let full = share((0..<100).map { ("_u\($0)", .readOnly, .accepted) }, public: .readOnly)
        #expect(code(acceptance("_dave").decide(full)) == .limitExceeded)
    }

    @Test func accepting_writesTheShareRecordOnceAndAgainNothing() throws {
        let invited = share([("_bob", .readWrite, .invited)])
        let record = shareRow(seq: 4)
        let (plan, decision) = acceptance("_bob").plan(snapshot([record], share: invited))
        #expect(plan.writes.map(\.name) == [ShareMetadata.zoneShareRecordName])
        #expect(plan.sharedDatabases == ["_bob"])
        guard case .save(let saved)? = plan.share else { Issue.record("no share saved"); return }
        #expect(saved.participants["_bob"]?.status == .accepted)
        #expect(code(decision) == nil)
        let (again, _) = acceptance("_bob").plan(snapshot([record], share: saved))
        #expect(again.writes.isEmpty && again.share == nil)
    }

    // MARK: - records/modify

    func shareRow(seq: Int64) -> StoredRecord {
        StoredRecord(
            name: ShareMetadata.zoneShareRecordName, type: ShareMetadata.recordType, seq: seq,
            content: try! StoredContent(RecordContent(fields: ["title": "T"], created: stamp, modified: stamp)), deletedAt: nil)
    }

    func note(_ name: String, seq: Int64) -> StoredRecord {
        StoredRecord(
            name: name, type: "Note", seq: seq,
            content: try! StoredContent(RecordContent(fields: [:], created: stamp, modified: stamp)), deletedAt: nil)
    }

    func snapshot(_ records: [StoredRecord], share: StoredShare?) -> RecordSnapshot {
        RecordSnapshot(
            zone: StoredZone(name: "List", seq: 10, dbSeq: 1, incarnation: 1, purgedThrough: 0, deleted: false),
            records: Dictionary(uniqueKeysWithValues: records.map { ($0.name, $0) }), deleteSelfReferrers: [:],
            schema: .empty, share: share)
    }

    func modifier(
        _ operations: [(RecordsModifyRequest.OperationType, Record)], participant: String? = nil, in zone: ZoneAddress? = nil,
        atomic: Bool = false, environment: CloudEnvironment = .development
    ) -> RecordsModifier {
        let rules = RecordRules(zone: zone ?? self.zone, maxRecordBytes: 1 << 20)
        return RecordsModifier(
            operations: operations.map { .init(type: $0.0, record: $0.1, failure: rules.check($0.1)) }, atomic: atomic,
            stamp: stamp, environment: environment, onlyCreatorMayChange: false, rules: rules,
            present: { Record(recordName: $0.name) }, participant: participant, shareRules: self.rules)
    }

    func codes(_ outcomes: [RecordsModifier.Outcome]) -> [ServerErrorCode?] {
        outcomes.map { if case .failed(let error) = $0 { error.serverErrorCode } else { nil } }
    }

    func shareRecord(_ participants: [(String, SharePermission)], tag: String? = nil) -> Record {
        var record = Record(
            recordName: ShareMetadata.zoneShareRecordName, recordType: "cloudKit.share", recordChangeTag: tag, fields: ["title": "T"])
        record.share = invite(participants)
        return record
    }

    @Test func owner_createsUpdatesAndStopsTheShareWithTheRecord() throws {
        let (created, createdOutcomes) = try modifier([(.create, shareRecord([("_bob", .readWrite)]))], environment: .production)
            .plan(snapshot([], share: nil))
        #expect(codes(createdOutcomes) == [nil], "a share needs no schema, even in production")
        #expect(created.writes.first?.type == ShareMetadata.recordType && created.schema == nil)
        guard case .save(let saved)? = created.share else { Issue.record("no share"); return }
        #expect(saved.participants["_bob"]?.status == .invited && created.sharedDatabases.isEmpty)

        let accepted = share([("_bob", .readWrite, .accepted)])
        let (updated, _) = try modifier([(.update, shareRecord([], tag: "4"))]).plan(snapshot([shareRow(seq: 4)], share: accepted))
        #expect(updated.sharedDatabases == ["_bob"], "bob learns he lost access")
        let (stale, staleOutcomes) = try modifier([(.update, shareRecord([], tag: "1"))]).plan(snapshot([shareRow(seq: 4)], share: accepted))
        #expect(codes(staleOutcomes) == [.conflict] && stale.share == nil)
        let (stopped, stopOutcomes) = try modifier([(.forceDelete, Record(recordName: ShareMetadata.zoneShareRecordName))])
            .plan(snapshot([shareRow(seq: 4)], share: accepted))
        #expect(stopOutcomes == [.deleted(ShareMetadata.zoneShareRecordName)])
        guard case .stop(let ended)? = stopped.share else { Issue.record("not stopped"); return }
        #expect(ended.participants["_bob"]?.status == .removed && stopped.sharedDatabases == ["_bob"])

        let defaultZone = zone.partition.zone(ZoneID.defaultZoneName)
        let (_, inDefault) = try modifier([(.create, shareRecord([]))], in: defaultZone).plan(snapshot([], share: nil))
        #expect(codes(inDefault) == [.badRequest])
    }

    @Test func participants_readOnlyWritesAreDeniedAndLeavingRemovesTheCaller() throws {
        let current = share([("_bob", .readWrite, .accepted), ("_carol", .readOnly, .accepted), ("_dave", .readOnly, .removed)])
        let rows = [shareRow(seq: 4), note("L-1", seq: 5)]
        let write: (RecordsModifyRequest.OperationType, Record) = (.forceUpdate, Record(recordName: "L-1", fields: ["x": 1]))

        let (bobPlan, bobOutcomes) = try modifier([write], participant: "_bob").plan(snapshot(rows, share: current))
        #expect(codes(bobOutcomes) == [nil] && bobPlan.sharedDatabases == ["_bob", "_carol"])
        let (_, carolOutcomes) = try modifier([write], participant: "_carol").plan(snapshot(rows, share: current))
        #expect(codes(carolOutcomes) == [.accessDenied])
        let (davePlan, daveOutcomes) = try modifier([write, (.create, Record(recordName: "N", recordType: "Note"))], participant: "_dave")
            .plan(snapshot(rows, share: current))
        #expect(codes(daveOutcomes) == [.accessDenied, .accessDenied] && davePlan.writes.isEmpty)

        let (_, changeShare) = try modifier([(.forceUpdate, shareRecord([("_carol", .readWrite)]))], participant: "_bob")
            .plan(snapshot(rows, share: current))
        #expect(codes(changeShare) == [.accessDenied])
        let (left, leftOutcomes) = try modifier(
            [(.delete, Record(recordName: ShareMetadata.zoneShareRecordName, recordChangeTag: "stale"))], participant: "_carol"
        ).plan(snapshot(rows, share: current))
        #expect(leftOutcomes == [.deleted(ShareMetadata.zoneShareRecordName)], "leaving ignores the tag and is a success")
        #expect(left.writes.map(\.name) == [ShareMetadata.zoneShareRecordName] && left.writes.first?.change != .delete)
        guard case .save(let after)? = left.share else { Issue.record("no share change"); return }
        #expect(after.participants["_carol"]?.status == .removed && after.participants["_bob"]?.status == .accepted)
        #expect(left.sharedDatabases == ["_bob", "_carol"])

        var outside = RecordRules(zone: zone, maxRecordBytes: 1 << 20)
        outside.sameZoneReferencesOnly = true
        let elsewhere = Record(
            recordName: "R", recordType: "Note",
            fields: ["r": .reference(Reference(recordName: "X", zoneID: ZoneID(zoneName: "Other", ownerRecordName: "_alice"), action: .none))])
        #expect(outside.check(elsewhere)?.serverErrorCode == .badRequest)
        #expect(RecordRules(zone: zone, maxRecordBytes: 1 << 20).check(elsewhere) == nil, "private zones allow NONE references anywhere")
    }

    @Test func assets_participantsDownloadWhileTheyTakePartAndUploadWithReadWrite() {
        let current = share([("_bob", .readWrite, .accepted), ("_carol", .readOnly, .accepted), ("_dave", .readWrite, .removed)])
        let owner = zone.partition
        #expect(AssetAccess.mayDownload(.user("_bob"), from: owner, participant: current.participants["_bob"]))
        #expect(AssetAccess.mayDownload(.user("_carol"), from: owner, participant: current.participants["_carol"]))
        #expect(!AssetAccess.mayDownload(.user("_dave"), from: owner, participant: current.participants["_dave"]))
        #expect(!AssetAccess.mayDownload(.user("_carol"), from: owner, participant: current.participants["_bob"]), "another's row")
        #expect(!AssetAccess.mayDownload(.serverKey("k"), from: owner, participant: current.participants["_bob"]))
        #expect(AssetAccess.mayUpload("_alice", to: zone, participant: nil))
        #expect(AssetAccess.mayUpload("_bob", to: zone, participant: current.participants["_bob"]))
        #expect(!AssetAccess.mayUpload("_carol", to: zone, participant: current.participants["_carol"]))
        #expect(!AssetAccess.mayUpload("_dave", to: zone, participant: current.participants["_dave"]))
    }

    @Test func shortGUIDs_are128RandomBitsURLSafe() {
        let guids = (0..<50).map { _ in ShareIdentifiers.newShortGUID() }
        #expect(Set(guids).count == 50)
        #expect(guids.allSatisfy(ShareIdentifiers.isShortGUID))
        #expect(!ShareIdentifiers.isShortGUID("short") && !ShareIdentifiers.isShortGUID("AAAAAAAAAAAAAAAAAAAA=="))
    }
}
