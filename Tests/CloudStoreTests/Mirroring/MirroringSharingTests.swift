@testable import CloudStore
import CloudStoreSync
import CloudStoreTesting
import Foundation
import Testing

/// Sharing through containers, as NSPersistentCloudKitContainer apps share: alice shares a folder
/// of notes with bob (read-write) and carol (read-only) through a real `cloudstore serve` child
/// process; each user is one device syncing when told.
@Suite("Mirroring: sharing an object graph", .timeLimit(.minutes(ReliabilityRun.hangLimitMinutes)))
struct MirroringSharingTests {
    static let users = ["alice-token": "_alice", "bob-token": "_bob", "carol-token": "_carol"]

    /// Alice's device with a folder of two notes, shared with bob (read-write) and carol (read-only).
    struct Shared {
        var alice: TestDevice
        var folder: Folder
        var milk: Note
        var eggs: Note
        var share: PersistentCloudContainer.Share
        /// History transactions before and after sharing.
        var history: (before: Int, after: Int)
    }

    static let postgresURL = ServerProcess.testPostgresURL

    func withTwoPostgresServers(_ body: (URL, URL) async throws -> Void) async throws {
        try await ServerProcess.withTwoOnPostgres(users: Self.users, body)
    }

    func aliceSharesAFolder(_ server: URL) async throws -> Shared {
        let alice = try await TestDevice.make("alice", server: server, token: "alice-token")
        let folder = Folder(title: "Shopping")
        let milk = Note(title: "Milk", folder: folder.id)
        let eggs = Note(title: "Eggs", folder: folder.id)
        let kept = Note(title: "Diary")
        try await alice.write { context in
            try context.insert(folder)
            try context.insert(milk)
            try context.insert(eggs)
            try context.insert(kept)
        }
        try await alice.sync()
        let before = try alice.store.history(after: nil).count
        let share = try await alice.container.share(
            folder, with: [.init(user: "_bob", permission: .readWrite), .init(user: "_carol", permission: .readOnly)],
            title: "Shopping")
        let after = try alice.store.history(after: nil).count
        return Shared(alice: alice, folder: folder, milk: milk, eggs: eggs, share: share, history: (before, after))
    }

    @Test func aliceSharesAFolderBobEditsCarolReadsBobIsRemovedCarolLeaves() async throws {
        try await ServerProcess.with(users: Self.users) { server in
            try await aliceSharesAFolderBobEditsCarolReadsBobIsRemovedCarolLeaves(alice: server.baseURL, others: server.baseURL)
        }
    }

    /// The same with PostgreSQL and two server instances: alice on one, bob and carol on the other.
    @Test(.enabled(if: Self.postgresURL != nil, "set CLOUDSTORE_TEST_POSTGRES_URL (bash .ci/run does) to run it"))
    func onPostgreSQLWithTwoServerInstances() async throws {
        try await withTwoPostgresServers { first, second in
            try await aliceSharesAFolderBobEditsCarolReadsBobIsRemovedCarolLeaves(alice: first, others: second)
        }
    }

