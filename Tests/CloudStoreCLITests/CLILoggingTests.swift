@testable import CloudStoreCLI
import CloudStoreLogging
import CloudStoreTesting
import Foundation
import Logging
import Testing

/// `--debug N` and `CLOUDSTORE_DEBUG`: the levels of `DebugLevel` on the running command's
/// standard error, one command's lines apart from another's.
@Suite("cloudstore logging", .timeLimit(.minutes(ReliabilityRun.hangLimitMinutes)))
struct CLILoggingTests {
    /// Runs `cloudstore serve`, saves a note through it, stops it, and answers its standard error.
    func serveLog(_ arguments: [String] = [], environment: [String: String] = [:]) async throws -> String {
        try await TemporaryDirectory.with { directory in
            let serve = try await ServeRun.start(
                ["--data", directory.appendingPathComponent("data").path, "--tokens", try writeTokensFile(in: directory)]
                    + arguments,
                environment: environment)
            try await serve.saveANote()
            #expect(await serve.stop() == 0)
            return serve.captured.standardError
        }
    }

    /// The levels (`notice`, `info`, …) of the log lines in `log`.
    func levels(in log: String) -> Set<String> {
        Set(log.split(separator: "\n").compactMap { line in line.split(separator: " ").dropFirst().first.map(String.init) })
    }

    @Test func level0_showsNoLifecycleOrRequestLines() async throws {
        #expect(try await serveLog(["--debug", "0"]) == "")
        #expect(try await serveLog() == "", "0 is the default")
    }

    @Test func level1_showsLifecycleButNotRequests() async throws {
        let log = try await serveLog(["--debug", "1"])
        #expect(log.contains("notice cloudstore.server: storage ready"))
        #expect(levels(in: log) == ["notice"], "\(log)")
    }

    @Test func level2_showsEachRequestWithMillisecondTimestamps() async throws {
        let log = try await serveLog(["--debug", "2"])
        let line = try #require(log.split(separator: "\n").first { $0.contains("records modified") })
        #expect(line.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z info cloudstore\.server: records modified .*count=1.*/) != nil, "\(line)")
        #expect(levels(in: log).isSuperset(of: ["notice", "info"]))
        #expect(!levels(in: log).contains("debug"), "\(log)")
    }

    @Test func level3_showsEachRecordID() async throws {
        let log = try await serveLog(["--debug", "3"])
        #expect(log.contains("debug cloudstore.server: record written"))
        #expect(log.contains("record=N-1"))
    }

    /// Levels 1 to 3 show CloudStore's own lines; the libraries' (service-lifecycle, PostgresNIO,
    /// AsyncHTTPClient) appear only at 4, marked `from=<library>`, beside SQL and response bodies.
    @Test func level3_showsOnlyCloudStoresLines_level4AddsTheLibrariesMarkedAndSQLAndBodies() async throws {
        let level3 = try await serveLog(["--debug", "3"])
        #expect(level3.contains("debug cloudstore.server: record written"))
        #expect(!level3.contains("from="), "\(level3)")
        #expect(!level3.contains("Starting service"), "service-lifecycle's own lines are not CloudStore's")
        let level4 = try await serveLog(["--debug", "4"])
        #expect(level4.contains("from=service-lifecycle"))
        #expect(level4.contains("trace cloudstore.server: sql sql=INSERT"), "the server logs its SQL at 4")
        #expect(level4.contains("trace cloudstore.server: response body"), "and its response bodies")
        #expect(level4.contains("trace cloudstore.server: request body"))
    }

    @Test func environment_setsTheLevelAndDebugOptionWins() async throws {
        let fromEnvironment = try await serveLog(environment: ["CLOUDSTORE_DEBUG": "2"])
        #expect(fromEnvironment.contains("info cloudstore.server: records modified"))
        let overridden = try await serveLog(["--debug", "0"], environment: ["CLOUDSTORE_DEBUG": "4"])
        #expect(overridden == "")
    }

    @Test func invalidEnvironmentLevel_isReportedOnceAndMeansZero() async throws {
        let environment = ["CLOUDSTORE_DEBUG": "loud"]
        let first = try await serveLog(environment: environment)
        #expect(first == "cloudstore: CLOUDSTORE_DEBUG=loud is not a level from 0 to 4; using 0 (errors and warnings)\n")
        let second = await cloudstore("schema", "validate", Fixtures.notesSchema, environment: environment)
        #expect(second.status == 0)
        #expect(second.standardError.isEmpty, "reported once per process")
    }

    @Test func concurrentCommands_eachGetTheirOwnLinesAtTheirOwnLevel() async throws {
        async let quiet = serveLog(["--debug", "0"])
        async let chatty = serveLog(["--debug", "2"])
        let (quietLog, chattyLog) = try await (quiet, chatty)
        #expect(quietLog == "")
        #expect(chattyLog.components(separatedBy: "records modified").count == 2, "exactly its own request:\n\(chattyLog)")
    }

    @Test func loggersTheLibrariesCreate_writeToTheRunningCommand() {
        CommandLogging.bootstrap()
        CommandLogging.bootstrap()
        let captured = CapturedOutput()
        let context = CommandContext(output: captured.output, environment: [:], debugLevel: .lifecycle)
        CommandContext.$current.withValue(context) {
            let logger = Logger(label: "cloudstore.store")
            logger.notice("store opened", metadata: ["store": "/tmp/x.sqlite"])
            logger.info("a write")
        }
        #expect(captured.errorLines.count == 1)
        #expect(captured.standardError.contains("notice cloudstore.store: store opened store=/tmp/x.sqlite"))
    }
}
