import CloudStoreLogging
import Foundation
import Logging
import Testing

@Suite("CLOUDSTORE_DEBUG levels and log lines")
struct DebugLevelTests {
    @Test func levelsMapToSwiftLogLevels() {
        #expect(DebugLevel.errors.logLevel == .warning)
        #expect(DebugLevel.lifecycle.logLevel == .notice)
        #expect(DebugLevel.requests.logLevel == .info)
        #expect(DebugLevel.records.logLevel == .debug)
        #expect(DebugLevel.everything.logLevel == .trace)
    }

    @Test func parsing() {
        #expect(DebugLevel(parsing: "3") == .records)
        #expect(DebugLevel(parsing: " 0 ") == .errors)
        #expect(DebugLevel(parsing: "5") == nil)
        #expect(DebugLevel(parsing: "loud") == nil)
    }

    @Test func anInvalidValueIsReportedOnceAndMeansZero() {
        var reports: [String] = []
        let value = "loud-\(UUID().uuidString)"
        for _ in 0..<3 {
            let level = DebugLevel.level(fromEnvironment: ["CLOUDSTORE_DEBUG": value]) { reports.append($0) }
            #expect(level == .errors)
        }
        #expect(reports == ["cloudstore: CLOUDSTORE_DEBUG=\(value) is not a level from 0 to 4; using 0 (errors and warnings)"])
        #expect(DebugLevel.level(fromEnvironment: [:]) { _ in Issue.record("no report when unset") } == .errors)
        #expect(DebugLevel.level(fromEnvironment: ["CLOUDSTORE_DEBUG": "2"]) { _ in } == .requests)
    }

    @Test func linesHaveMillisecondTimestampsAndSortedMetadata() {
        let line = CloudStoreLogHandler.format(
            date: Date(timeIntervalSince1970: 1_763_700_000.123), level: .notice, label: "cloudstore.mirroring",
            message: "export finished", metadata: ["duration": "0.031s", "count": "12"])
        #expect(line == "2025-11-21T04:40:00.123Z notice cloudstore.mirroring: export finished count=12 duration=0.031s")
    }
}

@Suite("LogFormat and library loggers")
struct LogFormatTests {
    @Test func durationsAreWrittenOneWay() {
        #expect(LogFormat.duration(.microseconds(420)) == "0.4 ms")
        #expect(LogFormat.duration(.milliseconds(12) + .microseconds(340)) == "12.3 ms")
        #expect(LogFormat.duration(.milliseconds(2503)) == "2503.0 ms")
        #expect(LogFormat.duration(.seconds(12) + .milliseconds(480)) == "12.5 s")
        #expect(LogFormat.duration(seconds: 0.25) == "250.0 ms")
    }

    @Test func aLibrarysLoggerIsSilentBelowTraceAndMarkedAtTrace() {
        var logger = Logger(label: "cloudstore.http")
        logger.logLevel = .debug
        #expect(logger.forLibrary("async-http-client").logLevel == .critical)
        logger.logLevel = .trace
        let library = logger.forLibrary("async-http-client")
        #expect(library.logLevel == .trace)
        #expect(library[metadataKey: "from"] == "async-http-client")
    }
}
