@testable import CloudStore
import CloudStoreSync
import CloudStoreTesting
import Foundation
import Testing

/// A notice board everyone reads: mirrored in the public database.
@Model
struct Announcement: Equatable {
    var id = UUID()
    var title = ""
    var body: String?
    /// Uploaded as an asset.
    var poster: Data?
}

/// Containers that mirror an entity in the public database
/// (``PersistentCloudContainer/Options/publicEntities``), through a real `cloudstore serve` child
/// process (or two on one PostgreSQL): every user's announcements reach every device by push, each
/// user's private notes stay theirs, and only an announcement's creator may change it.
@Suite("Mirroring: public database", .timeLimit(.minutes(ReliabilityRun.hangLimitMinutes)))
struct MirroringPublicDatabaseTests {
    static let users = ["alice-token": "_alice", "bob-token": "_bob"]
    static let postgresURL = ServerProcess.testPostgresURL

    static func schema() throws -> Schema {
        let notes = try Schema.notes()
        return Schema(name: notes.name, version: notes.version, entities: notes.entities + [Announcement.entityDescription])
    }

    static func device(
        _ name: String, server: URL, token: String, automatic: Bool = false, directory: TemporaryDirectory? = nil,
        accountChangePolicy: PersistentCloudContainer.AccountChangePolicy = .ask
    ) async throws -> TestDevice {
        try await TestDevice.make(name, schema: schema(), server: server, token: token, automatic: automatic, directory: directory) {
            $0.publicEntities = ["Announcement"]
            $0.accountChangePolicy = accountChangePolicy
            // Push only: a test that waits for a poll fails.
            $0.pollInterval = .seconds(3600)
        }
    }

    func announcements(_ device: TestDevice) throws -> [Announcement] {
        try device.store.read { try $0.fetch(Announcement.self, sortBy: [.ascending("title")]) }
    }

