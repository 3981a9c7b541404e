@testable import CloudStore
import CloudStoreSync
import CloudStoreTesting
import Foundation
import Testing

/// Nothing local is wiped without the app: a zone deleted on the server or another user's
/// credentials stop syncing and ask the app (``PersistentCloudContainer/LocalDataDecision``),
/// through a real `cloudstore serve` child.
@Suite("Mirroring: the app decides what happens to local data", .serialized)
struct MirroringLocalDataDecisionTests {
    /// Alice shares a folder with bob, who edits its note offline; alice stops sharing. Bob's
    /// sync asks instead of deleting his edit; the rest of his data syncs on. Each choice then
    /// does what it says: his copy becomes his own (and reaches his second device), stays local
    /// unmirrored, or goes with the edit logged as lost.
    @Test(arguments: [PersistentCloudContainer.LocalDataChoice.uploadAgain, .keepLocalOnly, .deleteLocalData])
    func aShareThatEndsWithUnsentChangesWaitsForTheApp(_ choice: PersistentCloudContainer.LocalDataChoice) async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let alice = try await TestDevice.make("alice", server: server.baseURL, token: "alice-token")
            let bob = try await TestDevice.make("bob", server: server.baseURL, token: "bob-token")
            let folder = Folder(title: "Trip")
            var tickets = Note(title: "Tickets", folder: folder.id)
            try await alice.write { [tickets] context in
                try context.insert(folder)
                try context.insert(tickets)
            }
            try await alice.sync()
            let share = try await alice.container.share(folder, with: [.init(user: "_bob", permission: .readWrite)], title: "Trip")
            _ = try await bob.container.acceptShare(shortGUID: try #require(share.shortGUID))
            let diary = Note(title: "Diary")
            try await bob.write { [diary] in try $0.insert(diary) }
            try await bob.sync()

            tickets.body = "bob's seat: 12A"
            try await bob.write { [tickets] in try $0.update(tickets) }
            try await alice.container.stopSharing(share)
            let events = bob.container.events()
            await Self.expectDecisionNeeded(from: bob, "the sync should say that a decision waits")
            let status = try await bob.container.status()
            #expect(status.localDataDecision == nil, "nothing stops the rest of bob's sync")
            let ended = try #require(status.endedShares.first)
            #expect(status.endedShares.count == 1)
            #expect(ended.reason == .shareEnded && ended.zoneID.ownerRecordName == "_alice")
            #expect(ended.localObjects == 2 && ended.unsentChanges == 1, "\(ended)")
            #expect(try bob.note(tickets.id)?.body == "bob's seat: 12A", "nothing deleted before the app decides")
            var asked: PersistentCloudContainer.LocalDataDecision?
            for await event in events where event.kind == .localDataDecision {
                asked = event.localDataDecision
                break
            }
            #expect(asked == ended)

            try await bob.container.decide(choice, zoneID: ended.zoneID)
            try await bob.container.waitUntilSynced(timeout: .seconds(20))
            #expect(try await bob.container.status().endedShares.isEmpty)
            let bob2 = try await TestDevice.make("bob2", server: server.baseURL, token: "bob-token")
            try await bob2.sync()
            switch choice {
            case .uploadAgain:
                #expect(try bob.container.sharing(of: Note.self, id: tickets.id).isShared == false, "bob's own now")
                #expect(try bob2.note(tickets.id)?.body == "bob's seat: 12A", "his copy reached his second device")
                #expect(try bob2.folders().map(\.title) == ["Trip"])
            case .keepLocalOnly:
                #expect(try bob.note(tickets.id)?.body == "bob's seat: 12A", "kept on this device")
                #expect(try bob2.note(tickets.id) == nil, "and nowhere else")
            default:
                #expect(try bob.note(tickets.id) == nil && bob.folders().isEmpty)
                let lost = try bob.container.conflicts().filter { $0.objectID == tickets.id }
                #expect(lost.contains { $0.property == "body" && $0.losingValue == .string("bob's seat: 12A") }, "the edit that went is logged")
            }
            #expect(try bob2.note(diary.id) != nil, "bob's own data synced throughout")
            #expect(try alice.note(tickets.id)?.body == nil, "alice's copy never had bob's edit")
            await alice.close()
            await bob.close()
            await bob2.close()
        }
    }

    /// Expects `device`'s sync to throw ``ContainerError/Code/localDataDecisionNeeded``.
    static func expectDecisionNeeded(from device: TestDevice, _ comment: Comment) async {
        await #expect(comment, performing: { try await device.sync() }, throws: { ($0 as? ContainerError)?.code == .localDataDecisionNeeded })
    }

    /// Deletes the primary zone as another device of alice's would (a reset of the app's data).
    static func deleteZoneElsewhere(_ server: URL) async throws {
        let database = HTTPCloudDatabase(
            baseURL: server, container: TestDevice.containerIdentifier, token: "alice-token", deviceID: "elsewhere")
        _ = try await database.modifyZones(ZonesModifyRequest(operations: [.init(.delete, ZoneID(zoneName: "Notes"))]))
    }

    /// B holds three notes, one edited and one created since its last sync, when the zone is
    /// deleted elsewhere: B's sync stops and asks, keeps everything, and sends nothing.
    func zoneDeletedWhileBHoldsUnsentChanges(
        _ body: (_ server: URL, _ b: TestDevice, _ notes: [Note]) async throws -> Void
    ) async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let a = try await TestDevice.make("A", server: server.baseURL)
            let b = try await TestDevice.make("B", server: server.baseURL)
            var notes = [Note(title: "one"), Note(title: "two")]
            try await a.write { [notes] context in for note in notes { try context.insert(note) } }
            try await a.sync()
            try await b.sync()
            notes[0].body = "edited on B"
            notes.append(Note(title: "three"))
            try await b.write { [notes] context in
                try context.update(notes[0])
                try context.insert(notes[2])
            }
            try await Self.deleteZoneElsewhere(server.baseURL)
            let events = b.container.events()

            await Self.expectDecisionNeeded(from: b, "the sync should stop for the decision it learned")
            let status = try await b.container.status()
            let decision = try #require(status.localDataDecision)
            #expect(decision.reason == .zoneDeleted)
            #expect(decision.localObjects == 3 && decision.unsentChanges == 2, "\(decision)")
            #expect(try b.notes().count == 3, "nothing local is deleted")
            let announced = await events.first { $0.kind == .localDataDecision }
            #expect(announced?.localDataDecision == decision)
            await #expect(throws: ContainerError.self) { try await b.sync() }
            do {
                try await b.container.waitUntilSynced(timeout: .seconds(5))
                Issue.record("waitUntilSynced should say a decision is pending")
            } catch let error as ContainerError where error.code == .localDataDecisionNeeded {
                let pending = error.localDataDecision
                #expect(pending == decision)
            }
            let lookup = HTTPCloudDatabase(
                baseURL: server.baseURL, container: TestDevice.containerIdentifier, token: "alice-token", deviceID: "check")
            #expect(try await lookup.listZones().zones.allSatisfy { $0.value?.zoneID.zoneName != "Notes" }, "B did not create the zone again")
            try await body(server.baseURL, b, notes)
            await a.close()
            await b.close()
        }
    }

    @Test func aZoneDeletedElsewhere_uploadAgainRestoresItFromTheDevice() async throws {
        try await zoneDeletedWhileBHoldsUnsentChanges { server, first, notes in
            // The decision outlives a restart.
            await first.close()
            let b = try await TestDevice.make("B", server: server, directory: first.directory)
            #expect(try await b.container.status().localDataDecision?.reason == .zoneDeleted)
            await #expect(throws: ContainerError.self) { try await b.sync() }
            try await b.write { try $0.insert(Note(title: "four")) }
            try await b.container.decide(.uploadAgain)
            #expect(try await b.container.status().localDataDecision == nil)
            try await b.sync()
            let fresh = try await TestDevice.make("C", server: server)
            try await fresh.sync()
            #expect(try fresh.notes().map(\.title) == ["four", "one", "three", "two"])
            #expect(try fresh.note(notes[0].id)?.body == "edited on B", "the unsent edit reached the server")
            await fresh.close()
            await b.close()
        }
    }

    @Test func aZoneDeletedElsewhere_deleteLocalDataEmptiesTheDevice() async throws {
        try await zoneDeletedWhileBHoldsUnsentChanges { server, b, _ in
            try await b.container.decide(.deleteLocalData)
            #expect(try b.notes().isEmpty)
            try await b.sync()
            #expect(try await b.container.status().pendingUploads == 0)
            let fresh = try await TestDevice.make("C", server: server)
            try await fresh.sync()
            #expect(try fresh.notes().isEmpty)
            await #expect(throws: ContainerError.self, "nothing is pending any more") { try await b.container.decide(.uploadAgain) }
            await fresh.close()
        }
    }

    @Test func aZoneDeletedElsewhere_keepLocalOnlyKeepsTheNotesUnmirrored() async throws {
        try await zoneDeletedWhileBHoldsUnsentChanges { server, b, notes in
            try await b.container.decide(.keepLocalOnly)
            try await b.sync()
            #expect(try b.notes().count == 3)
            #expect(try await b.container.status().pendingUploads == 0)
            #expect(try b.container.syncState(of: Note.self, id: notes[1].id) == nil, "no longer mirrored")
            // An object the app changes later goes up whole.
            var two = notes[1]
            two.body = "changed later"
            try await b.write { [two] in try $0.update(two) }
            try await b.sync()
            let fresh = try await TestDevice.make("C", server: server)
            try await fresh.sync()
            #expect(try fresh.notes().map(\.title) == ["two"])
            await fresh.close()
        }
    }

    /// A device of alice's that synced "Alice's sent" and holds "Alice's unsent", closed, and bob's
    /// phone with "Bob's": the device is about to be opened with bob's token.
    func aliceDeviceBeforeBobSignsIn(
        _ body: (_ server: URL, _ directory: TemporaryDirectory, _ bobsPhone: TestDevice) async throws -> Void
    ) async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let bobsPhone = try await TestDevice.make("bob", server: server.baseURL, token: "bob-token")
            try await bobsPhone.write { try $0.insert(Note(title: "Bob's")) }
            try await bobsPhone.sync()
            let directory = try TemporaryDirectory()
            let alice = try await TestDevice.make("device", server: server.baseURL, token: "alice-token", directory: directory)
            try await alice.write { try $0.insert(Note(title: "Alice's sent")) }
            try await alice.sync()
            try await alice.write { try $0.insert(Note(title: "Alice's unsent")) }
            await alice.close()
            try await body(server.baseURL, directory, bobsPhone)
            await bobsPhone.close()
        }
    }

    /// Alice's device has a change it could not send when bob signs in on it; nothing of bob's is
    /// fetched, nothing of alice's is deleted, and when alice signs in again her change goes up.
    @Test func anotherUserSignsIn_thenTheFirstAgain_everyUnsentChangeReachesTheServer() async throws {
        try await aliceDeviceBeforeBobSignsIn { server, directory, bobsPhone in
            let bob = try await TestDevice.make("device", server: server, token: "bob-token", directory: directory)
            do {
                try await bob.sync()
                Issue.record("the sync should stop for a decision")
            } catch let error as ContainerError where error.code == .localDataDecisionNeeded {
                let decision = try #require(error.localDataDecision)
                #expect(decision.reason == .accountChanged(previousUser: "_alice", currentUser: "_bob"))
                #expect(decision.localObjects == 2 && decision.unsentChanges == 1, "\(decision)")
            }
            #expect(try bob.notes().map(\.title) == ["Alice's sent", "Alice's unsent"], "nothing of bob's came in, nothing of alice's went")
            #expect(try await bob.container.status().localDataDecision != nil)
            await bob.close()

            // Bob again, after a restart: still waiting.
            let bobAgain = try await TestDevice.make("device", server: server, token: "bob-token", directory: directory)
            await #expect(throws: ContainerError.self) { try await bobAgain.sync() }
            #expect(try bobAgain.notes().count == 2)
            await bobAgain.close()

            let aliceAgain = try await TestDevice.make("device", server: server, token: "alice-token", directory: directory)
            try await aliceAgain.sync()
            #expect(try await aliceAgain.container.status().localDataDecision == nil)
            #expect(try await aliceAgain.container.status().pendingUploads == 0)
            let alicesLaptop = try await TestDevice.make("laptop", server: server, token: "alice-token")
            try await alicesLaptop.sync()
            #expect(try alicesLaptop.notes().map(\.title) == ["Alice's sent", "Alice's unsent"])
            for device in [aliceAgain, alicesLaptop] { await device.close() }
        }
    }

    @Test func anotherUserSignsIn_deleteLocalDataTakesTheNewUsersData() async throws {
        try await aliceDeviceBeforeBobSignsIn { server, directory, _ in
            let bob = try await TestDevice.make("device", server: server, token: "bob-token", directory: directory)
            await #expect(throws: ContainerError.self) { try await bob.sync() }
            try await bob.container.decide(.deleteLocalData)
            try await bob.sync()
            #expect(try bob.notes().map(\.title) == ["Bob's"])
            #expect(try await bob.container.status().user == "_bob")
            await bob.close()
            // Reopened as bob: no decision any more, bob's state kept.
            let reopened = try await TestDevice.make("device", server: server, token: "bob-token", directory: directory)
            try await reopened.sync()
            #expect(try reopened.notes().map(\.title) == ["Bob's"])
            await reopened.close()
        }
    }

    @Test func purgingEverywhere_deletesTheZoneAndAsksTheOtherDevices() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let a = try await TestDevice.make("A", server: server.baseURL)
            let b = try await TestDevice.make("B", server: server.baseURL)
            try await a.write { try $0.insert(Note(title: "old")) }
            try await a.sync()
            try await b.sync()

            try await a.container.purgeMirroredData(.everywhere)
            #expect(try a.notes().isEmpty)
            try await a.sync()
            #expect(try await a.container.status().localDataDecision == nil, "its own purge asks nothing")
            await #expect(throws: ContainerError.self) { try await b.sync() }
            #expect(try await b.container.status().localDataDecision?.reason == .zoneDeleted)
            #expect(try b.notes().map(\.title) == ["old"], "B keeps its copy until it decides")

            try await a.write { try $0.insert(Note(title: "new")) }
            try await a.sync()
            try await b.container.decide(.deleteLocalData)
            try await b.sync()
            #expect(try b.notes().map(\.title) == ["new"])
            await a.close()
            await b.close()
        }
    }

    @Test func purgingThisDevice_forgetsItsCopyUntilTheContainerOpensAgain() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let directory = try TemporaryDirectory()
            let a = try await TestDevice.make("A", server: server.baseURL, directory: directory)
            try await a.write { try $0.insert(Note(title: "sent")) }
            try await a.sync()
            try await a.write { try $0.insert(Note(title: "unsent")) }

            try await a.container.purgeMirroredData(.thisDevice)
            #expect(try a.notes().isEmpty)
            #expect(try await a.container.status().pendingUploads == 0)
            await #expect(throws: ContainerError.self) { try await a.sync() }
            await a.close()

            let reopened = try await TestDevice.make("A", server: server.baseURL, directory: directory)
            try await reopened.sync()
            #expect(try reopened.notes().map(\.title) == ["sent"], "the server's copy comes back; the unsent note was purged")
            await reopened.close()
        }
    }
}
