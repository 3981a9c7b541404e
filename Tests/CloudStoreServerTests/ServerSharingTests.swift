import CloudStoreServer
import CloudStoreTesting
import CloudStoreWire
import Foundation
import Testing

/// Zone-wide shares end to end (WireProtocol.md §6): the owner shares a zone of their private
/// database, participants resolve and accept it and use the zone through their shared database,
/// and access ends at once when they are removed, leave, or the share or zone goes.
@Suite("sharing", .timeLimit(.minutes(ReliabilityRun.hangLimitMinutes)))
struct ServerSharingTests {
    static let list = ZoneID(zoneName: "List", ownerRecordName: "_alice")

    /// Alice's zone `List` with two records, shared with bob (READ_WRITE) and carol (READ_ONLY).
    static func sharedList(_ alice: CloudClient, publicPermission: SharePermission? = nil) async throws -> Record {
        try await alice.createZone("List")
        try await alice.save("List", [note("L-1", title: "milk"), note("L-2", title: "eggs")])
        return try await alice.share("List", [("_bob", .readWrite), ("_carol", .readOnly)], publicPermission: publicPermission)
    }

    /// Alice's shared `List`, accepted by bob; answers the share, bob, and bob's shared database token.
    static func acceptedByBob(_ alice: CloudClient) async throws -> (share: Record, bob: CloudClient, token: String) {
        let share = try await sharedList(alice)
        let bob = alice.asUser("bob-token", device: "device-B")
        _ = try await bob.accept([try #require(share.share?.shortGUID)])
        return (share, bob, try await bob.sharedDatabaseChanges(token: nil).syncToken)
    }

    /// The current change tag of alice's share of `List` (accepting changes it).
    static func shareTag(_ alice: CloudClient) async throws -> String? {
        try await alice.lookup("List", [ShareMetadata.zoneShareRecordName]).first?.value?.recordChangeTag
    }

    @Test(arguments: Backend.all)
    func share_createResolveAcceptAndWorkInTheOwnersZone(_ backend: Backend) async throws {
        try await withServer(backend, users: sharingUsers) { _, alice in
            let share = try await Self.sharedList(alice)
            let metadata = try #require(share.share)
            let shortGUID = try #require(metadata.shortGUID)
            #expect(shortGUID.count == 22 && !shortGUID.contains("=") && !shortGUID.contains("+") && !shortGUID.contains("/"))
            #expect(share.recordType == ShareMetadata.recordType, "stored under its canonical type")
            #expect(metadata.owner?.user == "_alice" && metadata.owner?.role == .owner)
            #expect(metadata.participants?.map(\.user) == ["_alice", "_bob", "_carol"])
            #expect(metadata.participants?.dropFirst().map(\.acceptanceStatus) == [.invited, .invited])
            #expect(metadata.participants?.allSatisfy { $0.participantID != nil } == true)
            #expect(metadata.currentUserParticipant?.user == "_alice")
            #expect(metadata.publicPermission == SharePermission.none)

            let bob = alice.asUser("bob-token", device: "device-B")
            let preview = try #require(try await bob.accept([shortGUID], resolveOnly: true).first)
            #expect(preview.zoneID == Self.list && preview.serverErrorCode == nil)
            #expect(preview.share?.fields["title"] == .string("Weekly shopping"))
            #expect(preview.share?.share?.currentUserParticipant?.permission == .readWrite)
            #expect(try await bob.sharedZoneIDs().isEmpty, "resolving does not join")

            let first = try #require(try await bob.accept([shortGUID]).first)
            #expect(first.zoneID == Self.list && first.share?.share?.currentUserParticipant?.acceptanceStatus == .accepted)
            let again = try #require(try await bob.accept([shortGUID]).first)
            #expect(again.serverErrorCode == nil && again.share?.recordChangeTag == first.share?.recordChangeTag, "accepting twice changes nothing")
            #expect(try await bob.sharedZoneIDs() == [Self.list])
            let database = try await bob.sharedDatabaseChanges(token: nil)
            #expect(database.zones.map(\.zoneID) == [Self.list] && database.zones.first?.isDeleted == false)

            // The same records, tags and tokens as the owner's.
            let owners = try await alice.allZoneChanges("List")
            let bobsPage = try await bob.zoneChanges(Self.list, in: .shared).decode(ZoneChangesResponse.self)
            guard case .value(let page)? = bobsPage.zones.first else { Issue.record("\(bobsPage)"); return }
            #expect(page.syncToken == owners.token)
            #expect(page.records.map(\.recordChangeTag) == owners.records.map(\.recordChangeTag))
            #expect(database.zones.first?.syncToken == owners.token)
            let bobsShare = page.records.first { $0.recordName == ShareMetadata.zoneShareRecordName }
            #expect(bobsShare?.share?.currentUserParticipant?.user == "_bob", "the share names the caller")

            // Bob writes; alice sees who wrote; conflicts work as in a private zone.
            let written = try await bob.modify(Self.list, [.init(.create, note("L-3", title: "bread"))], in: .shared)
            #expect(written.status == 200, "\(written.text)")
            let seen = try await alice.lookup("List", ["L-3"])
            #expect(seen.first?.value?.modified?.userRecordName == "_bob")
            #expect(seen.first?.value?.modified?.deviceID == "device-B")
            let stale = try await bob.modify(
                Self.list, [.init(.update, note("L-1", title: "oat milk", tag: "zz"))], atomic: false, in: .shared)
            let conflict = try stale.decode(RecordsResponse.self).records.first?.error
            #expect(conflict?.serverErrorCode == .conflict && conflict?.serverRecord?.recordName == "L-1")
            let atomic = try await bob.modify(
                Self.list, [.init(.create, note("L-4")), .init(.update, note("L-1", tag: "zz"))], in: .shared)
            #expect(atomic.status == 400)

            // Carol reads but may not write.
            let carol = alice.asUser("carol-token", device: "device-C")
            _ = try await carol.accept([shortGUID])
            let read = try await carol.lookup(Self.list, ["L-1"], in: .shared).decode(RecordsResponse.self)
            #expect(read.records.first?.value?.fields["title"] == .string("milk"))
            let denied = try await carol.modify(Self.list, [.init(.forceUpdate, note("L-1", title: "mine"))], atomic: false, in: .shared)
            #expect(denied.status == 200)
            #expect(try denied.decode(RecordsResponse.self).records.first?.code == .accessDenied)
            #expect(try await alice.lookup("List", ["L-1"]).first?.value?.fields["title"] == .string("milk"))

            // The owner's share shows who accepted; a query finds it under Apple's spelling too.
            let ownersView = try await alice.lookup("List", [ShareMetadata.zoneShareRecordName]).first?.value?.share
            #expect(ownersView?.participants?.map(\.acceptanceStatus) == [.accepted, .accepted, .accepted])
            let query = try await carol.call(.shared, .recordsQuery, RecordsQueryRequest(zoneID: Self.list, query: .init(recordType: "cloudKit.share")))
            let found = try query.decode(RecordsQueryResponse.self).records.first?.value
            #expect(found?.share?.currentUserParticipant?.user == "_carol" && found?.share?.shortGUID == shortGUID)
        }
    }

    @Test(arguments: Backend.all)
    func publicPermission_letsAnyoneWithTheLinkJoin(_ backend: Backend) async throws {
        try await withServer(backend, users: sharingUsers) { _, alice in
            let share = try await Self.sharedList(alice, publicPermission: .readOnly)
            let shortGUID = try #require(share.share?.shortGUID)
            let dave = alice.asUser("dave-token", device: "device-D")
            let joined = try #require(try await dave.accept([shortGUID]).first)
            #expect(joined.share?.share?.currentUserParticipant?.permission == .readOnly)
            #expect(try await dave.sharedZoneIDs() == [Self.list])
            let write = try await dave.modify(Self.list, [.init(.create, note("D-1"))], atomic: false, in: .shared)
            #expect(try write.decode(RecordsResponse.self).records.first?.code == .accessDenied)

            // Closing the link keeps those who joined; others are refused.
            let tag = try await alice.lookup("List", [ShareMetadata.zoneShareRecordName]).first?.value?.recordChangeTag
            try await alice.share("List", publicPermission: SharePermission.none, .update, tag: tag)
            let erin = alice.asUser("erin-token")
            #expect(try await erin.accept([shortGUID]).first?.serverErrorCode == .accessDenied)
            #expect(try await dave.sharedZoneIDs() == [Self.list])
            #expect(try await erin.accept(["AAAAAAAAAAAAAAAAAAAAAA", "not a guid"]).map(\.serverErrorCode) == [.notFound, .notFound])
        }
    }

    @Test(arguments: Backend.all)
    func removal_endsAccessAtOnceAndTheZoneIsUnsharedOnce(_ backend: Backend) async throws {
        try await withServer(backend, users: sharingUsers) { _, alice in
            let (share, bob, token) = try await Self.acceptedByBob(alice)
            let shortGUID = try #require(share.share?.shortGUID)

            let clock = ContinuousClock()
            let started = clock.now
            async let poll = bob.send(.GET, bob.path(.shared, .notifications) + "?timeout=30&since=\(token)")
            try await alice.share("List", [("_carol", .readOnly)], .update, tag: try await Self.shareTag(alice))
            let woken = try await poll.decode(NotificationsResponse.self)
            #expect(woken.changed && woken.zones.map(\.zoneID) == [Self.list], "bob's waiting long poll answers")
            #expect(clock.now - started < .seconds(20))

            let lookup = try await bob.lookup(Self.list, ["L-1"], in: .shared)
            #expect(lookup.status == 403 && lookup.error?.serverErrorCode == .accessDenied, "\(lookup.text)")
            let changes = try await bob.sharedDatabaseChanges(token: token)
            #expect(changes.zones == [Zone(zoneID: Self.list, deleted: true, reason: .unshared)])
            #expect(try await bob.sharedDatabaseChanges(token: changes.syncToken).zones.isEmpty, "unshared appears once")
            #expect(try await bob.sharedZoneIDs().isEmpty)
            #expect(try await bob.accept([shortGUID]).first?.serverErrorCode == .accessDenied, "removed: invite again to return")

            // Invited again, bob accepts again and the zone comes back.
            let current = try await alice.lookup("List", [ShareMetadata.zoneShareRecordName]).first?.value
            try await alice.share("List", [("_bob", .readOnly), ("_carol", .readOnly)], .update, tag: current?.recordChangeTag)
            _ = try await bob.accept([shortGUID])
            #expect(try await bob.sharedDatabaseChanges(token: changes.syncToken).zones.map(\.isDeleted) == [false])
        }
    }

    @Test(arguments: Backend.all)
    func leaving_removesTheCallerOnly(_ backend: Backend) async throws {
        try await withServer(backend, users: sharingUsers) { _, alice in
            let (share, bob, token) = try await Self.acceptedByBob(alice)
            let carol = alice.asUser("carol-token", device: "device-C")
            _ = try await carol.accept([try #require(share.share?.shortGUID)])

            let change = try await bob.modify(
                Self.list, [.init(.update, shareRecord([("_bob", .readWrite)], publicPermission: .readWrite, tag: "x"))],
                in: .shared)
            #expect(change.status == 400, "participants do not change the share: \(change.text)")
            let left = try await bob.modify(
                Self.list, [.init(.forceDelete, Record(recordName: ShareMetadata.zoneShareRecordName))], in: .shared)
            #expect(left.status == 200, "\(left.text)")
            #expect(try left.decode(RecordsResponse.self).records.first?.value?.deleted == true)

            #expect(try await bob.lookup(Self.list, ["L-1"], in: .shared).status == 403)
            #expect(try await bob.sharedDatabaseChanges(token: token).zones.first?.reason == .unshared)
            #expect(try await carol.lookup(Self.list, ["L-1"], in: .shared).status == 200, "carol stays")
            let ownersView = try await alice.lookup("List", [ShareMetadata.zoneShareRecordName]).first?.value
            #expect(ownersView?.share?.participants?.map(\.user) == ["_alice", "_carol"])
            #expect(ownersView?.recordChangeTag != share.recordChangeTag, "the share record changed")
        }
    }

    @Test(arguments: Backend.all)
    func stoppingTheShareOrDeletingTheZone_endsEveryonesAccess(_ backend: Backend) async throws {
        try await withServer(backend, users: sharingUsers) { _, alice in
            let (share, bob, token) = try await Self.acceptedByBob(alice)
            let shortGUID = try #require(share.share?.shortGUID)

            let stop = try await alice.modify(
                ZoneID(zoneName: "List"),
                [.init(.delete, Record(recordName: ShareMetadata.zoneShareRecordName, recordChangeTag: try await Self.shareTag(alice)))],
                in: .private)
            #expect(stop.status == 200, "\(stop.text)")
            #expect(try await bob.lookup(Self.list, ["L-1"], in: .shared).status == 403)
            #expect(try await bob.accept([shortGUID]).first?.serverErrorCode == .notFound)
            let unshared = try await bob.sharedDatabaseChanges(token: token)
            #expect(unshared.zones.map(\.reason) == [.unshared])
            #expect(try await alice.lookup("List", ["L-1"]).first?.value != nil, "the owner keeps the data")

            // A new share has a new short GUID; deleting the zone stops it too.
            let second = try await alice.share("List", [("_bob", .readWrite)])
            let secondGUID = try #require(second.share?.shortGUID)
            #expect(secondGUID != shortGUID)
            _ = try await bob.accept([secondGUID])
            let before = try await bob.sharedDatabaseChanges(token: unshared.syncToken)
            #expect(before.zones.map(\.isDeleted) == [false])
            let deleted = try await alice.call(.private, .zonesModify, ZonesModifyRequest(operations: [.init(.delete, ZoneID(zoneName: "List"))]))
            #expect(deleted.status == 200)
            #expect(try await bob.zoneChanges(Self.list, in: .shared).text.contains("ACCESS_DENIED"))
            #expect(try await bob.sharedDatabaseChanges(token: before.syncToken).zones.map(\.reason) == [.unshared])
            #expect(try await bob.accept([secondGUID]).first?.serverErrorCode == .notFound)
        }
    }

    @Test(arguments: Backend.all)
    func shareRecords_refuseWhatTheServerDoesNotOffer(_ backend: Backend) async throws {
        try await withServer(backend, users: sharingUsers) { _, alice in
            try await alice.createZone("List")
            func refused(_ zone: String, _ record: Record) async throws -> ServerError? {
                let answer = try await alice.modify(ZoneID(zoneName: zone), [.init(.create, record)], atomic: false, in: .private)
                return try answer.decode(RecordsResponse.self).records.first?.error
            }
            let inDefault = try await refused(ZoneID.defaultZoneName, shareRecord([("_bob", .readOnly)]))
            #expect(inDefault?.serverErrorCode == .badRequest && inDefault?.reason?.contains("custom zone") == true)
            var byEmail = shareRecord()
            byEmail.share?.participants = [
                ShareParticipant(permission: .readOnly, userIdentity: .init(lookupInfo: .init(emailAddress: "bob@example.com"))),
            ]
            let email = try await refused("List", byEmail)
            #expect(email?.serverErrorCode == .badRequest && email?.reason?.contains("emailAddress") == true)
            let stranger = try await refused("List", shareRecord([("_mallory", .readOnly)]))
            #expect(stranger?.serverErrorCode == .badRequest && stranger?.reason?.contains("_mallory") == true)
            var otherName = shareRecord()
            otherName.recordName = "my-share"
            #expect(try await refused("List", otherName)?.serverErrorCode == .badRequest)
            var withReference = shareRecord()
            withReference.fields["root"] = .reference(Reference(recordName: "L-1", action: .deleteSelf))
            #expect(try await refused("List", withReference)?.serverErrorCode == .badRequest)
            let bob = alice.asUser("bob-token")
            #expect(try await bob.call(.private, .recordsAccept, ShareAcceptRequest(shortGUIDs: ["x"])).status == 400)
        }
    }

    /// A stale update of the share conflicts, and the conflict's `serverRecord` carries the share
    /// (participants and statuses) as every other answer does, so a client can merge with it.
    @Test(arguments: Backend.all)
    func staleShareUpdate_conflictsWithTheShareInServerRecord(_ backend: Backend) async throws {
        try await withServer(backend, users: sharingUsers) { _, alice in
            let share = try await Self.sharedList(alice)
            let bob = alice.asUser("bob-token", device: "device-B")
            _ = try await bob.accept([try #require(share.share?.shortGUID)])
            let stale = try await alice.modify(
                ZoneID(zoneName: "List"), [.init(.update, shareRecord([("_carol", .readOnly)], tag: share.recordChangeTag))], atomic: false,
                in: .private)
            let error = try #require(try stale.decode(RecordsResponse.self).records.first?.error, "\(stale.text.prefix(300))")
            #expect(error.code == .conflict)
            let participants = error.serverRecord?.share?.participants ?? []
            #expect(participants.first { $0.user == "_bob" }?.acceptanceStatus == .accepted, "\(stale.text.prefix(600))")
            #expect(error.serverRecord?.share?.shortGUID == share.share?.shortGUID)
        }
    }

    @Test(arguments: Backend.all)
    func participants_atMost100BesidesTheOwner(_ backend: Backend) async throws {
        var users = ["alice-token": "_alice"]
        for index in 0...100 { users["u\(index)-token"] = "_u\(index)" }
        try await withServer(backend, users: users) { _, alice in
            try await alice.createZone("Big")
            let all = (0...100).map { ("_u\($0)", SharePermission.readOnly) }
            let over = try await alice.modify(ZoneID(zoneName: "Big"), [.init(.create, shareRecord(all))], atomic: false, in: .private)
            #expect(try over.decode(RecordsResponse.self).records.first?.code == .limitExceeded, "\(over.text.prefix(300))")
            let share = try await alice.share("Big", Array(all.prefix(100)), publicPermission: .readOnly)
            #expect(share.share?.participants?.count == 101)
            let late = alice.asUser("u100-token")
            #expect(try await late.accept([try #require(share.share?.shortGUID)]).first?.serverErrorCode == .limitExceeded)
        }
    }

    @Test(arguments: Backend.all)
    func push_aChangeInASharedZoneWakesTheParticipantsLongPolls(_ backend: Backend) async throws {
        try await withServer(backend, users: sharingUsers) { _, alice in
            let share = try await Self.sharedList(alice)
            let bob = alice.asUser("bob-token", device: "device-B")
            let carol = alice.asUser("carol-token", device: "device-C")
            let shortGUID = try #require(share.share?.shortGUID)
            _ = try await bob.accept([shortGUID])
            _ = try await carol.accept([shortGUID])
            let bobToken = try await bob.sharedDatabaseChanges(token: nil).syncToken
            let carolToken = try await carol.sharedDatabaseChanges(token: nil).syncToken
            let aliceToken = try await alice.databaseChanges(token: nil).syncToken

            let clock = ContinuousClock()
            let started = clock.now
            async let bobPoll = bob.send(.GET, bob.path(.shared, .notifications) + "?timeout=30&since=\(bobToken)")
            async let carolPoll = carol.send(.GET, carol.path(.shared, .notifications) + "?timeout=30&since=\(carolToken)")
            async let alicePoll = alice.send(.GET, alice.path(.private, .notifications) + "?timeout=30&since=\(aliceToken)")
            let written = try await bob.modify(Self.list, [.init(.create, note("L-9"))], in: .shared)
            #expect(written.status == 200)
            for answer in [try await bobPoll, try await carolPoll, try await alicePoll] {
                let response = try answer.decode(NotificationsResponse.self)
                #expect(response.changed)
                #expect(response.zones.map(\.zoneID.zoneName) == ["List"])
            }
            #expect(clock.now - started < .seconds(20))
            let carolSees = try await carol.sharedDatabaseChanges(token: carolToken)
            #expect(carolSees.zones.map(\.zoneID) == [Self.list])
            let page = try await carol.zoneChanges(Self.list, token: carolSees.zones.first?.syncToken, in: .shared)
            #expect(page.status == 200 && page.text.contains("L-9") == false, "the zone token is already past the write")
        }
    }

    @Test(arguments: Backend.all)
    func sharedDatabaseChanges_pageWithMoreComing(_ backend: Backend) async throws {
        try await withServer(backend, users: sharingUsers) { _, alice in
            let bob = alice.asUser("bob-token", device: "device-B")
            var guids: [String] = []
            for index in 0..<5 {
                try await alice.createZone("Z\(index)")
                guids.append(try #require(try await alice.share("Z\(index)", [("_bob", .readOnly)]).share?.shortGUID))
            }
            _ = try await bob.accept(guids)
            var token: String?
            var seen: [String] = []
            var pages = 0
            while true {
                let page = try await bob.sharedDatabaseChanges(token: token, limit: 2)
                seen += page.zones.map(\.zoneID.zoneName)
                token = page.syncToken
                pages += 1
                if !page.moreComing { break }
            }
            #expect(seen == (0..<5).map { "Z\($0)" } && pages == 3)
            #expect(try await bob.sharedDatabaseChanges(token: token).zones.isEmpty, "a caught-up token stays")
            #expect(try await bob.sharedDatabaseChanges(token: token).syncToken == token)
            let bad = try await bob.call(.shared, .changesDatabase, DatabaseChangesRequest(syncToken: "garbage"))
            #expect(bad.status == 400)
        }
    }
}