    func aliceSharesAFolderBobEditsCarolReadsBobIsRemovedCarolLeaves(alice aliceServer: URL, others: URL) async throws {
        do {
            let shared = try await aliceSharesAFolder(aliceServer)
            let alice = shared.alice
            let guid = try #require(shared.share.shortGUID, "the server gave the share a short GUID")
            #expect(shared.share.isOwnedByCurrentUser)
            #expect(Set(shared.share.participants.map(\.user)) == ["_alice", "_bob", "_carol"])
            #expect(shared.share.participants.first { $0.user == "_bob" }?.status == .invited)
            // The graph moved into the share's zone; the diary stayed in the primary zone.
            let folderSharing = try alice.container.sharing(of: Folder.self, id: shared.folder.id)
            #expect(folderSharing.isShared && folderSharing.owner == nil && folderSharing.permission == .readWrite)
            #expect(try alice.container.sharing(of: Note.self, id: shared.milk.id).zoneID == folderSharing.zoneID)
            let diary = try #require(try alice.notes().first { $0.title == "Diary" })
            #expect(try alice.container.sharing(of: Note.self, id: diary.id).isShared == false)
            // Moving changed no object: history has no transaction for it.
            #expect(shared.history.after == shared.history.before)

            // Bob accepts by the short GUID; the folder and its notes arrive, the diary does not.
            let bob = try await TestDevice.make("bob", server: others, token: "bob-token")
            let bobShare = try await bob.container.acceptShare(shortGUID: guid)
            #expect(bobShare.owner == "_alice")
            #expect(bobShare.currentUserPermission == .readWrite)
            #expect(Set(try bob.notes().map(\.title)) == ["Milk", "Eggs"])
            #expect(try bob.folders().map(\.title) == ["Shopping"])
            let bobSharing = try bob.container.sharing(of: Note.self, id: shared.milk.id)
            #expect(bobSharing.owner == "_alice" && bobSharing.permission == .readWrite)

            // Carol accepts read-only; her write fails locally before anything is saved.
            let carol = try await TestDevice.make("carol", server: others, token: "carol-token")
            _ = try await carol.container.acceptShare(shortGUID: guid)
            var carolsMilk = try #require(try carol.note(shared.milk.id))
            carolsMilk.title = "Whisky"
            let refused = await #expect(throws: ContainerError.self) {
                try await carol.write { [carolsMilk] in try $0.update(carolsMilk) }
            }
            #expect("\(refused.map { "\($0)" } ?? "")".contains("read-only"))
            #expect(try carol.note(shared.milk.id)?.title == "Milk", "nothing was saved")
            // The server refuses it too, for a client that does not check.
            let carolsDatabase = HTTPCloudDatabase(
                baseURL: others, container: TestDevice.containerIdentifier, scope: .shared, token: "carol-token",
                deviceID: "carol-raw")
            var raw = Record(
                recordType: "Note",
                recordID: RecordID(recordName: shared.milk.id.uuidString, zoneID: bobShare.zoneID), fields: ["title": .string("Whisky")])
            raw.recordChangeTag = nil
            let answer = try await carolsDatabase.modifyRecords(
                RecordsModifyRequest(zoneID: bobShare.zoneID, atomic: false, operations: [.init(.forceUpdate, raw)]))
            guard case .error(let denied)? = answer.records.first else {
                Issue.record("the server saved a read-only participant's write: \(answer)")
                return
            }
            #expect(denied.serverErrorCode == .accessDenied)
            // Adding a note to the read-only folder fails too.
            await #expect(throws: ContainerError.self) {
                try await carol.write { try $0.insert(Note(title: "Chocolate", folder: shared.folder.id)) }
            }

            // Bob edits a note and adds one to the folder; alice gets both, stamped as shared.
            var bobsEggs = try #require(try bob.note(shared.eggs.id))
            bobsEggs.title = "Free-range eggs"
            let bread = Note(title: "Bread", folder: shared.folder.id)
            try await bob.write { [bobsEggs] context in
                try context.update(bobsEggs)
                try context.insert(bread)
            }
            #expect(try bob.container.sharing(of: Note.self, id: bread.id).owner == "_alice", "a new note in the folder is shared")
            try await bob.container.waitUntilSynced(timeout: .seconds(30))
            try await alice.container.waitUntilSynced(timeout: .seconds(30))
            #expect(try alice.note(shared.eggs.id)?.title == "Free-range eggs")
            #expect(try alice.note(bread.id)?.folder == shared.folder.id)
            #expect(try alice.container.sharing(of: Note.self, id: bread.id).zoneID == folderSharing.zoneID)

