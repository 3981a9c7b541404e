@testable import CloudStoreServer
import CloudStoreTesting
import CloudStoreWire
import Crypto
import Foundation
import NIOHTTP1
import Testing

/// Subscriptions, their notifications, push tokens and the web courier (WireProtocol.md §8), over
/// HTTP with JSON as CloudKit clients write it, on both backends.
@Suite("Subscriptions and notifications")
struct ServerSubscriptionTests {
    static let pinnedNotes = #"{"recordType":"Note","filterBy":[{"comparator":"EQUALS","fieldName":"title","fieldValue":{"value":"Hi","type":"STRING"}}]}"#

    /// An ID PostgreSQL cannot store (a NUL) or longer than 255 bytes is a per-item BAD_REQUEST in
    /// a delete and a lookup as in a save, never a failure of the request (a fuzzed delete once
    /// made PostgreSQL fail).
    @Test(arguments: Backend.all)
    func invalidIDs_areRefusedPerItem_inEveryOperation(_ backend: Backend) async throws {
        try await withServer(backend) { _, alice in
            let long = String(repeating: "x", count: 300)
            let modified = try await alice.call(
                .private, .subscriptionsModify,
                json: #"{"operations":[{"operationType":"delete","subscription":{"subscriptionID":"a\u0000b"}},{"operationType":"delete","subscription":{"subscriptionID":"\#(long)"}},{"operationType":"create","subscription":{"subscriptionID":"ok","subscriptionType":"database"}}]}"#)
            try #require(modified.status == 200, "\(modified.text)")
            let results = try modified.decode(SubscriptionsResponse.self).subscriptions
            #expect(results.map { $0.error?.serverErrorCode } == [.badRequest, .badRequest, nil])
            #expect(results.first?.error?.reason?.contains("subscriptionID") == true)
            let lookup = try await alice.call(
                .private, .subscriptionsLookup, json: #"{"subscriptions":[{"subscriptionID":"a\u0000b"},{"subscriptionID":"ok"}]}"#)
            try #require(lookup.status == 200, "\(lookup.text)")
            let found = try lookup.decode(SubscriptionsResponse.self).subscriptions
            #expect(found.first?.error?.serverErrorCode == .badRequest)
            #expect(found.last?.value?.subscriptionID == "ok")
        }
    }

    @Test(arguments: Backend.all)
    func modifyListLookup_keepEachUsersSubscriptionsPerDatabase(_ backend: Backend) async throws {
        try await withServer(backend) { _, alice in
            let created = try await alice.call(
                .private, .subscriptionsModify,
                json: """
                    {"operations":[
                      {"operationType":"create","subscription":{"subscriptionID":"notes-zone","subscriptionType":"zone","zoneID":{"zoneName":"Notes"}}},
                      {"operationType":"create","subscription":{"subscriptionID":"his","subscriptionType":"query","query":\(Self.pinnedNotes),"firesOn":["create"],"notificationInfo":{"alertBody":"Hi!","shouldSendContentAvailable":true}}},
                      {"operationType":"create","subscription":{"subscriptionID":"everything","subscriptionType":"database"}},
                      {"operationType":"update","subscription":{"subscriptionID":"nowhere","subscriptionType":"database"}},
                      {"operationType":"create","subscription":{"subscriptionID":"bad","subscriptionType":"query","query":{"recordType":"Note"},"firesOn":[]}}
                    ]}
                    """)
            try #require(created.status == 200, "\(created.text)")
            let results = try created.decode(SubscriptionsResponse.self).subscriptions
            #expect(results.count == 5)
            #expect(results[0].value?.zoneID?.zoneName == "Notes")
            let query = try #require(results[1].value)
            #expect(query.firesOn == [.create])
            #expect(query.firesOnce == false, "defaults are answered")
            #expect(query.zoneWide == true)
            #expect(query.notificationInfo?.alertBody == "Hi!")
            #expect(results[3].error?.serverErrorCode == .notFound)
            #expect(results[3].error?.subscriptionID == "nowhere")
            #expect(results[4].error?.serverErrorCode == .badRequest)
            #expect(results[4].error?.reason?.contains("firesOn") == true)

            let list = try await alice.send(.GET, alice.path(.private, .subscriptionsList))
            let listed = try list.decode(SubscriptionsResponse.self).subscriptions.compactMap(\.value?.subscriptionID)
            #expect(listed == ["everything", "his", "notes-zone"])

            let lookup = try await alice.call(
                .private, .subscriptionsLookup, json: #"{"subscriptions":[{"subscriptionID":"his"},{"subscriptionID":"gone"}]}"#)
            let found = try lookup.decode(SubscriptionsResponse.self).subscriptions
            #expect(found.first?.value?.query?.recordType == "Note")
            #expect(found.last?.error?.serverErrorCode == .notFound)

            // Per user and per database.
            let bobs = try await alice.asUser("bob-token").send(.GET, alice.path(.private, .subscriptionsList))
            #expect(try bobs.decode(SubscriptionsResponse.self).subscriptions.isEmpty)
            let publicOnes = try await alice.send(.GET, alice.path(.public, .subscriptionsList))
            #expect(try publicOnes.decode(SubscriptionsResponse.self).subscriptions.isEmpty)

            let deleted = try await alice.call(
                .private, .subscriptionsModify,
                json: #"{"operations":[{"operationType":"delete","subscription":{"subscriptionID":"his"}},{"operationType":"delete","subscription":{"subscriptionID":"his"}}]}"#)
            let answers = try deleted.decode(SubscriptionsResponse.self).subscriptions
            #expect(answers.first?.value?.subscriptionType == .query, "a delete answers the subscription it removed")
            #expect(answers.last?.error?.serverErrorCode == .notFound)
        }
    }

    @Test(arguments: Backend.all)
    func databasesTakeTheSubscriptionsCloudKitsDo(_ backend: Backend) async throws {
        try await withServer(backend) { _, alice in
            for (database, type, extra) in [
                (DatabaseScope.public, "zone", ""), (.public, "database", ""), (.shared, "query", #","query":{"recordType":"Note"}"#),
                (.shared, "zone", #","zoneID":{"zoneName":"Notes"}"#),
            ] {
                let answer = try await alice.call(
                    database, .subscriptionsModify,
                    json: #"{"operations":[{"operationType":"create","subscription":{"subscriptionID":"s","subscriptionType":"\#(type)"\#(extra)}}]}"#)
                try #require(answer.status == 200, "\(answer.text)")
                let result = try answer.decode(SubscriptionsResponse.self).subscriptions.first
                #expect(result?.error?.serverErrorCode == .badRequest, "\(type) in \(database)")
            }
            let anonymous = try await alice.asUser(nil).send(.GET, alice.path(.public, .subscriptionsList))
            #expect(anonymous.status == 421)
        }
    }

    @Test(arguments: Backend.all)
    func querySubscription_onThePublicDatabase_reachesTheCourierAndTheLongPoll(_ backend: Backend) async throws {
        try await withServer(backend) { server, alice in
            let bob = alice.asUser("bob-token", device: "device-B")
            let token = try await alice.send(
                .POST, "/device/1/iCloud.test/development/tokens/create", body: Data(#"{"apnsEnvironment":"development"}"#.utf8))
            try #require(token.status == 200, "\(token.text)")
            let courier = try token.decode(PushTokenResponse.self)
            #expect(courier.webcourierURL.hasPrefix(server.baseURL.absoluteString.trimmingCharacters(in: ["/"])), "absolute")
            #expect(courier.apnsEnvironment == "development")

            let subscribed = try await alice.call(
                .public, .subscriptionsModify,
                json: #"{"operations":[{"operationType":"create","subscription":{"subscriptionID":"his","subscriptionType":"query","query":\#(Self.pinnedNotes),"firesOn":["create","delete"],"notificationInfo":{"alertBody":"New"}}}]}"#)
            try #require(subscribed.decode(SubscriptionsResponse.self).subscriptions.first?.value != nil, "\(subscribed.text)")
            let before = try await alice.send(.GET, alice.path(.public, .notifications) + "?timeout=0").decode(NotificationsResponse.self)

            let saved = try await bob.call(
                .public, .recordsModify,
                RecordsModifyRequest(operations: [.init(.create, note("P-1")), .init(.create, note("P-2", title: "Other"))]))
            try #require(saved.status == 200, "\(saved.text)")

            // The courier answers without credentials, one notification per GET.
            let delivered = try await alice.asUser(nil).send(.GET, courier.webcourierURL)
            try #require(delivered.status == 200, "\(delivered.text)")
            let payload = try delivered.decode(PushNotification.self)
            #expect(payload.ck.containerIdentifier == "iCloud.test")
            #expect(payload.ck.query == .init(subscriptionID: "his", recordName: "P-1", zoneName: "_defaultZone", zoneOwner: "_defaultOwner", database: .public, reason: .recordCreated))
            #expect(payload.aps?.alert?.body == "New")
            let json = delivered.json["ck"] as? [String: Any]
            #expect((json?["qry"] as? [String: Any])?["fo"] as? Int == 1, "CloudKit's keys: \(delivered.text)")
            let nothing = try await alice.asUser(nil).send(.GET, courier.webcourierURL + "?timeout=0")
            #expect(nothing.status == 200)
            #expect(nothing.body.isEmpty, "no second notification: \(nothing.text)")

            // The long poll carries the caller's notifications for the changes it reports.
            let polled = try await alice.send(.GET, alice.path(.public, .notifications) + "?timeout=0&since=\(before.syncToken)")
            let answer = try polled.decode(NotificationsResponse.self)
            #expect(answer.changed)
            #expect(answer.notifications?.map(\.ck.query?.recordName) == ["P-1"])
            let bobsPoll = try await bob.send(.GET, bob.path(.public, .notifications) + "?timeout=0&since=\(before.syncToken)")
            #expect(try bobsPoll.decode(NotificationsResponse.self).notifications == nil, "only the subscriber's")

            // An update does not fire (firesOn create, delete); a delete tests the record as it was.
            let current = try await bob.lookupPublic(["P-1"])
            _ = try await bob.call(
                .public, .recordsModify,
                RecordsModifyRequest(operations: [.init(.update, note("P-1", title: "Hi", tag: current.recordChangeTag, extra: ["n": .int64(2)]))]))
            _ = try await bob.call(
                .public, .recordsModify, RecordsModifyRequest(operations: [.init(.forceDelete, Record(recordName: "P-1"))]))
            let afterDelete = try await alice.asUser(nil).send(.GET, courier.webcourierURL)
            #expect(try afterDelete.decode(PushNotification.self).ck.query?.reason == .recordDeleted)
        }
    }

    @Test(arguments: Backend.all)
    func courier_waitsForTheNextNotification(_ backend: Backend) async throws {
        try await withServer(backend) { _, alice in
            // Apple's reference's path, without a body.
            let created = try await alice.send(.POST, alice.basePath + "/tokens/create")
            let url = try created.decode(PushTokenResponse.self).webcourierURL
            try await alice.createZone("Notes")
            _ = try await alice.call(
                .private, .subscriptionsModify,
                json: #"{"operations":[{"operationType":"create","subscription":{"subscriptionID":"notes","subscriptionType":"zone","zoneID":{"zoneName":"Notes"}}}]}"#)
            let anonymous = alice.asUser(nil)
            async let waited = anonymous.send(.GET, url + "?timeout=30")
            try await alice.save("Notes", [note("N-1")])
            let answer = try await waited
            let payload = try answer.decode(PushNotification.self)
            #expect(payload.ck.zone == .init(subscriptionID: "notes", zoneName: "Notes", zoneOwner: "_alice", database: .private))
        }
    }

    @Test(arguments: Backend.all)
    func zoneAndDatabaseSubscriptions_fireOncePerModify_andFiresOnceDeletesItself(_ backend: Backend) async throws {
        try await withServer(backend) { _, alice in
            try await alice.createZone("Notes")
            try await alice.createZone("Other")
            let subscribed = try await alice.call(
                .private, .subscriptionsModify,
                SubscriptionsModifyRequest(operations: [
                    .init(.create, Subscription(subscriptionID: "notes", subscriptionType: .zone, zoneID: ZoneID(zoneName: "Notes"))),
                    .init(.create, Subscription(subscriptionID: "all", subscriptionType: .database)),
                    .init(
                        .create,
                        Subscription(
                            subscriptionID: "first-hi", query: .init(recordType: "Note", filterBy: [.init("title", .equals, .string("Hi"))]),
                            firesOnce: true)),
                ]))
            try #require(subscribed.status == 200, "\(subscribed.text)")
            let start = try await alice.databaseChanges(token: nil).syncToken

            try await alice.save("Notes", [note("N-1"), note("N-2"), note("N-3", title: "Bye")])
            try await alice.save("Other", [note("O-1")])
            let poll = try await alice.send(.GET, alice.path(.private, .notifications) + "?timeout=0&since=\(start)")
            let notifications = try poll.decode(NotificationsResponse.self).notifications ?? []
            #expect(notifications.filter { $0.ck.zone != nil }.count == 1, "one per modify of the zone")
            #expect(notifications.filter { $0.ck.database != nil }.count == 2, "one per modify of the database")
            #expect(notifications.compactMap(\.ck.query?.recordName) == ["N-1"], "firesOnce fires once")
            #expect(Set(notifications.map(\.ck.notificationID)).count == notifications.count)

            let list = try await alice.send(.GET, alice.path(.private, .subscriptionsList))
            #expect(try list.decode(SubscriptionsResponse.self).subscriptions.compactMap(\.value?.subscriptionID) == ["all", "notes"])
        }
    }

    /// A participant's zone subscription in their shared database fires on the owner's writes,
    /// at the position the change took in the participant's shared database.
    @Test(arguments: Backend.all)
    func zoneSubscription_inTheSharedDatabase_firesOnTheOwnersWrites(_ backend: Backend) async throws {
        try await withServer(backend) { _, alice in
            let bob = alice.asUser("bob-token", device: "device-B")
            try await alice.createZone("Notes")
            let share = try await alice.share("Notes", [("_bob", .readWrite)])
            _ = try await bob.accept([try #require(share.share?.shortGUID)])
            let subscribed = try await bob.call(
                .shared, .subscriptionsModify,
                json: #"{"operations":[{"operationType":"create","subscription":{"subscriptionID":"alices-notes","subscriptionType":"zone","zoneID":{"zoneName":"Notes","ownerName":"_alice"}}}]}"#)
            try #require(try subscribed.decode(SubscriptionsResponse.self).subscriptions.first?.value != nil, "\(subscribed.text)")
            let url = try await bob.send(.POST, bob.basePath + "/tokens/create").decode(PushTokenResponse.self).webcourierURL
            let start = try await bob.sharedDatabaseChanges(token: nil).syncToken

            try await alice.save("Notes", [note("N-1")])
            let delivered = try await bob.asUser(nil).send(.GET, url + "?timeout=30")
            let expected = PushNotification.ZoneInfo(subscriptionID: "alices-notes", zoneName: "Notes", zoneOwner: "_alice", database: .shared)
            #expect(try delivered.decode(PushNotification.self).ck.zone == expected)
            let poll = try await bob.send(.GET, bob.path(.shared, .notifications) + "?timeout=0&since=\(start)")
            #expect(try poll.decode(NotificationsResponse.self).notifications?.map(\.ck.zone) == [expected])
        }
    }

    @Test(arguments: Backend.all)
    func pushTokens_needAUser_andRegisterKeepsTokensApart(_ backend: Backend) async throws {
        try await withServer(backend) { _, alice in
            let device = "/device/1/iCloud.test/development"
            let anonymous = try await alice.asUser(nil).send(.POST, device + "/tokens/create", body: Data("{}".utf8))
            #expect(anonymous.status == 421)
            let short = try await alice.send(
                .POST, device + "/tokens/register", body: Data(#"{"apnsEnvironment":"production","apnsToken":"abc"}"#.utf8))
            #expect(short.status == 400)
            let apnsToken = String(repeating: "Zm9v", count: 10) + "+/=="
            let registered = try await alice.send(
                .POST, device + "/tokens/register",
                body: Data(#"{"apnsEnvironment":"production","apnsToken":"\#(apnsToken)"}"#.utf8))
            try #require(registered.status == 200, "\(registered.text)")
            let response = try registered.decode(PushTokenResponse.self)
            #expect(response.apnsToken == apnsToken)
            #expect(!response.webcourierURL.contains(apnsToken), "the URL names a digest of the token")
            let again = try await alice.send(
                .POST, device + "/tokens/register",
                body: Data(#"{"apnsEnvironment":"production","apnsToken":"\#(apnsToken)"}"#.utf8))
            #expect(try again.decode(PushTokenResponse.self).webcourierURL == response.webcourierURL)
            let bobs = try await alice.asUser("bob-token").send(
                .POST, device + "/tokens/register",
                body: Data(#"{"apnsEnvironment":"production","apnsToken":"\#(apnsToken)"}"#.utf8))
            #expect(bobs.status == 400, "another user's token: \(bobs.text)")
            let unknown = try await alice.asUser(nil).send(
                .GET, device + "/courier/" + String(repeating: "0", count: 64) + "?timeout=0")
            #expect(unknown.status == 404)
        }
    }
}

extension ServerSubscriptionTests {
    /// As CloudKit JS and MistKit sign in, `?ckAPIToken=…&ckWebAuthToken=…` in the query: every
    /// subscription and token endpoint acts as that user. A server-to-server key, which is no
    /// user, is 421 there; an API token alone too.
    @Test(arguments: Backend.all)
    func queryStringSignIn_reachesEveryEndpoint_andServerKeysAreNoUser(_ backend: Backend) async throws {
        let key = P256.Signing.PrivateKey()
        let clock = ManualClock()
        try await withServer(backend, serverKeys: ["key-1": key.publicKey.pemRepresentation], clock: clock) { server, alice in
            server.server.replaceAPITokens(["iCloud.test": ["website": "web-secret"]])
            let web = alice.asUser(nil)
            let signIn = "?ckAPIToken=web-secret&ckWebAuthToken=alice-token"
            let database = alice.basePath + "/private"
            let calls: [(HTTPMethod, String, String?)] = [
                (.POST, database + "/subscriptions/modify", #"{"operations":[{"operationType":"create","subscription":{"subscriptionID":"z","subscriptionType":"zone"}}]}"#),
                (.GET, database + "/subscriptions/list", nil),
                (.POST, database + "/subscriptions/lookup", #"{"subscriptions":[{"subscriptionID":"z"}]}"#),
                (.POST, database + "/tokens/create", #"{"apnsEnvironment":"development"}"#),
                (.POST, alice.basePath + "/tokens/create", "{}"),
                (.POST, "/device/1/iCloud.test/development/tokens/create", "{}"),
                (.POST, database + "/tokens/register", #"{"apnsToken":"\#(String(repeating: "ab", count: 20))"}"#),
            ]
            for (method, path, body) in calls {
                let answer = try await web.send(method, path + signIn, body: body.map { Data($0.utf8) })
                #expect(answer.status == 200, "\(path): \(answer.text)")
                #expect(!answer.text.contains("serverErrorCode"), "\(path): \(answer.text)")
                let alone = try await web.send(method, path + "?ckAPIToken=web-secret", body: body.map { Data($0.utf8) })
                #expect(alone.status == 421, "an API token alone at \(path): \(alone.text)")
            }
            let list = try await alice.send(.GET, alice.path(.private, .subscriptionsList))
            #expect(try list.decode(SubscriptionsResponse.self).subscriptions.compactMap(\.value?.subscriptionID) == ["z"])

            let signer = Signer(key: key, keyID: "key-1", client: web)
            let publicPath = alice.path(.public, .subscriptionsModify)
            let signed = try await signer.send(
                publicPath, body: Data(#"{"operations":[{"operationType":"create","subscription":{"subscriptionID":"q","subscriptionType":"query","query":{"recordType":"Note"}}}]}"#.utf8),
                date: clock.now)
            #expect(signed.status == 421, "a server key is no user: \(signed.text)")
            #expect(signed.error?.reason?.contains("signed-in user") == true)
            let token = try await signer.send("/device/1/iCloud.test/development/tokens/create", body: Data("{}".utf8), date: clock.now)
            #expect(token.status == 421, "\(token.text)")
        }
    }
}

extension CloudClient {
    /// A live record of the public database, expected to exist.
    func lookupPublic(_ names: [String]) async throws -> Record {
        try #require(try await lookup(ZoneID.defaultZoneName, names, in: .public).first?.value)
    }
}