    @Test func aliceAnnounces_bobReadsIt_butHerNotesStayHers_andOnlySheMayChangeIt() async throws {
        try await ServerProcess.with(users: Self.users) { server in
            let alice = try await Self.device("alice", server: server.baseURL, token: "alice-token")
            let bob = try await Self.device("bob", server: server.baseURL, token: "bob-token")
            defer { Task { await alice.close(); await bob.close() } }
            let opening = Announcement(title: "Shop opens at 9", body: "From Monday", poster: Data((0..<50_000).map { UInt8($0 % 251) }))
            try await alice.write { context in
                try context.insert(opening)
                try context.insert(Note(title: "Alice's diary"))
            }
            try await alice.sync()
            try await bob.sync()
            #expect(try announcements(bob) == [opening], "alice's announcement reached bob")
            #expect(try bob.notes().isEmpty, "alice's notes are in her private database")

            // Bob may read it, not change or delete it: the save is refused whole.
            let sharing = try #require(try bob.container.syncState(of: Announcement.self, id: opening.id)).sharing
            #expect(sharing.owner == "_alice")
            #expect(sharing.permission == .readOnly)
            #expect(sharing.zoneID == .publicDefault)
            await #expect(throws: ContainerError.self) {
                var closed = opening
                closed.title = "Shop closed"
                try await bob.write { [closed] context in try context.update(closed) }
            }
            await #expect(throws: ContainerError.self) {
                try await bob.write { context in try context.delete(Announcement.self, id: opening.id) }
            }
            #expect(try announcements(bob) == [opening])
            #expect(try await bob.container.status().pendingUploads == 0)
            await #expect(throws: ContainerError.self, "a public object is not shared: everyone reads it") {
                _ = try await alice.container.share(opening, with: [.init(user: "_bob", permission: .readWrite)])
            }

            // Bob's own announcement is his to change; alice sees each change.
            var party = Announcement(title: "Party", body: "Saturday")
            try await bob.write { [party] context in try context.insert(party) }
            try await bob.sync()
            party.body = "Sunday"
            try await bob.write { [party] context in try context.update(party) }
            try await bob.sync()
            // Alice changes hers too.
            var edited = opening
            edited.body = "From Tuesday"
            try await alice.write { [edited] context in try context.update(edited) }
            try await alice.sync()
            try await alice.sync()
            try await bob.sync()
            #expect(try announcements(alice) == [party, edited])
            #expect(try announcements(bob) == [party, edited])
            #expect(try alice.container.syncState(of: Announcement.self, id: party.id)?.sharing.owner == "_bob")

            // A delete by its creator reaches the other user.
            try await bob.write { [party] context in try context.delete(Announcement.self, id: party.id) }
            try await bob.sync()
            try await alice.sync()
            #expect(try announcements(alice) == [edited])
        }
    }

    /// Another user signs in on the device and the previous user's data goes: the public objects
    /// go with it and are fetched again, as the new user reads them; the private ones do not come back.
    @Test func anAccountChange_replacingLocalData_fetchesThePublicObjectsAgain() async throws {
        try await ServerProcess.with(users: Self.users) { server in
            let directory = try TemporaryDirectory()
            let news = Announcement(title: "Shop opens at 9")
            let asAlice = try await Self.device(
                "phone", server: server.baseURL, token: "alice-token", directory: directory, accountChangePolicy: .replaceLocalData)
            try await asAlice.write { context in
                try context.insert(news)
                try context.insert(Note(title: "Alice's diary"))
            }
            try await asAlice.sync()
            await asAlice.close()

            let asBob = try await Self.device(
                "phone", server: server.baseURL, token: "bob-token", directory: directory, accountChangePolicy: .replaceLocalData)
            defer { Task { await asBob.close() } }
            try await asBob.container.waitUntilSynced(timeout: .seconds(30))
            try await asBob.sync()
            #expect(try asBob.notes().isEmpty, "alice's private notes are gone")
            #expect(try announcements(asBob) == [news], "the public announcement is read again, as bob")
            #expect(try asBob.container.sharing(of: Announcement.self, id: news.id).owner == "_alice")
        }
    }

    /// Alice edits her announcement on two devices at once, each a different field: both edits
    /// survive, merged field by field as for private objects.
    @Test func oneUsersTwoDevices_editingAPublicObject_mergeFieldByField() async throws {
        try await ServerProcess.with(users: Self.users) { server in
            let phone = try await Self.device("phone", server: server.baseURL, token: "alice-token")
            let laptop = try await Self.device("laptop", server: server.baseURL, token: "alice-token")
            defer { Task { await phone.close(); await laptop.close() } }
            let news = Announcement(title: "Shop opens at 9", body: "From Monday")
            try await phone.write { context in try context.insert(news) }
            try await phone.sync()
            try await laptop.sync()
            var retitled = news
            retitled.title = "Shop opens at 8"
            var reworded = news
            reworded.body = "From Tuesday"
            try await phone.write { [retitled] context in try context.update(retitled) }
            try await laptop.write { [reworded] context in try context.update(reworded) }
            try await phone.sync()
            try await laptop.sync()
            try await phone.sync()
            let merged = Announcement(id: news.id, title: "Shop opens at 8", body: "From Tuesday")
            #expect(try announcements(phone) == [merged])
            #expect(try announcements(laptop) == [merged])
        }
    }

    /// Announcements saved before the store first mirrored, and the container that opens it
    /// next, with a server: they go to the public database, where bob reads them.
    @Test func objectsSavedBeforeTheStoreFirstMirrored_goToThePublicDatabase() async throws {
        try await ServerProcess.with(users: Self.users) { server in
            let directory = try TemporaryDirectory()
            let url = directory.file("alice.sqlite")
            let old = Announcement(title: "Written offline")
            let store = try PersistentStore(url: url, schema: try Self.schema())
            try await store.write(author: "app") { context in try context.insert(old) }
            try store.close()
            let alice = try await Self.device("alice", server: server.baseURL, token: "alice-token", directory: directory)
            let bob = try await Self.device("bob", server: server.baseURL, token: "bob-token")
            defer { Task { await alice.close(); await bob.close() } }
            #expect(try await alice.container.status().pendingUploads == 1)
            try await alice.container.waitUntilSynced(timeout: .seconds(30))
            try await bob.sync()
            #expect(try announcements(bob) == [old])
        }
    }

    @Test func aPublicEntityRelatedToAPrivateOne_isRefusedAtOpen_naming_both() async throws {
        await #expect {
            _ = try await TestDevice.make("alice", schema: Self.schema(), server: nil) { $0.publicEntities = ["Note"] }
        } throws: { error in
            let error = try #require(error as? ContainerError)
            return error.code == .invalidOptions && error.message.contains("Note") && error.message.contains("Folder")
                && error.message.contains("publicEntities")
        }
        await #expect {
            _ = try await TestDevice.make("alice", schema: Self.schema(), server: nil) { $0.publicEntities = ["Notice"] }
        } throws: { error in
            (error as? ContainerError)?.code == .invalidOptions && "\(error)".contains("Notice")
        }
    }

    /// A query subscription wakes the other user's container: the announcement arrives with no
    /// polling interval (it is an hour).
    @Test func anAnnouncement_reachesAnotherUsersRunningContainer_byPush() async throws {
        try await ServerProcess.with(users: Self.users) { server in
            try await anAnnouncementReachesBobByPush(alice: server.baseURL, bob: server.baseURL, "SQLite")
        }
    }

    @Test(.enabled(if: Self.postgresURL != nil, "set CLOUDSTORE_TEST_POSTGRES_URL (bash .ci/run does) to run it"))
    func anAnnouncement_reachesAnotherUsersRunningContainer_byPush_acrossTwoPostgreSQLInstances() async throws {
        try await ServerProcess.withTwoOnPostgres(users: Self.users) { first, second in
            try await anAnnouncementReachesBobByPush(alice: first, bob: second, "PostgreSQL, two instances")
        }
    }

    func anAnnouncementReachesBobByPush(alice aliceServer: URL, bob bobServer: URL, _ backend: String) async throws {
        let bob = try await Self.device("bob", server: bobServer, token: "bob-token", automatic: true)
        let alice = try await Self.device("alice", server: aliceServer, token: "alice-token")
        defer { Task { await alice.close(); await bob.close() } }
        // Bob's container is up to date and listening (its subscription saved).
        try await bob.container.waitUntilSynced(timeout: .seconds(30))
        let news = Announcement(title: "Shop opens at 9")
        try await alice.write { context in try context.insert(news) }
        let arrived = Task {
            for try await current in bob.store.results(for: FetchDescriptor<Announcement>()) where current.contains(news) { return }
        }
        try await alice.container.sendChanges()
        let sentAt = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await arrived.value }
            group.addTask {
                try await Task.sleep(for: .seconds(20))
                Issue.record("the announcement did not reach bob within 20 s")
            }
            try await group.next()
            group.cancelAll()
        }
        let latency = ContinuousClock.now - sentAt
        print("public database push (\(backend)): alice's announcement was in bob's store \(latency) after her upload returned")
        #expect(latency < .seconds(5), "push, not a poll (the poll interval is an hour)")
        #expect(try announcements(bob) == [news])
    }
}
