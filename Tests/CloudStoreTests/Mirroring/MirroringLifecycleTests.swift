@testable import CloudStore
import CloudStoreSync
import CloudStoreTesting
import Foundation
import Testing

@Suite("Mirroring: zones, accounts, offline starts and the sync-finished signal", .serialized)
struct MirroringLifecycleTests {
    @Test func aContainerWithoutAServerIsALocalStore() async throws {
        let device = try await TestDevice.make("local", server: nil)
        try await device.write { try $0.insert(Note(title: "only here")) }
        #expect(try device.notes().map(\.title) == ["only here"])
        try await device.container.waitUntilSynced(timeout: .seconds(1))
        await #expect(throws: ContainerError.self) { try await device.container.sync() }
        let status = try await device.container.status()
        #expect(status.isMirroring == false)
        await device.close()
    }

    @Test func anUnreachableServerAtStartSyncsLater() async throws {
        let directory = try TemporaryDirectory()
        // A port nothing listens on.
        let offline = try await TestDevice.make("A", server: URL(string: "http://127.0.0.1:9")!, directory: directory)
        try await offline.write { try $0.insert(Note(title: "written offline")) }
        await #expect(throws: (any Error).self) { try await offline.container.sync() }
        let status = try await offline.container.status()
        #expect(status.pendingUploads == 1)
        #expect(status.lastError != nil)
        await offline.close()
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let a = try await TestDevice.make("A", server: server.baseURL, directory: directory)
            try await a.container.waitUntilSynced(timeout: .seconds(20))
            let b = try await TestDevice.make("B", server: server.baseURL)
            try await b.sync()
            #expect(try b.notes().map(\.title) == ["written offline"])
            await a.close()
            await b.close()
        }
    }

    @Test func automaticSyncConvergesAndWaitUntilSyncedSaysWhen() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let a = try await TestDevice.make("A", server: server.baseURL, automatic: true)
            let b = try await TestDevice.make("B", server: server.baseURL, automatic: true)
            for index in 0..<20 {
                try await a.write { try $0.insert(Note(title: "auto \(index)")) }
            }
            try await a.container.waitUntilSynced(timeout: .seconds(30))
            try await b.container.waitUntilSynced(timeout: .seconds(30))
            #expect(try b.notes().count == 20)
            #expect(try b.contents() == a.contents())
            let status = try await a.container.status()
            #expect(status.hasNothingToUpload)
            #expect(status.lastExport != nil)
            await a.close()
            await b.close()
        }
    }

    /// A device does not fetch its own uploads back: the server answers each batch with the zone's
    /// token after it while nothing else changed the zone (WireProtocol.md), so A's `changes/zone`
    /// answers hold none of the notes it uploaded, in several batches. Once B wrote, A's fetch
    /// brings B's note.
    @Test func aDevicesUploadsAreNotFetchedBack() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let counting = FaultInjectingDatabase.Box()
            let a = try await TestDevice.make("A", server: server.baseURL) { $0.configureEngine = counting.configureEngine }
            let b = try await TestDevice.make("B", server: server.baseURL)
            try await a.sync()
            try await a.write { context in
                for index in 0..<450 { try context.insert(Note(title: "mine \(index)")) }
            }
            try await a.sync()
            try await a.sync()
            let database = try #require(counting.database)
            #expect(database.requestCount(.recordsModify) >= 3, "the notes went up in several batches")
            #expect(database.fetchedRecordNames.isEmpty, "A fetched none of its own uploads back")

            try await b.sync()
            #expect(try b.notes().count == 450)
            try await b.write { try $0.insert(Note(title: "from B")) }
            try await b.sync()
            try await a.sync()
            #expect(try a.notes().count == 451)
            #expect(database.fetchedRecordNames.count == 1, "only B's note came")
            await a.close()
            await b.close()
        }
    }

    @Test func eventsReportImportsAndExportsWithCounts() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let a = try await TestDevice.make("A", server: server.baseURL)
            let events = a.container.events()
            try await a.write { context in
                for index in 0..<3 { try context.insert(Note(title: "e\(index)")) }
            }
            try await a.sync()
            var ended: [PersistentCloudContainer.Event] = []
            for await event in events where event.endDate != nil {
                ended.append(event)
                if ended.contains(where: { $0.kind == .import }) { break }
            }
            let export = try #require(ended.first(where: { $0.kind == .export }))
            #expect(export.succeeded)
            #expect(export.counts.saved == 3)
            await a.close()
        }
    }

    /// A store that held objects (and links) before it first mirrored uploads them all, as Core
    /// Data + CloudKit exports a store's existing data when mirroring is turned on.
    @Test func objectsSavedBeforeTheFirstMirroringAreUploaded() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let directory = try TemporaryDirectory()
            let local = try PersistentStore(url: directory.file("A.sqlite"), schema: Schema.notes())
            try await local.write(author: "app") { context in
                for index in 0..<5 { try context.insert(Note(title: "before \(index)")) }
            }
            try local.close()
            let a = try await TestDevice.make("A", server: server.baseURL, directory: directory)
            #expect(try await a.container.status().pendingUploads == 5)
            try await a.sync()
            let b = try await TestDevice.make("B", server: server.baseURL)
            try await b.sync()
            #expect(try b.notes().map(\.title).sorted() == (0..<5).map { "before \($0)" })
            await a.close()
            await b.close()
        }
    }

    /// Long work reports as it goes: an export knows its total and reports each batch the server
    /// answered; an import reports each page it applied.
    @Test func longWorkReportsProgressAfterEachBatchAndPage() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let a = try await TestDevice.make("A", server: server.baseURL)
            try await a.write { context in
                for index in 0..<450 { try context.insert(Note(title: "p\(index)")) }
            }
            let exportEvents = a.container.events()
            try await a.container.sendChanges()
            var export: [PersistentCloudContainer.Event] = []
            for await event in exportEvents where event.kind == .export {
                export.append(event)
                if event.phase == .ended { break }
            }
            #expect(export.map(\.phase) == [.started, .progress, .progress, .progress, .ended])
            #expect(export.map(\.total) == Array(repeating: 450, count: 5))
            #expect(export.map(\.completed) == [0, 200, 400, 450, 450], "uploads go in batches of 200")
            #expect(Set(export.map(\.id)).count == 1)
            #expect(export.last?.description == "export succeeded: 450 saved, 0 deleted, 0 conflicts")

            let b = try await TestDevice.make("B", server: server.baseURL, pageSize: 100)
            let importEvents = b.container.events()
            try await b.container.fetchChanges()
            var imported: [PersistentCloudContainer.Event] = []
            for await event in importEvents where event.kind == .import {
                imported.append(event)
                if event.phase == .ended { break }
            }
            let progress = imported.filter { $0.phase == .progress }
            #expect(progress.map(\.completed).filter { $0 > 0 } == [100, 200, 300, 400, 450])
            #expect(imported.allSatisfy { $0.total == nil }, "the server does not say how many changes a fetch will bring")
            #expect(progress.first?.description == "import in progress (100): 100 saved, 0 deleted, 0 conflicts")
            await a.close()
            await b.close()
        }
    }

    /// With `reupload`, a zone deleted on the server (here by a raw request, as another device's
    /// reset would) comes back with everything the device holds: the send that finds it missing
    /// waits for the fetch that says it was deleted, and the policy puts it back.
    @Test func aDeletedZoneWithReuploadIsRecreatedAndEverythingUploadedAgain() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let a = try await TestDevice.make("A", server: server.baseURL) { $0.zoneDeletionPolicy = .reupload }
            try await a.write { context in
                for index in 0..<3 { try context.insert(Note(title: "z\(index)")) }
            }
            try await a.sync()
            // Someone deletes the zone on the server.
            let database = HTTPCloudDatabase(
                baseURL: server.baseURL, container: TestDevice.containerIdentifier, token: "alice-token", deviceID: "admin")
            _ = try await database.modifyZones(ZonesModifyRequest(operations: [.init(.delete, ZoneID(zoneName: "Notes"))]))
            try await a.write { try $0.insert(Note(title: "z3")) }
            try await a.sync()
            let b = try await TestDevice.make("B", server: server.baseURL)
            try await b.sync()
            #expect(try b.notes().map(\.title) == ["z0", "z1", "z2", "z3"])
            await a.close()
            await b.close()
        }
    }

    /// A server that lost its data (restored from an empty one) answers the device's database
    /// token with `CHANGE_TOKEN_EXPIRED` and lists no zones. The device fetches the zone it knew
    /// from scratch, hears `ZONE_NOT_FOUND`, and puts it back with everything in it, as it does when
    /// a send finds the zone missing: syncing until synced is enough, no change of the app's is
    /// needed.
    @Test func aServerThatLostItsDataGetsTheDevicesObjectsBack() async throws {
        let directory = try TemporaryDirectory()
        try await ServerProcess.with(users: TestServer.defaultUsers) { first in
            let a = try await TestDevice.make("A", server: first.baseURL, directory: directory)
            try await a.write { context in
                for index in 0..<3 { try context.insert(Note(title: "z\(index)")) }
            }
            try await a.sync()
            await a.close()
        }
        try await ServerProcess.with(users: TestServer.defaultUsers) { empty in
            let a = try await TestDevice.make("A", server: empty.baseURL, directory: directory)
            try await a.container.waitUntilSynced()
            let b = try await TestDevice.make("B", server: empty.baseURL)
            try await b.sync()
            #expect(try b.notes().map(\.title) == ["z0", "z1", "z2"])
            try await a.write { try $0.insert(Note(title: "z3")) }
            try await a.sync()
            try await b.sync()
            #expect(try b.notes().map(\.title) == ["z0", "z1", "z2", "z3"])
            #expect(try a.notes().map(\.title) == ["z0", "z1", "z2", "z3"], "nothing was removed on A")
            await a.close()
            await b.close()
        }
    }

    @Test func aDeletedZoneWithDeleteLocalDataRemovesTheLocalCopy() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let a = try await TestDevice.make("A", server: server.baseURL) { $0.zoneDeletionPolicy = .deleteLocalData }
            try await a.write { try $0.insert(Note(title: "shared")) }
            try await a.sync()
            let database = HTTPCloudDatabase(
                baseURL: server.baseURL, container: TestDevice.containerIdentifier, token: "alice-token", deviceID: "admin")
            _ = try await database.modifyZones(ZonesModifyRequest(operations: [.init(.delete, ZoneID(zoneName: "Notes"))]))
            try await a.container.fetchChanges()
            #expect(try a.notes().isEmpty)
            await a.close()
        }
    }

    @Test func switchingAccountsWithReplaceLocalDataReplacesTheLocalCopy() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let bob = try await TestDevice.make("bob", server: server.baseURL, token: "bob-token")
            try await bob.write { try $0.insert(Note(title: "Bob's")) }
            try await bob.sync()
            let directory = try TemporaryDirectory()
            let alice = try await TestDevice.make("device", server: server.baseURL, token: "alice-token", directory: directory)
            try await alice.write { try $0.insert(Note(title: "Alice's")) }
            try await alice.sync()
            await alice.close()
            // The same store file, now signed in as Bob.
            let switched = try await TestDevice.make("device", server: server.baseURL, token: "bob-token", directory: directory) {
                $0.accountChangePolicy = .replaceLocalData
            }
            try await switched.sync()
            try await switched.sync()
            #expect(try switched.notes().map(\.title) == ["Bob's"])
            let status = try await switched.container.status()
            #expect(status.user == "_bob")
            await switched.close()
            await bob.close()
        }
    }

    /// Alice shared a folder from this device; Bob signs in and the local data is kept for him:
    /// the folder and its notes go back to the primary zone and up into Bob's account, where
    /// Bob's other device reads them.
    @Test func switchingAccountsWithKeepLocalData_bringsASharedFolderBackToThePrimaryZone() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers.merging(["carol-token": "_carol"]) { $1 }) { server in
            let directory = try TemporaryDirectory()
            let alice = try await TestDevice.make("device", server: server.baseURL, token: "alice-token", directory: directory)
            let folder = Folder(title: "Shopping")
            let milk = Note(title: "Milk", folder: folder.id)
            try await alice.write { context in
                try context.insert(folder)
                try context.insert(milk)
            }
            try await alice.sync()
            _ = try await alice.container.share(folder, with: [.init(user: "_carol", permission: .readOnly)])
            #expect(try alice.container.sharing(of: Folder.self, id: folder.id).isShared)
            await alice.close()

            let switched = try await TestDevice.make("device", server: server.baseURL, token: "bob-token", directory: directory) {
                $0.accountChangePolicy = .keepLocalData
            }
            try await switched.container.waitUntilSynced(timeout: .seconds(30))
            let sharing = try switched.container.sharing(of: Folder.self, id: folder.id)
            #expect(sharing.zoneID == switched.container.zoneID && !sharing.isShared)
            let bobsOther = try await TestDevice.make("other", server: server.baseURL, token: "bob-token")
            try await bobsOther.sync()
            #expect(try bobsOther.folders().map(\.title) == ["Shopping"])
            #expect(try bobsOther.notes().map(\.title) == ["Milk"])
            await switched.close()
            await bobsOther.close()
        }
    }

    @Test func aRejectedTokenKeepsLocalChanges() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let device = try await TestDevice.make("A", server: server.baseURL, token: "wrong-token")
            try await device.write { try $0.insert(Note(title: "kept")) }
            await #expect(throws: (any Error).self) { try await device.container.sync() }
            let status = try await device.container.status()
            #expect(status.pendingUploads == 1)
            #expect(try device.notes().map(\.title) == ["kept"])
            await device.close()
        }
    }
}
