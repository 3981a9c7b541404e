import CloudStoreSync
import CloudStoreTesting
import Foundation
import Testing

@testable import CloudStoreCLI

/// `cloudstore serve` with many `--container` options: they are taken out of the command line
/// before ArgumentParser, whose parsing is quadratic in the number of arguments
/// (``ServeCommand/separatingContainers(_:)``).
@Suite("cloudstore serve: many containers", .timeLimit(.minutes(ReliabilityRun.hangLimitMinutes)))
struct CLIServeContainersTests {
    @Test func bothSpellings_areTakenOut_theRestKeepsItsOrder() {
        let (rest, containers) = ServeCommand.separatingContainers(
            ["serve", "--container", "iCloud.a", "--port", "0", "--container=iCloud.b", "--data", "d", "--container", "iCloud.c"])
        #expect(rest == ["serve", "--port", "0", "--data", "d"])
        #expect(containers == ["iCloud.a", "iCloud.b", "iCloud.c"])
    }

    /// What ArgumentParser must judge stays where it is: a missing or option-like value, an empty
    /// one, and everything after `--`.
    @Test func whatIsNotSurelyAContainer_staysForArgumentParser() {
        #expect(ServeCommand.separatingContainers(["serve", "--container"]) == (["serve", "--container"], []))
        #expect(ServeCommand.separatingContainers(["serve", "--container", "--port", "0"]) == (["serve", "--container", "--port", "0"], []))
        #expect(ServeCommand.separatingContainers(["serve", "--container="]) == (["serve", "--container="], []))
        #expect(
            ServeCommand.separatingContainers(["serve", "--", "--container", "iCloud.a"])
                == (["serve", "--", "--container", "iCloud.a"], []))
        #expect(ServeCommand.separatingContainers(["sync", "--container", "iCloud.a"]) == (["sync", "--container", "iCloud.a"], []))
    }

    /// 1,000 declared containers reach the server: one from the middle is served, one not
    /// declared answers 404; a missing value is still ArgumentParser's usage error.
    @Test func aThousandContainers_areAllServed() async throws {
        try await TemporaryDirectory.with { directory in
            let declared = (0..<1_000).flatMap { ["--container", "iCloud.many.c\($0)"] }
            let serve = try await ServeRun.start(
                ["--data", directory.appendingPathComponent("data").path, "--tokens", try writeTokensFile(in: directory)] + declared)
            let database = { (container: String) in
                HTTPCloudDatabase(
                    baseURL: URL(string: "http://127.0.0.1:\(serve.port)")!, container: container, token: "alice-token",
                    deviceID: "cli-test")
            }
            #expect(try await database("iCloud.many.c500").listZones().zones.count == 1)
            #expect(try await database("iCloud.cli.test").listZones().zones.count == 1)
            await #expect(throws: CloudError.self) { _ = try await database("iCloud.many.c1000").listZones() }
            #expect(await serve.stop() == 0)

            let missingValue = await cloudstore("serve", "--port", "0", "--data", directory.path, "--container")
            #expect(missingValue.status != 0 && missingValue.standardError.contains("--container"), "\(missingValue.standardError)")
        }
    }
}
