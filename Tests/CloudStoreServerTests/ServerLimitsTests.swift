import CloudStoreServer
import CloudStoreTesting
import CloudStoreWire
import Foundation
import Testing

@Suite("limits and throttling")
struct ServerLimitsTests {
    @Test(arguments: Backend.all)
    func operations_over200AreLimitExceeded(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            try await client.createZone("Notes")
            let answer = try await client.call(
                .private, .recordsModify,
                RecordsModifyRequest(zoneID: ZoneID(zoneName: "Notes"), operations: (0..<201).map { .init(.create, note("N-\($0)")) }))
            #expect(answer.status == 413)
            #expect(answer.error?.serverErrorCode == .limitExceeded)
            #expect(try await client.lookup(["N-0"]).first?.code == .notFound)

            let zones = try await client.call(
                .private, .zonesModify,
                ZonesModifyRequest(operations: (0..<201).map { .init(.create, ZoneID(zoneName: "Z\($0)")) }))
            #expect(zones.status == 413)
            let exactly200 = try await client.modify((0..<200).map { .init(.create, note("N-\($0)")) })
            #expect(exactly200.status == 200)
        }
    }

    @Test(arguments: Backend.all)
    func body_overTheLimitIs413WithoutBeingKept(_ backend: Backend) async throws {
        try await withServer(backend, limits: ServerLimits(maxBodyBytes: 64 * 1024)) { _, client in
            try await client.createZone("Notes")
            let big = note("N-1", title: String(repeating: "x", count: 70 * 1024))
            let answer = try await client.call(
                .private, .recordsModify, RecordsModifyRequest(zoneID: ZoneID(zoneName: "Notes"), operations: [.init(.create, big)]))
            #expect(answer.status == 413)
            #expect(answer.error?.serverErrorCode == .limitExceeded)

            let body = try WireCoding.encode(
                RecordsModifyRequest(zoneID: ZoneID(zoneName: "Notes"), operations: [.init(.create, big)]))
            let chunked = try await client.send(.POST, client.path(.private, .recordsModify), body: body, chunked: true)
            #expect(chunked.status == 413, "a body without Content-Length is cut off at the limit too")
            try await client.save([note("N-2")])
            #expect(try await client.lookup(["N-1"]).first?.code == .notFound)
        }
    }

    @Test(arguments: Backend.all)
    func record_overTheLimitIsPerRecordLimitExceeded(_ backend: Backend) async throws {
        try await withServer(backend, limits: ServerLimits(maxRecordBytes: 1024)) { _, client in
            try await client.createZone("Notes")
            let (status, results) = try await client.modify(
                [.init(.create, note("small")), .init(.create, note("big", title: String(repeating: "y", count: 2000)))],
                atomic: false)
            #expect(status == 200)
            #expect(results.map(\.code) == [nil, .limitExceeded])
            #expect(results[1].error?.recordName == "big")

            let saved = try await client.lookup(["small"])
            let tag = try #require(saved.first?.value?.recordChangeTag)
            let growing = Record(recordName: "small", recordChangeTag: tag, fields: ["body": .string(String(repeating: "z", count: 1500))])
            let (_, grown) = try await client.modify([.init(.update, growing)], atomic: false)
            #expect(grown.first?.code == .limitExceeded, "an update that makes the record too large fails")
        }
    }

    @Test(arguments: Backend.all)
    func rateLimit_answers429WithRetryAfterAndRecoversWithTime(_ backend: Backend) async throws {
        let clock = ManualClock()
        try await withServer(backend, limits: ServerLimits(requestsPerSecondPerUser: 2), clock: clock) { _, alice in
            let path = alice.path(.private, .zonesList)
            #expect(try await alice.send(.GET, path).status == 200)
            #expect(try await alice.send(.GET, path).status == 200)
            let throttled = try await alice.send(.GET, path)
            #expect(throttled.status == 429)
            #expect(throttled.error?.serverErrorCode == .throttled)
            #expect(throttled.error?.retryAfter == 1)
            #expect(throttled.headers.first(name: "Retry-After") == "1")

            let bob = alice.asUser("bob-token")
            #expect(try await bob.send(.GET, path).status == 200, "each user has their own bucket")

            clock.advance(by: 0.5)
            #expect(try await alice.send(.GET, path).status == 200)
            #expect(try await alice.send(.GET, path).status == 429)
        }
    }

    /// Requests that fail to authenticate are limited per client address, so unknown tokens cannot
    /// be sent without limit; a known token from the same address keeps its own bucket.
    @Test(arguments: Backend.all)
    func rateLimit_failedSignInsAreLimitedPerAddressAndNeverSlowGoodTokens(_ backend: Backend) async throws {
        let clock = ManualClock()
        try await withServer(backend, limits: ServerLimits(requestsPerSecondPerUser: 2), clock: clock) { _, alice in
            let path = alice.path(.private, .zonesList)
            let mallory = alice.asUser("guessed-token")
            let anonymous = alice.asUser(nil)
            #expect(try await mallory.send(.GET, path).status == 401)
            #expect(try await anonymous.send(.GET, path).status == 421)
            for _ in 0..<5 {
                let throttled = try await mallory.send(.GET, path)
                #expect(throttled.status == 429)
                #expect(throttled.error?.reason?.contains("failed sign-ins from this address") == true)
                #expect(throttled.headers.first(name: "Retry-After") == "1")
            }
            #expect(try await alice.send(.GET, path).status == 200, "a burst of bad tokens never slows a good one")
            #expect(try await alice.send(.GET, path).status == 200)
            clock.advance(by: 0.5)
            #expect(try await mallory.send(.GET, path).status == 401, "the address's bucket refills with time")
            #expect(try await anonymous.send(.GET, path).status == 429, "no credentials at all count as failures too")
        }
    }
}