            // Alice and bob edit the same note's title: merged and logged as in a private zone.
            var alicesMilk = try #require(try alice.note(shared.milk.id))
            alicesMilk.title = "Oat milk"
            try await alice.write { [alicesMilk] in try $0.update(alicesMilk) }
            var bobsMilk = try #require(try bob.note(shared.milk.id))
            bobsMilk.title = "Soy milk"
            bobsMilk.body = "unsweetened"
            try await bob.write { [bobsMilk] in try $0.update(bobsMilk) }
            try await alice.container.waitUntilSynced(timeout: .seconds(30))
            try await bob.container.waitUntilSynced(timeout: .seconds(30))
            try await alice.container.waitUntilSynced(timeout: .seconds(30))
            #expect(try alice.note(shared.milk.id)?.title == "Oat milk", "serverWins: alice's title reached the server first")
            #expect(try bob.note(shared.milk.id)?.title == "Oat milk")
            #expect(try alice.note(shared.milk.id)?.body == "unsweetened", "bob's other field merged")
            let lost = try bob.container.conflicts().filter { $0.objectID == shared.milk.id }
            #expect(lost.map(\.property) == ["title"] && lost.first?.losingValue == .string("Soy milk"))

            // Alice sees who joined.
            let joined = try alice.container.shareActivity().filter { $0.change == .joined }.compactMap(\.user)
            #expect(Set(joined) == ["_bob", "_carol"])

            // Alice removes bob while he holds an unsent edit: his copy waits for his app, which
            // deletes it; it goes, with an event and his unsent edit in the conflict log.
            var lastWords = try #require(try bob.note(bread.id))
            lastWords.title = "Rye bread"
            try await bob.write { [lastWords] in try $0.update(lastWords) }
            let bobEvents = bob.container.events()
            let current = try #require(try alice.container.shares().first)
            let afterRemoval = try await alice.container.removeParticipant("_bob", from: current)
            #expect(afterRemoval.participants.contains { $0.user == "_bob" && $0.status != .removed } == false)
            #expect(try alice.container.shareActivity().contains { $0.change == .removed && $0.user == "_bob" })
            try await bob.container.fetchChanges()
            #expect(try bob.note(bread.id)?.title == "Rye bread", "nothing unsent goes before bob's app decides")
            #expect(try await bob.container.status().endedShares.map(\.unsentChanges) == [1])
            try await bob.container.decide(.deleteLocalData)
            #expect(try bob.notes().isEmpty && bob.folders().isEmpty, "bob's copy of the share went")
            #expect(try bob.container.shares().isEmpty)
            let unsent = try bob.container.conflicts().filter { $0.policy == ConflictResolution.accessEndedPolicy }
            #expect(unsent.map(\.property) == ["title"] && unsent.first?.losingValue == .string("Rye bread"))
            var sawEnd = false
            for await event in bobEvents where event.kind == .sharing {
                sawEnd = event.activity.contains { $0.change == .accessEnded }
                break
            }
            #expect(sawEnd, "bob was told his access ended")

            // Carol leaves: her copy goes; alice sees it.
            let carolShare = try #require(try carol.container.shares().first)
            try await carol.container.leaveShare(carolShare)
            #expect(try carol.notes().isEmpty)
            try await alice.container.fetchChanges()
            #expect(try alice.container.shareActivity().contains { $0.change == .left && $0.user == "_carol" })
            // Alice keeps everything.
            #expect(Set(try alice.notes().map(\.title)) == ["Oat milk", "Free-range eggs", "Bread", "Diary"])

