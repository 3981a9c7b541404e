import CloudStoreTesting
import CloudStoreWire
import Foundation
import Testing

@Suite("notifications long poll")
struct ServerNotificationsTests {
    func poll(_ client: CloudClient, since: String?, timeout: Double) async throws -> Answer {
        var query = "?timeout=\(timeout)"
        if let since { query += "&since=\(since)" }
        return try await client.send(.GET, client.path(.private, .notifications) + query)
    }

    @Test(arguments: Backend.all)
    func longPoll_answersAtOnceWhenChangedAndWakesOnCommit(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            let start = try await client.databaseChanges(token: nil)
            try await client.createZone("Notes")
            let immediate = try await poll(client, since: start.syncToken, timeout: 30)
            let changed = try immediate.decode(NotificationsResponse.self)
            #expect(changed.changed)
            #expect(changed.zones.map(\.zoneID.zoneName) == ["Notes"])

            let clock = ContinuousClock()
            let started = clock.now
            async let woken = poll(client, since: changed.syncToken, timeout: 30)
            // A long poll that starts after the write answers at once; one that starts before is
            // woken by the broker. Either way it must answer long before its 30 s timeout.
            try await client.asUser("alice-token", device: "device-B").save([note("N-1")])
            let answer = try await woken.decode(NotificationsResponse.self)
            #expect(answer.changed)
            #expect(answer.zones.map(\.zoneID.zoneName) == ["Notes"])
            #expect(clock.now - started < .seconds(20))
            let next = try await client.databaseChanges(token: changed.syncToken)
            #expect(next.syncToken == answer.syncToken)
        }
    }

    @Test(arguments: Backend.all)
    func longPoll_timesOutUnchangedAndIgnoresOtherUsers(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            let start = try await client.databaseChanges(token: nil)
            async let quiet = poll(client, since: start.syncToken, timeout: 1)
            try await client.asUser("bob-token").createZone("BobsZone")
            let answer = try await quiet.decode(NotificationsResponse.self)
            #expect(answer.changed == false, "bob's changes do not wake alice")
            #expect(answer.syncToken == start.syncToken)
        }
    }

    @Test(arguments: Backend.all)
    func longPoll_badParametersAreBadRequests(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            #expect(try await poll(client, since: "garbage", timeout: 1).status == 400)
            let negative = try await client.send(.GET, client.path(.private, .notifications) + "?timeout=-1")
            #expect(negative.status == 400)
            let words = try await client.send(.GET, client.path(.private, .notifications) + "?timeout=soon")
            #expect(words.status == 400)
        }
    }
}
