import CloudStoreTesting
import CloudStoreWire
import Foundation
import Logging
import Testing

@testable import CloudStoreServer

/// Rolling restarts and upgrades of a PostgreSQL deployment under load, as an operator runs them:
/// instances on one database, writers going round them, one instance SIGKILLed and started again
/// on its port.
@Suite(
    "PostgreSQL: rolling restarts and upgrades under load", .serialized, .timeLimit(.minutes(ReliabilityRun.hangLimitMinutes)),
    .enabled(if: Backend.postgresURL != nil, "set CLOUDSTORE_TEST_POSTGRES_URL (bash .ci/run does) to run these"))
struct ServerPostgresRestartTests {
    /// How long a restarted instance may take to answer `/readyz`: a start that fails or waits for
    /// locks (as the release before layout versions did) never answers; a debug build alone
    /// answers in well under a second, and under the whole suite on two cores once in 5.6 s.
    static let backWithin: Duration = .seconds(30)

    /// `cloudstore serve` on the schema `url` names, with the default users and containers.
    static func arguments(_ url: String, in root: TemporaryDirectory, debug: Int = 0) throws -> [String] {
        let tokens = root.file("tokens.json")
        try WireCoding.encode(TestServer.defaultUsers).write(to: tokens)
        return ["--postgres", url, "--tokens", tokens.path, "--debug", "\(debug)"] + ServerProcess.containerArguments()
    }

    /// An instance of an earlier release, in this process: its layout ends after `steps` steps.
    static func startEarlierRelease(_ url: String, steps: Int, port: Int = 0) async throws -> CloudServer {
        var configuration = ServerConfiguration(
            port: port, storage: .postgres(url: url), containers: TestServer.defaultContainers, users: TestServer.defaultUsers,
            logger: Logger(label: "earlier-release", factory: { _ in SwiftLogNoOpLogHandler() }))
        configuration.postgresLayoutSteps = steps
        return try await CloudServer.start(configuration: configuration)
    }

    /// The recorded layout version, and whether the index the last step adds is there and valid.
    static func layoutState(_ url: String) async throws -> (version: Int?, keyIndex: Bool) {
        try await withPostgres(url) { storage, connection in
            (try await storage.recordedLayoutVersion(connection), try await storage.hasValidIndex("cloudstore_record_by_key", connection))
        }
    }

