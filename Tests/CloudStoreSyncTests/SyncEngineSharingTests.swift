import CloudStoreServer
import CloudStoreSync
import CloudStoreTesting
import CloudStoreWire
import Foundation
import Testing

/// Sharing through the sync engine, as CKSyncEngine apps do it: the owner's engine syncs the
/// private database (the shared zone and its share record are ordinary pending changes there), each
/// participant runs a second engine on the `shared` database, with its own state, and accepts the
/// share by its short GUID. Against a real server in this process.
@Suite(.timeLimit(.minutes(ReliabilityRun.hangLimitMinutes))) struct SyncEngineSharingTests {
    static let users = ["alice-token": "_alice", "bob-token": "_bob", "carol-token": "_carol"]
    let list = ZoneID(zoneName: "List")
    /// The list as participants name it: with its owner.
    let sharedList = ZoneID(zoneName: "List", ownerRecordName: "_alice")
    var shareID: RecordID { RecordID(recordName: ShareMetadata.zoneShareRecordName, zoneID: list) }

    func item(_ name: String, _ value: String, in zone: ZoneID) -> Record {
        Record(recordType: "Item", recordID: RecordID(recordName: name, zoneID: zone), fields: ["value": .string(value)])
    }

    func share(_ participants: [ShareParticipant], tag: String? = nil) -> Record {
        var record = Record(
            recordType: ShareMetadata.recordType, recordID: shareID, fields: ["title": .string("Weekly shopping")])
        record.recordChangeTag = tag
        record.share = ShareMetadata(publicPermission: SharePermission.none, participants: participants)
        return record
    }

    /// Alice's device with a List zone of two items, shared with bob (read-write) and carol
    /// (read-only); answers the device and the share's short GUID.
    func aliceSharesHerList(on server: TestServer) async throws -> (EngineDevice, String) {
        let alice = await EngineDevice("alice", database: server.database(user: "_alice", device: "alice-1"))
        alice.engine.state.add(pendingDatabaseChanges: [.saveZone(list)])
        await alice.save(item("milk", "Milk", in: list))
        await alice.save(item("eggs", "Eggs", in: list))
        await alice.save(share([.invite("_bob", permission: .readWrite), .invite("_carol", permission: .readOnly)]))
        try await alice.engine.sendChanges()
        let saved = try #require(await alice.record(shareID), "the share was saved")
        let guid = try #require(saved.share?.shortGUID, "the server gave the share a short GUID")
        #expect(saved.share?.owner?.user == "_alice")
        #expect(Set(saved.share?.participants?.compactMap(\.user) ?? []).isSuperset(of: ["_bob", "_carol"]) == true)
        return (alice, guid)
    }

    /// A participant's engine on their `shared` database, after accepting the share.
    func participant(_ user: String, accepting guid: String, on server: TestServer) async throws -> EngineDevice {
        let database = server.database(user: user, device: "\(user)-1", scope: .shared)
        let accepted = try await database.acceptShares(ShareAcceptRequest(shortGUIDs: [guid]))
        #expect(accepted.results.first?.serverErrorCode == nil, "\(accepted)")
        #expect(accepted.results.first?.zoneID == sharedList)
        return await EngineDevice(user, database: database)
    }

    @Test func participantsFetchEditAndLoseAccessThroughTheirSharedDatabase() async throws {
        try await TestServer.with(users: Self.users) { server in
            let (alice, guid) = try await aliceSharesHerList(on: server)

            // Resolve previews without joining: nothing appears in bob's shared database yet.
            let bobDatabase = server.database(user: "_bob", device: "bob-1", scope: .shared)
            let preview = try await bobDatabase.resolveShares(ShareAcceptRequest(shortGUIDs: [guid]))
            #expect(preview.results.first?.share?.share?.currentUserParticipant?.permission == .readWrite)
            #expect(try await bobDatabase.listZones().zones.isEmpty)

            // Bob accepts; his shared-database engine sees the zone appear and fetches its records.
            let bob = try await participant("_bob", accepting: guid, on: server)
            try await bob.engine.fetchChanges()
            let appeared = await bob.events.compactMap { event -> [ZoneID]? in
                if case .fetchedDatabaseChanges(let changes) = event { return changes.modifications }
                return nil
            }
            #expect(appeared.flatMap { $0 } == [sharedList])
            let milk = RecordID(recordName: "milk", zoneID: sharedList)
            #expect(await bob.record(milk)?.fields["value"] == .string("Milk"))
            #expect(await bob.record(RecordID(recordName: ShareMetadata.zoneShareRecordName, zoneID: sharedList)) != nil)

            // Bob edits; alice's private engine fetches the edit, stamped with bob as the writer.
            await bob.edit(milk, ["value": .string("Oat milk")])
            try await bob.engine.sendChanges()
            #expect(bob.engine.state.pendingRecordZoneChanges.isEmpty)
            try await alice.engine.fetchChanges()
            let edited = await alice.record(RecordID(recordName: "milk", zoneID: list))
            #expect(edited?.fields["value"] == .string("Oat milk"))
            #expect(edited?.modified?.userRecordName == "_bob")

            // Carol reads only: her write is refused for that record, with the server's reason.
            let carol = try await participant("_carol", accepting: guid, on: server)
            try await carol.engine.fetchChanges()
            await carol.edit(RecordID(recordName: "eggs", zoneID: sharedList), ["value": .string("No eggs")])
            let mark = await carol.events.count
            try await carol.engine.sendChanges()
            // sendChanges returns after its events were handled: the answer is there, or the test fails.
            let sent = try #require(await carol.events[mark...].first { $0.name == "sentRecordZoneChanges" })
            guard case .sentRecordZoneChanges(let carolSent) = sent else { return }
            #expect(carolSent.failedRecordSaves.map(\.error.code) == [.accessDenied])
            #expect(carol.engine.state.pendingRecordZoneChanges.isEmpty, "a refusal for good is not retried")

            // Alice removes bob: his next fetch says the zone is unshared, once, and his copy goes.
            // (Accepting rewrote the share record: alice fetches its current tag first.)
            try await alice.engine.fetchChanges()
            let current = try #require(await alice.record(shareID))
            #expect(current.share?.participants?.filter { $0.role == .user && $0.acceptanceStatus == .accepted }.count == 2)
            await alice.save(share([.invite("_carol", permission: .readOnly)], tag: current.recordChangeTag))
            try await alice.engine.sendChanges()
            let before = await bob.events.count
            try await bob.engine.fetchChanges()
            let deletions = await bob.events[before...].compactMap { event -> [SyncEngine.Event.FetchedDatabaseChanges.Deletion]? in
                if case .fetchedDatabaseChanges(let changes) = event { return changes.deletions }
                return nil
            }.flatMap { $0 }
            #expect(deletions.map(\.zoneID) == [sharedList])
            #expect(deletions.map(\.reason) == [.unshared])
            #expect(await bob.record(milk) == nil, "the participant's copy of the zone is removed")
            let again = await bob.events.count
            try await bob.engine.fetchChanges()
            #expect(await bob.eventNames(from: again).contains("fetchedDatabaseChanges") == false, "unshared is reported once")
            let denied = try await recordsLookupStatus(bobDatabase, milk)
            #expect(denied == 403)

            // Carol leaves by deleting the share record in her shared database.
            await carol.delete(RecordID(recordName: ShareMetadata.zoneShareRecordName, zoneID: sharedList))
            try await carol.engine.sendChanges()
            try await carol.engine.fetchChanges()
            #expect(await carol.records.isEmpty, "carol's copy went when she left")
            try await alice.engine.fetchChanges()
            let remaining = await alice.record(shareID)?.share?.participants?.filter { $0.role == .user && $0.acceptanceStatus == .accepted }
            #expect(remaining?.isEmpty == true, "no one accepted is left: \(String(describing: remaining))")
        }
    }

    @Test func aParticipantsTwoEnginesKeepTheirOwnState() async throws {
        try await TestServer.with(users: Self.users) { server in
            let (alice, guid) = try await aliceSharesHerList(on: server)
            let bobShared = try await participant("_bob", accepting: guid, on: server)
            let bobPrivate = await EngineDevice("bob-private", database: server.database(user: "_bob", device: "bob-1"))
            let bobsOwn = ZoneID(zoneName: "List")
            bobPrivate.engine.state.add(pendingDatabaseChanges: [.saveZone(bobsOwn)])
            await bobPrivate.save(item("tea", "Tea", in: bobsOwn))
            try await bobPrivate.engine.sendChanges()

            try await bobShared.engine.fetchChanges()
            try await bobPrivate.engine.fetchChanges()
            // The same zone name, two zones: alice's through the shared engine, bob's own through the private one.
            #expect(await bobShared.records.keys.contains(RecordID(recordName: "milk", zoneID: sharedList)))
            #expect(await bobShared.records.keys.contains { $0.recordName == "tea" } == false)
            #expect(await bobPrivate.records.keys.contains(RecordID(recordName: "tea", zoneID: bobsOwn)))
            #expect(await bobPrivate.records.keys.contains { $0.recordName == "milk" } == false)
            let sharedState = try #require(await bobShared.savedState)
            let privateState = try #require(await bobPrivate.savedState)
            #expect(sharedState != privateState)

            // A write by alice wakes bob's long poll on his shared database.
            let database = server.database(user: "_bob", device: "bob-1", scope: .shared)
            let token = try await database.fetchDatabaseChanges(DatabaseChangesRequest(syncToken: nil)).syncToken
            async let woke = database.waitForChanges(since: token, timeout: .seconds(30))
            await alice.save(item("bread", "Bread", in: list))
            try await alice.engine.sendChanges()
            let answer = try await woke
            #expect(answer.changed)
        }
    }

    /// The HTTP status of a `records/lookup` of one record (200, or the request-level error's).
    func recordsLookupStatus(_ database: HTTPCloudDatabase, _ recordID: RecordID) async throws -> Int {
        do {
            _ = try await database.lookupRecords(RecordsLookupRequest(zoneID: recordID.zoneID, recordNames: [recordID.recordName]))
            return 200
        } catch let error as CloudError {
            return error.httpStatus ?? 0
        }
    }
}
