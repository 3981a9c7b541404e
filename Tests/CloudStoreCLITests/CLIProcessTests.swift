import CloudStoreCLI
import CloudStoreTesting
import Foundation
import Testing

/// The built `cloudstore` executable run as a child process, as a user runs it.
@Suite("cloudstore executable", .timeLimit(.minutes(3)))
struct CLIProcessTests {
    /// Runs the executable to its end and answers what it printed.
    func runExecutable(_ arguments: String...) async throws -> CLIResult {
        let process = Process()
        process.executableURL = try ServerProcess.cloudstoreExecutable()
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.filter { $0.key != "CLOUDSTORE_DEBUG" }
        let standardOutput = Pipe()
        let standardError = Pipe()
        process.standardOutput = standardOutput
        process.standardError = standardError
        let exited = AsyncStream<Int32> { continuation in
            process.terminationHandler = { continuation.yield($0.terminationStatus); continuation.finish() }
        }
        try process.run()
        let output = standardOutput.fileHandleForReading.readDataToEndOfFile()
        let error = standardError.fileHandleForReading.readDataToEndOfFile()
        var status: Int32 = -1
        for await code in exited { status = code }
        return CLIResult(
            status: status, standardOutput: String(decoding: output, as: UTF8.self),
            standardError: String(decoding: error, as: UTF8.self))
    }

    @Test func readerGoneAway_isNotACrash() async throws {
        // As `cloudstore schema init --dry-run | head -1`: standard output's reader closes early.
        let process = Process()
        process.executableURL = try ServerProcess.cloudstoreExecutable()
        process.arguments = ["schema", "init", "--schema", Fixtures.notesSchema, "--dry-run"]
        let standardOutput = Pipe()
        try standardOutput.fileHandleForReading.close()
        process.standardOutput = standardOutput
        process.standardError = FileHandle.nullDevice
        let exited = AsyncStream<Int32> { continuation in
            process.terminationHandler = { continuation.yield($0.terminationStatus); continuation.finish() }
        }
        try process.run()
        try standardOutput.fileHandleForWriting.close()
        var status: Int32 = -1
        for await code in exited { status = code }
        #expect(process.terminationReason == .exit)
        #expect(status == 0)
    }

    @Test func version() async throws {
        let result = try await runExecutable("--version")
        #expect(result.status == 0)
        #expect(result.standardOutput == "\(CloudStoreVersion.current)\n")
    }

    @Test func unknownFlag_exitsTwoWithTheUsage() async throws {
        let result = try await runExecutable("schema", "validate", "--frobnicate", Fixtures.notesSchema)
        #expect(result.status == 2)
        #expect(result.standardError.contains("Unknown option '--frobnicate'"))
        #expect(result.standardError.contains("Usage: cloudstore schema validate"))
    }

    @Test func schemaValidate_ofTheNotesSchema() async throws {
        let result = try await runExecutable("schema", "validate", Fixtures.notesSchema)
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.contains("\"Notes\" version 2 is valid: 3 entities"))
        let missing = try await runExecutable("schema", "validate", "/nonexistent/Notes.json")
        #expect(missing.isOneLineFailure(mentioning: "no schema file at /nonexistent/Notes.json"))
    }
}