            await alice.close()
            await bob.close()
            await carol.close()
        }
    }

    /// A second device of the owner sees the shared folder move into its zone and keeps it whole.
    @Test func theOwnersOtherDeviceFollowsTheMove() async throws {
        try await ServerProcess.with(users: Self.users) { server in
            let shared = try await aliceSharesAFolder(server.baseURL)
            let other = try await syncedDeviceOfAlice("alice-2", server.baseURL)
            #expect(Set(try other.notes().map(\.title)) == ["Milk", "Eggs", "Diary"])
            #expect(try other.container.sharing(of: Folder.self, id: shared.folder.id).zoneID == shared.share.zoneID)
            let share = try #require(try other.container.shares().first)
            #expect(share.shortGUID == shared.share.shortGUID)
            // The first device's status is settled: nothing pending, the old copies deleted.
            #expect(try await shared.alice.container.status().pendingUploads == 0)
            #expect(try shared.alice.container.conflicts().isEmpty && other.container.conflicts().isEmpty)
            // A store of the same user with another zone name does not take the share's zone for its own.
            let otherApp = try await TestDevice.make("other-app", server: server.baseURL, token: "alice-token") {
                $0.zoneName = "Journal"
            }
            try await otherApp.sync()
            #expect(try otherApp.notes().isEmpty && otherApp.container.shares().isEmpty)
            await otherApp.close()
            await shared.alice.close()
            await other.close()
        }
    }

    /// Found by the shared-zone convergence soak: a note moved into the shared folder and back out
    /// before it synced, then deleted, stayed on the server: moving back forgot that its first copy
    /// was still there, so the delete never left the device.
    @Test func aNoteMovedIntoTheShareAndBackThenDeleted_isDeletedEverywhere() async throws {
        try await ServerProcess.with(users: Self.users) { server in
            let shared = try await aliceSharesAFolder(server.baseURL)
            let alice = shared.alice
            let diary = try #require(try alice.notes().first { $0.title == "Diary" })
            try await alice.write { context in
                try context.move(note: diary.id, to: shared.folder.id)
            }
            #expect(try alice.container.sharing(of: Note.self, id: diary.id).isShared)
            try await alice.write { context in
                try context.move(note: diary.id, to: nil)
                try context.move(note: diary.id, to: shared.folder.id)
            }
            let privateFolder = Folder(title: "Private")
            try await alice.write { context in
                try context.insert(privateFolder)
                try context.move(note: diary.id, to: privateFolder.id)
            }
            #expect(try alice.container.sharing(of: Note.self, id: diary.id).isShared == false, "back in the primary zone")
            try await alice.write { try $0.delete(Note.self, id: diary.id) }
            try await alice.container.waitUntilSynced(timeout: .seconds(30))
            let fresh = try await syncedDeviceOfAlice("alice-fresh", server.baseURL)
            #expect(try fresh.note(diary.id) == nil, "the delete reached the copy the note left in the primary zone")
            #expect(Set(try fresh.notes().map(\.title)) == ["Milk", "Eggs"])
            await fresh.close()
            await alice.close()
        }
    }

    /// Found by the shared-zone convergence soak: a note whose create landed unheard was moved
    /// into the shared folder; the copy it left in the primary zone had no version here, so its
    /// delete went unconditionally and took another device's edit of it along, unlogged. Such a
    /// delete now waits for a fetch, like the create would, and goes for the version it brought;
    /// the edit is merged against the values the create carried.
    @Test func aNoteCreatedUnheardEditedElsewhereThenShared_keepsTheEdit() async throws {
        try await ServerProcess.with(users: Self.users) { server in
            let serverURL = server.baseURL
            let proxy = try await FaultProxy.start { serverURL }
            let shared = try await aliceSharesAFolder(proxy.baseURL)
            let alice = shared.alice
            let other = try await TestDevice.make("alice-2", server: serverURL, token: "alice-token")
            let draft = Note(title: "Draft")
            try await alice.write { try $0.insert(draft) }
            proxy.inject(.dropResponse, into: .recordsModify)
            await #expect(throws: (any Error).self) { try await alice.container.sendChanges() }
            try await other.sync()
            try await other.edit(draft) { $0.title = "Draft, edited on the other device" }
            try await other.sync()
            try await alice.write { context in
                try context.move(note: draft.id, to: shared.folder.id)
            }
            try await alice.container.waitUntilSynced(timeout: .seconds(30))
            try await other.sync()
            #expect(try alice.note(draft.id)?.title == "Draft, edited on the other device")
            #expect(try other.note(draft.id)?.title == "Draft, edited on the other device")
            #expect(try other.container.sharing(of: Note.self, id: draft.id).isShared, "the move reached the other device")
            // The create's values are the ancestor of that merge: the title changed there, the
            // folder here, nothing conflicts.
            #expect(try alice.container.conflicts().isEmpty)
            #expect(try alice.note(draft.id)?.folder == shared.folder.id)
            await other.close()
            await alice.close()
            await proxy.shutdown()
        }
    }

    /// One device moves a note into the shared folder while another moves it to another private
    /// folder. The move's delete of the copy left in the primary zone meets the other device's edit;
    /// the merge (serverWins) takes the other folder, and the note follows its folder back out of
    /// the share instead of staying in the share's zone with a private folder.
    @Test func aMergeThatTakesAnotherFolder_movesTheNoteToThatFoldersZone() async throws {
        try await ServerProcess.with(users: Self.users) { server in
            let shared = try await aliceSharesAFolder(server.baseURL)
            let alice = shared.alice
            let (home, work) = (Folder(title: "Home"), Folder(title: "Work"))
            let receipt = Note(title: "Receipt", folder: home.id)
            try await alice.write { context in
                try context.insert(home)
                try context.insert(work)
                try context.insert(receipt)
            }
            try await alice.sync()
            let other = try await syncedDeviceOfAlice("alice-2", server.baseURL)
            try await alice.write { context in
                try context.move(note: receipt.id, to: shared.folder.id)
            }
            try await other.write { context in
                try context.move(note: receipt.id, to: work.id)
            }
            try await other.sync()
            try await alice.container.waitUntilSynced(timeout: .seconds(30))
            try await other.sync()
            #expect(try alice.note(receipt.id)?.folder == work.id)
            #expect(try other.note(receipt.id)?.folder == work.id)
            #expect(try alice.container.sharing(of: Note.self, id: receipt.id).isShared == false)
            #expect(try alice.container.conflicts().map(\.property) == ["folder"], "the share's folder lost, logged")
            let fresh = try await syncedDeviceOfAlice("alice-fresh", server.baseURL)
            #expect(try fresh.note(receipt.id)?.folder == work.id)
            #expect(try fresh.container.sharing(of: Note.self, id: receipt.id).isShared == false, "no copy left in the share")
            await fresh.close()
            await other.close()
            await alice.close()
        }
    }

    /// Found by the shared-zone convergence soak (seed 13018592606594472794): one device moved a
    /// note into the shared folder and back out before syncing while another moved it into the
    /// shared folder and synced. The first device's whole upload to the primary zone found the copy
    /// gone and created it there again: the note lived in two zones, and the device that later
    /// took the newer copy dropped the other move unlogged. Now such an upload waits for a fetch,
    /// which brings the note's copy in the share: the moves merge there, the losing folder logged.
    @Test func aMoveBackMeetingAnotherDevicesMove_leavesTheNoteInOneZone() async throws {
        try await ServerProcess.with(users: Self.users) { server in
            let shared = try await aliceSharesAFolder(server.baseURL)
            let alice = shared.alice
            let home = Folder(title: "Home")
            let receipt = Note(title: "Receipt")
            try await alice.write { context in
                try context.insert(home)
                try context.insert(receipt)
            }
            try await alice.sync()
            let other = try await syncedDeviceOfAlice("alice-2", server.baseURL)
            let primary = try other.container.sharing(of: Note.self, id: receipt.id).zoneID
            try await other.write { try $0.move(note: receipt.id, to: shared.folder.id) }
            try await other.write { try $0.move(note: receipt.id, to: home.id) }
            try await alice.write { try $0.move(note: receipt.id, to: shared.folder.id) }
            try await alice.sync()
            try await other.sync()
            try await alice.sync()
            try await other.sync()

            let zones = try await zonesHolding(receipt.id, among: [primary, shared.share.zoneID], server: server.baseURL)
            #expect(zones == [shared.share.zoneID], "one copy, in the share")
            for device in [alice, other] {
                #expect(try device.note(receipt.id)?.folder == shared.folder.id, "\(device.name)")
                #expect(try device.container.sharing(of: Note.self, id: receipt.id).isShared, "\(device.name)")
            }
            #expect(
                try other.container.conflicts().contains { $0.objectID == receipt.id && $0.property == "folder" && $0.losingValue == .uuid(home.id) },
                "the move home lost, logged")
            let fresh = try await syncedDeviceOfAlice("alice-fresh", server.baseURL)
            #expect(try fresh.note(receipt.id)?.folder == shared.folder.id)
            await fresh.close()
            await other.close()
            await alice.close()
        }
    }

    /// The same with an edit under `localWins`: a device edited a note another device of the owner
    /// had moved into the share. The edit's upload found its version gone, and the edit, winning
    /// against what looked like a delete, created the note again in the primary zone, where
    /// the other device then took it back from the share. Now the edit waits for a fetch and is
    /// merged into the note in the share.
    @Test func anEditMeetingAnotherDevicesMove_underLocalWins_leavesTheNoteInOneZone() async throws {
        try await ServerProcess.with(users: Self.users) { server in
            let shared = try await aliceSharesAFolder(server.baseURL)
            let alice = shared.alice
            let receipt = Note(title: "Receipt")
            try await alice.write { try $0.insert(receipt) }
            try await alice.sync()
            let other = try await syncedDeviceOfAlice("alice-2", server.baseURL, policy: .localWins)
            let primary = try other.container.sharing(of: Note.self, id: receipt.id).zoneID
            try await alice.write { try $0.move(note: receipt.id, to: shared.folder.id) }
            try await alice.sync()
            try await other.edit(receipt) { $0.title = "Receipt, edited" }
            try await other.sync()
            try await alice.sync()

            let zones = try await zonesHolding(receipt.id, among: [primary, shared.share.zoneID], server: server.baseURL)
            #expect(zones == [shared.share.zoneID], "one copy, in the share")
            for device in [alice, other] {
                let note = try device.note(receipt.id)
                #expect(note?.title == "Receipt, edited" && note?.folder == shared.folder.id, "\(device.name): both changes kept")
                #expect(try device.container.sharing(of: Note.self, id: receipt.id).isShared, "\(device.name)")
            }
            await other.close()
            await alice.close()
        }
    }

    /// Alice shares a second folder, Trip, with carol; a private note of hers, Receipt, is synced
    /// to a second device of hers.
    func aliceHasTwoSharedFolders(_ server: URL) async throws -> (shared: Shared, trip: Folder, tripShare: PersistentCloudContainer.Share, receipt: Note, other: TestDevice) {
        let shared = try await aliceSharesAFolder(server)
        let trip = Folder(title: "Trip")
        let receipt = Note(title: "Receipt")
        try await shared.alice.write { context in
            try context.insert(trip)
            try context.insert(receipt)
        }
        try await shared.alice.sync()
        let tripShare = try await shared.alice.container.share(trip, with: [.init(user: "_carol", permission: .readOnly)], title: "Trip")
        let other = try await syncedDeviceOfAlice("alice-2", server)
        return (shared, trip, tripShare, receipt, other)
    }

    /// Two devices of alice's move one note into two different shared folders at once. Each move
    /// deletes the copy it left in the primary zone, but neither deletes the other's copy: the
    /// note lived in both shares, each participant saw it, and a fresh device of alice's kept
    /// whichever copy it fetched last. Now the copy the server created later is the note on every
    /// device, and the device whose own copy lost deletes it, as if it had moved the note.
    @Test func twoMovesIntoTwoSharedFoldersAtOnce_leaveOneCopy() async throws {
        try await ServerProcess.with(users: Self.users) { server in
            let (shared, trip, tripShare, receipt, other) = try await aliceHasTwoSharedFolders(server.baseURL)
            let alice = shared.alice
            let primary = try other.container.sharing(of: Note.self, id: receipt.id).zoneID
            let bob = try await TestDevice.make("bob", server: server.baseURL, token: "bob-token")
            _ = try await bob.container.acceptShare(shortGUID: try #require(shared.share.shortGUID))
            try await alice.write { try $0.move(note: receipt.id, to: shared.folder.id) }
            try await other.write { try $0.move(note: receipt.id, to: trip.id) }
            try await alice.sync()
            try await other.sync()
            try await alice.sync()  // fetches the copy in Trip; its delete of its own copy waits for the next send
            try await alice.sync()
            try await other.sync()

            let zones = try await zonesHolding(receipt.id, among: [primary, shared.share.zoneID, tripShare.zoneID], server: server.baseURL)
            #expect(zones == [tripShare.zoneID], "one copy, in the share of the move the server took last")
            let fresh = try await syncedDeviceOfAlice("alice-fresh", server.baseURL)
            for device in [alice, other, fresh] {
                #expect(try device.note(receipt.id)?.folder == trip.id, "\(device.name)")
                #expect(try device.container.sharing(of: Note.self, id: receipt.id).zoneID == tripShare.zoneID, "\(device.name)")
            }
            try await bob.sync()
            #expect(try bob.note(receipt.id) == nil, "bob, who is not in Trip, does not see the note")
            await bob.close()
            await fresh.close()
            await other.close()
            await alice.close()
        }
    }

    /// The same, with bob editing the losing copy in Shopping after alice's device took the other
    /// as the note and before its delete went up: the delete, for the version alice's device
    /// wrote, fails, and bob's edit is merged into the note in Trip before the copy is deleted.
    @Test func twoMovesIntoTwoSharedFolders_anEditToTheLosingCopy_isMergedIntoTheNote() async throws {
        try await ServerProcess.with(users: Self.users) { server in
            let (shared, trip, tripShare, receipt, other) = try await aliceHasTwoSharedFolders(server.baseURL)
            let alice = shared.alice
            let bob = try await TestDevice.make("bob", server: server.baseURL, token: "bob-token")
            _ = try await bob.container.acceptShare(shortGUID: try #require(shared.share.shortGUID))
            try await alice.write { try $0.move(note: receipt.id, to: shared.folder.id) }
            try await alice.sync()
            try await bob.sync()
            try await other.write { try $0.move(note: receipt.id, to: trip.id) }
            try await other.sync()
            try await alice.container.fetchChanges()
            let inShopping = try #require(try bob.note(receipt.id), "bob saw the note in Shopping")
            try await bob.edit(inShopping) { $0.title = "Receipt, 12 €" }
            try await bob.sync()
            try await alice.container.sendChanges()
            try await alice.sync()
            try await other.sync()

            let zones = try await zonesHolding(
                receipt.id, among: [shared.share.zoneID, tripShare.zoneID], server: server.baseURL)
            #expect(zones == [tripShare.zoneID], "one copy, in Trip")
            for device in [alice, other] {
                let note = try device.note(receipt.id)
                #expect(note?.title == "Receipt, 12 €" && note?.folder == trip.id, "\(device.name): bob's edit kept, in Trip")
            }
            try await bob.sync()
            #expect(try bob.note(receipt.id) == nil)
            await bob.close()
            await other.close()
            await alice.close()
        }
    }

    /// Another device of alice's, synced once.
    func syncedDeviceOfAlice(_ name: String, _ server: URL, policy: ConflictPolicy = .serverWins) async throws -> TestDevice {
        let device = try await TestDevice.make(name, server: server, token: "alice-token", policy: policy)
        try await device.sync()
        return device
    }

    /// The zones among `zones` whose copy of object `id` alice's server holds, asked directly.
    func zonesHolding(_ id: UUID, among zones: [ZoneID], server: URL) async throws -> [ZoneID] {
        let database = HTTPCloudDatabase(
            baseURL: server, container: TestDevice.containerIdentifier, scope: .private, token: "alice-token", deviceID: "alice-raw")
        var holding: [ZoneID] = []
        for zoneID in zones {
            let answer = try await database.lookupRecords(RecordsLookupRequest(zoneID: zoneID, recordNames: [id.uuidString]))
            if case .value? = answer.records.first { holding.append(zoneID) }
        }
        return holding
    }

    /// The owner deletes the shared folder: its notes go with it, and so does the share (as
    /// stopSharing), so the participant loses access instead of keeping an empty share.
    @Test func deletingTheSharedObject_stopsTheShare() async throws {
        try await ServerProcess.with(users: Self.users) { server in
            let shared = try await aliceSharesAFolder(server.baseURL)
            let alice = shared.alice
            let guid = try #require(shared.share.shortGUID)
            let bob = try await TestDevice.make("bob", server: server.baseURL, token: "bob-token")
            _ = try await bob.container.acceptShare(shortGUID: guid)
            #expect(try bob.notes().count == 2)
            try await alice.write { try $0.delete(Folder.self, id: shared.folder.id) }
            try await alice.container.waitUntilSynced(timeout: .seconds(30))
            #expect(try alice.container.shareActivity().contains { $0.change == .stopped })
            #expect(try alice.container.shares().allSatisfy { $0.participants.allSatisfy(\.isOwner) }, "no one is left in it")
            try await bob.sync()
            #expect(try bob.notes().isEmpty && bob.folders().isEmpty)
            #expect(try bob.container.shares().isEmpty, "bob keeps no empty share")
            #expect(try bob.container.shareActivity().contains { $0.change == .accessEnded })
            #expect(try bob.container.conflicts().isEmpty, "bob had nothing unsent")
            let fresh = try await syncedDeviceOfAlice("alice-fresh", server.baseURL)
            #expect(try fresh.folders().map(\.id) == [], "the folder is gone everywhere")
            #expect(Set(try fresh.notes().map(\.title)) == ["Diary"])
            await fresh.close()
            await bob.close()
            await alice.close()
        }
    }

    @Test func badInvitationsAreRefusedBeforeAnythingMoves() async throws {
        let alice = try await TestDevice.make("alice", server: nil)
        let folder = Folder(title: "Local")
        try await alice.write { try $0.insert(folder) }
        await #expect(throws: ContainerError.self) {
            _ = try await alice.container.share(folder, with: [.init(user: "_bob", permission: .readWrite)])
        }
        let twice = PersistentCloudContainer.Invitation(user: "_bob", permission: .readOnly)
        #expect(throws: ContainerError.self) { try PersistentCloudContainer.checkedInvitations([twice, twice]) }
        #expect(throws: ContainerError.self) {
            try PersistentCloudContainer.checkedInvitations([.init(user: "_bob", permission: .none)])
        }
        await alice.close()
    }
}

extension MirroringSharingTests {
    /// The owner removes a participant without having fetched since that participant accepted:
    /// the share record's save conflicts (its change tag is older than the server's), the server's
    /// version becomes the base, and the removal goes again and is applied: the participant's
    /// access ends.
    @Test func aRemovalMadeOnAStaleShare_isAppliedAfterTheConflict() async throws {
        try await ServerProcess.with(users: Self.users) { server in
            let shared = try await aliceSharesAFolder(server.baseURL)
            let bob = try await TestDevice.make("bob", server: server.baseURL, token: "bob-token")
            defer { Task { await shared.alice.close(); await bob.close() } }
            _ = try await bob.container.acceptShare(shortGUID: try #require(shared.share.shortGUID))
            // Alice has not fetched bob's acceptance: her share record is a version behind.
            try await shared.alice.container.removeParticipant("_bob", from: shared.share)
            let aliceSees = try #require(try shared.alice.container.shares().first)
            #expect(aliceSees.participants.map(\.user).sorted() == ["_alice", "_carol"], "\(aliceSees)")
            try await bob.sync()
            #expect(try bob.container.shares().isEmpty, "bob's access ended")
        }
    }
}