    /// Three instances, eight writers (as in the issue); one instance is SIGKILLed and started again on its port 20
    /// times in a row. Each time it answers `/readyz` within seconds and takes writes again; at the
    /// end every acknowledged write is stored, and a reader that followed the changes with its
    /// token through all three instances saw each one.
    @Test func rollingRestart_oneInstanceKilled20TimesUnderWriters_comesBackEveryTimeAndNoAcknowledgedWriteIsLost() async throws {
        try await Backend.withFreshSchema { url in
            let root = try TemporaryDirectory(prefix: "cloudstore-rolling")
            defer { withExtendedLifetime(root) {} }
            let arguments = try Self.arguments(url, in: root)
            var instances: [ServerProcess] = []
            for _ in 0..<3 { instances.append(try await ServerProcess.launch(arguments)) }
            let urls = instances.map(\.baseURL)
            try await CloudClient(baseURL: urls[0]).createZone("Notes")

            let writers = Writers(8, through: urls)
            let writersStopped = Flag()
            let reader = Task { await followChanges(through: urls, until: writersStopped) }
            var acknowledgements = writers.acknowledgements.makeAsyncIterator()
            let clock = ContinuousClock()
            var times: [Duration] = []
            do {
                try await acknowledgements.waitFor(20)
                for restart in 1...20 {
                    let port = instances[0].port
                    await instances[0].kill()
                    let killed = clock.now
                    instances[0] = try await ServerProcess.launch(arguments, port: port)
                    try await waitUntilReady(urls[0])
                    let back = clock.now - killed
                    times.append(back)
                    #expect(back < Self.backWithin, "restart \(restart) answered /readyz after \(back)")
                    // It takes writes again, and so do the others.
                    try await acknowledgements.waitFor(3, by: 0)
                    try await acknowledgements.waitFor(6)
                }
            } catch {
                await writers.stop()
                reader.cancel()
                for instance in instances { await instance.kill() }
                throw error
            }
            await writers.stop()
            writersStopped.set()
            let seen = await reader.value

            let acknowledged = writers.acknowledged
            let stored = Set(try await CloudClient(baseURL: urls[1]).allZoneChanges().records.map(\.recordName))
            #expect(acknowledged.count >= 20 + 20 * 9)
            #expect(acknowledged.isSubset(of: stored), "acknowledged but lost: \(acknowledged.subtracting(stored).sorted().prefix(10))")
            #expect(acknowledged.isSubset(of: seen), "skipped by the reader: \(acknowledged.subtracting(seen).sorted().prefix(10))")
            for instance in instances { #expect(await instance.terminate() == 0) }
            let sorted = times.sorted()
            print(
                "rolling restart: 20 SIGKILL restarts, kill to /readyz min \(sorted[0]), median \(sorted[10]), max \(sorted[19]); \(acknowledged.count) writes acknowledged, \(writers.failed) failed")
        }
    }

    /// Two instances of the release before the record key index serve a database it prepared
    /// (layout version 21, the fixture) under four writers; an instance of this release starts
    /// beside them, upgrades the layout (the index, built concurrently on the busy table) and
    /// answers `/readyz` within seconds, while the earlier instances answer every write. Then it is
    /// SIGKILLed and started again five times, and an earlier instance restarts on the later layout.
    @Test func upgrade_ofALayoutAnEarlierReleaseIsServing_underItsWriters() async throws {
        try await Backend.withFreshSchema { url in
            let layout = PostgresLayout(schema: "any")
            let current = layout.version
            // The release before the record key index: the steps before it.
            let earlier = try #require(layout.steps.firstIndex { $0.name == "cloudstore_record_by_key" })
            var old: [CloudServer] = []
            var writerGroups: [Writers] = []
            var child: ServerProcess?
            for _ in 0..<2 { old.append(try await Self.startEarlierRelease(url, steps: earlier)) }
            do {
                let fixture = try await Self.layoutState(url)
                #expect(fixture.version == earlier && !fixture.keyIndex, "the fixture is the earlier release's layout")
                let oldURLs = old.map(\.baseURL)
                try await CloudClient(baseURL: oldURLs[0]).createZone("Notes")
                let oldWriters = Writers(4, through: oldURLs, prefix: "old")
                writerGroups.append(oldWriters)
                var oldAcknowledgements = oldWriters.acknowledgements.makeAsyncIterator()
                try await oldAcknowledgements.waitFor(200)

                let root = try TemporaryDirectory(prefix: "cloudstore-upgrade")
                defer { withExtendedLifetime(root) {} }
                let arguments = try Self.arguments(url, in: root, debug: 1)
                let clock = ContinuousClock()
                let launched = clock.now
                var instance = try await ServerProcess.launch(arguments)
                child = instance
                try await waitUntilReady(instance.baseURL)
                let upgraded = clock.now - launched
                #expect(upgraded < Self.backWithin, "the upgrading instance answered /readyz after \(upgraded)")
                #expect(instance.output.contains("upgrading the storage layout"), "\(instance.output)")
                try await oldAcknowledgements.waitFor(20)
                let upgradedLayout = try await Self.layoutState(url)
                #expect(upgradedLayout.version == current && upgradedLayout.keyIndex, "the layout was upgraded")

                let newWriters = Writers(2, through: [instance.baseURL] + oldURLs, prefix: "new")
                writerGroups.append(newWriters)
                var newAcknowledgements = newWriters.acknowledgements.makeAsyncIterator()
                for restart in 1...5 {
                    try await newAcknowledgements.waitFor(3, by: 0)
                    let port = instance.port
                    await instance.kill()
                    let killed = clock.now
                    instance = try await ServerProcess.launch(arguments, port: port)
                    child = instance
                    try await waitUntilReady(instance.baseURL)
                    #expect(clock.now - killed < Self.backWithin, "restart \(restart) answered /readyz after \(clock.now - killed)")
                    #expect(instance.output.contains("storage layout current"), "\(instance.output)")
                }
                try await newAcknowledgements.waitFor(3, by: 0)
                await oldWriters.stop()
                #expect(oldWriters.failed == 0, "the earlier release's instances refused or dropped writes during the upgrade")

                // An instance of the earlier release restarts on the later layout: nothing to run.
                let oldPort = old[0].port
                try await old[0].shutdown()
                old[0] = try await Self.startEarlierRelease(url, steps: earlier, port: oldPort)
                try await waitUntilReady(old[0].baseURL)
                try await newAcknowledgements.waitFor(3, by: 1)
                await newWriters.stop()

                let acknowledged = oldWriters.acknowledged.union(newWriters.acknowledged)
                let stored = Set(try await CloudClient(baseURL: instance.baseURL).allZoneChanges().records.map(\.recordName))
                #expect(acknowledged.isSubset(of: stored), "acknowledged but lost: \(acknowledged.subtracting(stored).sorted().prefix(10))")
                print("upgrade under load: 21 → \(current) in \(upgraded) to /readyz; \(acknowledged.count) writes acknowledged")
                #expect(await instance.terminate() == 0)
            } catch {
                for writers in writerGroups { await writers.stop() }
                await child?.kill()
                for server in old { try? await server.shutdown() }
                throw error
            }
            for server in old { try await server.shutdown() }
        }
    }
}
