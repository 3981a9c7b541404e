import CloudStoreServer
import CloudStoreTesting
import CloudStoreWire
import Foundation
import Testing

/// The ``FaultProxy`` itself, by raw HTTP: what each fault does to the request and the answer, the
/// seeded plan's determinism, and that nothing it holds can hang a shutdown.
@Suite("fault proxy", .timeLimit(.minutes(ReliabilityRun.hangLimitMinutes)))
struct FaultProxyTests {
    /// Runs `body` with a server and a proxy in front; `direct` talks to the server, `proxied` through the proxy.
    func withProxy(
        configuration: FaultProxy.Configuration = FaultProxy.Configuration(),
        _ body: (FaultProxy, _ direct: CloudClient, _ proxied: CloudClient) async throws -> Void
    ) async throws {
        try await withServer(.sqlite) { server, direct in
            let proxy = try await FaultProxy.start(inFrontOf: server.baseURL, configuration: configuration)
            var proxied = direct
            proxied.baseURL = proxy.baseURL
            do {
                try await body(proxy, direct, proxied)
            } catch {
                await proxy.shutdown()
                throw error
            }
            await proxy.shutdown()
        }
    }

    func createZone(_ name: String) throws -> Data {
        try WireCoding.encode(ZonesModifyRequest(operations: [.init(.create, ZoneID(zoneName: name))]))
    }

    func zoneNames(_ client: CloudClient) async throws -> [String] {
        try await client.send(.GET, client.path(.private, .zonesList)).decode(ZonesResponse.self).zones
            .compactMap { $0.value?.zoneID.zoneName }.filter { $0 != ZoneID.defaultZoneName }
    }

    @Test(arguments: [(FaultProxy.Fault.throttle(retryAfter: 7), 429, ServerErrorCode.throttled), (.unavailable(retryAfter: 3), 503, .tryAgainLater)])
    func throttleAndUnavailable_answerWithRetryAfterWithoutForwarding(
        _ fault: FaultProxy.Fault, status: Int, code: ServerErrorCode
    ) async throws {
        try await withProxy { proxy, direct, proxied in
            proxy.inject(fault)
            let answer = try await proxied.send(.POST, proxied.path(.private, .zonesModify), body: try createZone("Z"))
            #expect(answer.status == status)
            #expect(answer.error?.serverErrorCode == code)
            let seconds = status == 429 ? 7 : 3
            #expect(answer.error?.retryAfter == Double(seconds))
            #expect(answer.headers.first(name: "Retry-After") == String(seconds))
            #expect(try await zoneNames(direct).isEmpty, "the server never saw the request")
            #expect(proxy.statistics.forwarded == 0)
        }
    }

    @Test func dropRequestAndDropResponse_failTheCallBeforeAndAfterTheServerApplies() async throws {
        try await withProxy { proxy, direct, proxied in
            proxy.inject(.dropRequest, into: .zonesModify)
            await #expect(throws: (any Error).self) {
                try await proxied.send(.POST, proxied.path(.private, .zonesModify), body: try createZone("Before"))
            }
            proxy.inject(.dropResponse, into: .zonesModify)
            await #expect(throws: (any Error).self) {
                try await proxied.send(.POST, proxied.path(.private, .zonesModify), body: try createZone("After"))
            }
            #expect(try await zoneNames(direct) == ["After"])
            let answer = try await proxied.send(.GET, proxied.path(.private, .zonesList))
            #expect(answer.status == 200, "the next request passes")
        }
    }

    @Test func duplicateRequest_reachesTheServerTwiceAndAnswersTheSecond() async throws {
        try await withProxy { proxy, direct, proxied in
            try await direct.createZone("Notes")
            proxy.inject(.duplicateRequest, into: .recordsModify)
            let body = try WireCoding.encode(
                RecordsModifyRequest(zoneID: ZoneID(zoneName: "Notes"), operations: [.init(.create, note("N-1"))]))
            let answer = try await proxied.send(.POST, proxied.path(.private, .recordsModify), body: body)
            let second = try #require(try? WireCoding.decode(RecordsResponse.self, from: answer.body).records.first)
            #expect(second.code == .exists, "the second create finds the first one's record: \(answer.text)")
            #expect(proxy.statistics.forwarded == 2)
            #expect(try await direct.allZoneChanges("Notes").records.map(\.recordName) == ["N-1"])
        }
    }

    @Test func cutResponse_failsTheCallAfterTheServerApplied() async throws {
        try await withProxy { proxy, direct, proxied in
            proxy.inject(.cutResponse)
            await #expect(throws: (any Error).self) {
                try await proxied.send(.POST, proxied.path(.private, .zonesModify), body: try createZone("Cut"))
            }
            let zones = try await zoneNames(direct)
            #expect(zones == ["Cut"])
        }
    }

    @Test func plan_choosesByDeviceAndTheRandomPlanRepeatsForASeed() async throws {
        try await withProxy { proxy, _, proxied in
            proxy.setPlan { $0.deviceID == "device-B" ? .throttle(retryAfter: 1) : .pass }
            #expect(try await proxied.send(.GET, proxied.path(.private, .zonesList)).status == 200)
            let deviceB = proxied.asUser("alice-token", device: "device-B")
            #expect(try await deviceB.send(.GET, deviceB.path(.private, .zonesList)).status == 429)
            proxy.removeFaults()

            func run(seed: UInt64) async throws -> [Int] {
                proxy.setRandomFaults(seed: seed, rate: 0.5, faults: [.throttle(retryAfter: 1), .unavailable(retryAfter: 1)])
                var statuses: [Int] = []
                for _ in 0..<30 { statuses.append(try await proxied.send(.GET, proxied.path(.private, .zonesList)).status) }
                return statuses
            }
            let first = try await run(seed: 7)
            #expect(try await run(seed: 7) == first, "the same seed and requests give the same faults")
            #expect(Set(first) == [200, 429, 503])
        }
    }

    @Test func shutdown_endsDelayedAndHeldRequestsWithoutHanging() async throws {
        let clock = TestClock()
        var configuration = FaultProxy.Configuration()
        configuration.clock = clock
        configuration.holdTimeout = .seconds(3600)
        try await withServer(.sqlite) { server, direct in
            let proxy = try await FaultProxy.start(inFrontOf: server.baseURL, configuration: configuration)
            var proxied = direct
            proxied.baseURL = proxy.baseURL
            proxy.inject(.delay(.seconds(3600)))
            proxy.inject(.reorder)
            let delayed = Task { try await proxied.send(.GET, proxied.path(.private, .zonesList)) }
            let held = Task { try await proxied.send(.GET, proxied.path(.private, .zonesList)) }
            await proxy.waitForRequests(count: 2)
            await clock.waitForSleepers()
            let started = ContinuousClock.now
            await proxy.shutdown()
            _ = try? await delayed.value
            _ = try? await held.value
            #expect(ContinuousClock.now - started < .seconds(10))
        }
    }
}
