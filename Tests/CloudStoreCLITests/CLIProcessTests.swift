import CloudStoreCLI
import CloudStoreTesting
import Foundation
import Testing

/// The built `cloudstore` executable run as a child process, as a user runs it.
@Suite("cloudstore executable", .timeLimit(.minutes(ReliabilityRun.hangLimitMinutes)))
struct CLIProcessTests {
    /// Runs the executable to its end and answers what it printed.
    func runExecutable(_ arguments: String...) async throws -> CLIResult {
        let standardOutput = Pipe()
        let standardError = Pipe()
        let child = try ChildProcess.spawn(
            try ServerProcess.cloudstoreExecutable(), arguments,
            environment: ProcessInfo.processInfo.environment.filter { $0.key != "CLOUDSTORE_DEBUG" },
            standardOutput: .pipe(standardOutput), standardError: .pipe(standardError))
        let output = standardOutput.fileHandleForReading.readDataToEndOfFile()
        let error = standardError.fileHandleForReading.readDataToEndOfFile()
        let status = await child.waitForExit().status
        return CLIResult(
            status: status, standardOutput: String(decoding: output, as: UTF8.self),
            standardError: String(decoding: error, as: UTF8.self))
    }

    @Test func readerGoneAway_isNotACrash() async throws {
        // As `cloudstore schema init --dry-run | head -1`: standard output's reader closes early.
        let standardOutput = Pipe()
        try standardOutput.fileHandleForReading.close()
        let child = try ChildProcess.spawn(
            try ServerProcess.cloudstoreExecutable(), ["schema", "init", "--schema", Fixtures.notesSchema, "--dry-run"],
            standardOutput: .pipe(standardOutput), standardError: .null)
        #expect(await child.waitForExit() == .exited(0), "not ended by SIGPIPE, which a shell's pipeline leaves at its default")
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
