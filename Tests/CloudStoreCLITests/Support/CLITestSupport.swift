import CloudStoreCLI
import CloudStoreServer
import CloudStoreTesting
import Foundation
import Testing

/// What one in-process run of `cloudstore` printed and answered.
struct CLIResult {
    var status: Int32
    var standardOutput: String
    var standardError: String

    /// The non-empty lines of standard error.
    var errorLines: [String] {
        standardError.split(separator: "\n").map(String.init)
    }

    /// The lines of standard output.
    var outputLines: [String] {
        standardOutput.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
    }

    /// Whether the run failed as a runtime failure must: status 1 and exactly one line
    /// `cloudstore: error: …` on standard error, containing every one of `fragments`.
    func isOneLineFailure(mentioning fragments: String...) -> Bool {
        status == 1 && errorLines.count == 1 && errorLines[0].hasPrefix("cloudstore: error: ")
            && fragments.allSatisfy(errorLines[0].contains)
    }
}

/// Runs `cloudstore` in process as a user would type it; the environment is only what the test
/// gives (not the test process's), so `CLOUDSTORE_DEBUG` in the shell does not change the results.
func cloudstore(_ arguments: String..., environment: [String: String] = [:]) async -> CLIResult {
    await cloudstore(arguments, environment: environment)
}

func cloudstore(_ arguments: [String], environment: [String: String] = [:]) async -> CLIResult {
    let captured = CapturedOutput()
    let status = await CloudStoreCommand.run(arguments, output: captured.output, environment: environment)
    return CLIResult(status: status, standardOutput: captured.standardOutput, standardError: captured.standardError)
}

/// Paths in the package for the tests.
enum Fixtures {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let notesSchema = root.appendingPathComponent("Schema/Notes.json").path
    static let notesV1Schema = root.appendingPathComponent("Schema/Notes.v1.json").path
    /// A mirrored store as the previous release wrote it (see the README beside it): copy it
    /// before use.
    static let previousReleaseStore = root.appendingPathComponent("Tests/CloudStoreTests/Fixtures/LegacyMirror/A.sqlite")
}

/// Runs `body` with an in-process server on a free loopback port, container `iCloud.cli.test`,
/// whose only user is `alice-token`, and shuts it down after.
func withCLITestServer(operatorToken: String? = nil, _ body: (CloudServer) async throws -> Void) async throws {
    try await TemporaryDirectory.with { directory in
        let server = try await CloudServer.start(
            configuration: ServerConfiguration(
                port: 0, storage: .sqlite(directory: directory.path), containers: ["iCloud.cli.test"],
                users: ["alice-token": "_alice"], operatorToken: operatorToken))
        do {
            try await body(server)
        } catch {
            try await server.shutdown()
            throw error
        }
        try await server.shutdown()
    }
}
