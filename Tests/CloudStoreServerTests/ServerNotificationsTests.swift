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
            #expect(
                changed.databaseChanges == (try await client.databaseChanges(token: start.syncToken)),
                "the answer carries changes/database for its since")

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
            #expect(answer.databaseChanges == next)
            let sinceNow = try await poll(client, since: nil, timeout: 0).decode(NotificationsResponse.self)
            #expect(sinceNow.databaseChanges == nil, "a poll without since names no token to answer for")
        }
    }

    /// A poll that names zone tokens gets, for each of those zones that changed, the page
    /// `changes/zone` answers for that token; zones it did not name, none. Malformed or too many
    /// tokens are refused.
    @Test(arguments: Backend.all)
    func longPoll_carriesTheFirstPageOfEachNamedZone(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            try await client.createZone("Notes")
            try await client.createZone("Other")
            _ = try await client.save([note("N-1")])
            let notes = try await client.allZoneChanges("Notes")
            let start = try await client.databaseChanges(token: nil)

            let writer = client.asUser("alice-token", device: "device-B")
            _ = try await writer.save([note("N-2", title: "from B")])
            _ = try await writer.save("Other", [note("O-1")])
            let answer = try await client.send(
                .GET,
                client.path(.private, .notifications) + "?timeout=0&since=\(start.syncToken)&zones=\(notes.token)")
                .decode(NotificationsResponse.self)
            let pages = try #require(answer.zoneChanges)
            #expect(pages.map(\.zoneID.zoneName) == ["Notes"], "only the zone it named")
            let asked = try await client.zoneChanges("Notes", token: notes.token).decode(ZoneChangesResponse.self)
            guard case .value(let expected)? = asked.zones.first else { throw BadAnswer() }
            #expect(pages.first == expected, "the same page changes/zone answers")
            #expect(pages.first?.records.map(\.recordName) == ["N-2"])

            let malformed = try await client.send(
                .GET, client.path(.private, .notifications) + "?timeout=0&since=\(start.syncToken)&zones=bogus")
            #expect(malformed.status == 400)
            #expect(malformed.text.contains("zones: the zone sync token is malformed"), "the error names the parameter")
            let many = Array(repeating: notes.token, count: NotificationsResponse.maxZoneTokens + 1).joined(separator: ",")
            let tooMany = try await client.send(
                .GET, client.path(.private, .notifications) + "?timeout=0&since=\(start.syncToken)&zones=\(many)")
            #expect(tooMany.status == 400)
            #expect(tooMany.text.contains("at most \(NotificationsResponse.maxZoneTokens)"))
        }
    }

    struct BadAnswer: Error {}

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
