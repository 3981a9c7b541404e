import CloudStoreServer
import CloudStoreTesting
import CloudStoreWire
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@testable import CloudStoreSync

/// An engine on the public database (``SyncEngine/Configuration/recordTypes``): a query
/// subscription per type wakes it by push, through a real server; on PostgreSQL, the two devices
/// talk to two server instances.
@Suite(.timeLimit(.minutes(ReliabilityRun.hangLimitMinutes))) struct SyncEnginePublicDatabaseTests {
    static var backends: [String] {
        ["SQLite"] + (ProcessInfo.processInfo.environment["CLOUDSTORE_TEST_POSTGRES_URL"] == nil ? [] : ["PostgreSQL"])
    }

    func record(_ name: String, type: String = "Announcement", _ text: String) -> Record {
        Record(recordType: type, recordID: RecordID(recordName: name, zoneID: .default), fields: ["text": .string(text)])
    }

    /// Two servers on one storage: one SQLite server twice, or two instances on a fresh PostgreSQL schema.
    func withServers(_ backend: String, _ body: (TestServer, TestServer) async throws -> Void) async throws {
        if backend == "SQLite" {
            try await TestServer.with { server in try await body(server, server) }
            return
        }
        let url = try #require(ProcessInfo.processInfo.environment["CLOUDSTORE_TEST_POSTGRES_URL"])
        try await TestPostgresSchema.with(in: url) { url in
            try await TestServer.with(storage: .postgres(url: url)) { a in
                try await TestServer.with(storage: .postgres(url: url)) { b in try await body(a, b) }
            }
        }
    }

    @Test(arguments: backends)
    func aRecordOfASubscribedType_wakesAnotherUsersEngine_withoutPolling(_ backend: String) async throws {
        try await withServers(backend) { serverA, serverB in
            let databaseB = FaultInjectingDatabase(serverB.database(user: "_bob", device: "B", scope: .public))
            let deviceB = await EngineDevice("B", database: databaseB, automaticallySync: true) { configuration in
                configuration.recordTypes = ["Announcement"]
                configuration.pollInterval = nil
                configuration.longPollTimeout = .seconds(30)
            }
            await deviceB.waitForEvent { $0.name == "didFetchChanges" }
            await databaseB.waitForRequests(.notifications, count: 1)
            #expect(databaseB.requestCount(.subscriptionsModify) == 1)
            #expect(await deviceB.savedState?.subscribedRecordTypes == ["Announcement"], "the state lists the subscription")

            // Alice writes a record of another type: B's long poll answers, and B polls again
            // without fetching.
            let deviceA = await EngineDevice("A", database: serverA.database(user: "_alice", device: "A", scope: .public))
            await deviceA.save(record("chat-1", type: "Chat", "hi"))
            try await deviceA.engine.sendChanges()
            await databaseB.waitForRequests(.notifications, count: 2)

            await deviceA.save(record("news-1", "Shop opens at 9"))
            let sentAt = ContinuousClock.now
            try await deviceA.engine.sendChanges()
            await deviceB.waitForEvent { event in
                if case .fetchedRecordZoneChanges(let page) = event { return page.modifications.contains { $0.recordName == "news-1" } }
                return false
            }
            let latency = ContinuousClock.now - sentAt
            print("public push (\(backend)): a record written through one server reached another user's engine in \(latency)")
            let names = await deviceB.recordNames()
            #expect(names == ["news-1"], "records of other types are not fetched")
            #expect(await deviceB.eventNames().filter { $0 == "willFetchChanges" }.count == 2, "the other type woke no fetch")
            #expect(databaseB.requestCount(.subscriptionsModify) == 1)
        }
    }

    @Test func aSavedState_keepsItsSubscriptions_andANewUserSavesTheirOwn() async throws {
        try await TestServer.with { server in
            let database = FaultInjectingDatabase(server.database(user: "_bob", device: "B", scope: .public))
            let first = await EngineDevice("B", database: database) { $0.recordTypes = ["Announcement", "Event"] }
            try await first.engine.fetchChanges()
            #expect(database.requestCount(.subscriptionsModify) == 1, "one request for both types")
            let state = try #require(await first.savedState)
            let again = await EngineDevice("B", database: database, state: state) { $0.recordTypes = ["Announcement", "Event"] }
            try await again.engine.fetchChanges()
            #expect(database.requestCount(.subscriptionsModify) == 1, "a saved state does not save them again")

            let listed = try await URLSession.shared.data(for: {
                var request = URLRequest(url: server.url(container: SyncEngineMultiDeviceTests.container, .public, .subscriptionsList))
                request.setValue("Bearer bob-token", forHTTPHeaderField: "Authorization")
                return request
            }())
            let subscriptions = try WireCoding.decode(SubscriptionsResponse.self, from: listed.0).subscriptions.compactMap(\.value)
            #expect(subscriptions.map(\.subscriptionID) == ["cloudstore.Announcement", "cloudstore.Event"])
            #expect(subscriptions.allSatisfy { $0.subscriptionType == .query && $0.firesOn == Subscription.FiresOn.allCases })

            // The private database keeps its own way: no subscriptions there.
            let privateDatabase = FaultInjectingDatabase(server.database(user: "_bob", device: "B"))
            let privateDevice = await EngineDevice("P", database: privateDatabase) { $0.recordTypes = ["Announcement"] }
            try await privateDevice.engine.fetchChanges()
            #expect(privateDatabase.requestCount(.subscriptionsModify) == 0)
        }
    }

    @Test func theLongPollWakesOnlyForTheEnginesSubscriptions() {
        var configuration = SyncEngine.Configuration(
            database: ScriptedDatabase(), stateSerialization: nil, delegate: Silent(), automaticallySync: false)
        configuration.recordTypes = ["Announcement"]
        func notification(_ id: String) -> PushNotification {
            PushNotification(ck: .init(containerIdentifier: "c", notificationID: id, database: .init(subscriptionID: id, database: .public)))
        }
        let other = NotificationsResponse(changed: true, syncToken: "t", zones: [], notifications: [notification("theirs")])
        let ours = NotificationsResponse(changed: true, syncToken: "t", zones: [], notifications: [notification("cloudstore.Announcement")])
        let subscribed: Set<String> = ["Announcement"]
        #expect(!configuration.isWoken(by: other, scope: .public, subscribed: subscribed))
        #expect(configuration.isWoken(by: ours, scope: .public, subscribed: subscribed))
        #expect(configuration.isWoken(by: other, scope: .public, subscribed: []), "without a saved subscription, any change")
        #expect(configuration.isWoken(by: other, scope: .private, subscribed: subscribed), "other databases wake on any change")
        #expect(!configuration.isWoken(by: NotificationsResponse(changed: false, syncToken: "t", zones: []), scope: .private, subscribed: []))
        let full = NotificationsResponse(
            changed: true, syncToken: "t", zones: [], notifications: (0..<200).map { notification("theirs-\($0)") })
        #expect(configuration.isWoken(by: full, scope: .public, subscribed: subscribed), "a full page may have cut ours off")
        configuration.recordTypes = nil
        #expect(configuration.isWoken(by: other, scope: .public, subscribed: subscribed))
    }
}

/// A delegate that does nothing, for configurations that are only inspected.
private actor Silent: SyncEngineDelegate {
    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {}
    func nextRecordZoneChangeBatch(_ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine) async
        -> SyncEngine.RecordZoneChangeBatch?
    { nil }
}

