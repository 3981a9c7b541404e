import CloudStoreCLI
import CloudStoreSync
import CloudStoreTesting
import Foundation
import Testing

/// `cloudstore serve` run in process: it serves, stops, and refuses bad files with one line.
@Suite("cloudstore serve", .timeLimit(.minutes(1)))
struct CLIServeTests {
    @Test func serve_printsWhereItListensServesAndStops() async throws {
        try await TemporaryDirectory.with { directory in
            let data = directory.appendingPathComponent("data")
            let serve = try await ServeRun.start(["--data", data.path, "--tokens", try writeTokensFile(in: directory)])
            #expect(
                serve.captured.standardOutput
                    == "cloudstore: listening on http://127.0.0.1:\(serve.port) (storage: SQLite in \(data.path))\n")
            try await serve.saveANote()
            #expect(FileManager.default.fileExists(atPath: data.appendingPathComponent("iCloud.cli.test.sqlite").path))
            #expect(await serve.stop() == 0)
            #expect(serve.captured.standardError.isEmpty, "level 0 logs nothing when all goes well")
        }
    }

    @Test func wrongToken_isRefusedByTheServer() async throws {
        try await TemporaryDirectory.with { directory in
            let serve = try await ServeRun.start([
                "--data", directory.appendingPathComponent("data").path, "--tokens", try writeTokensFile(in: directory),
            ])
            await #expect(throws: CloudError.self) { _ = try await serve.database(token: "mallory-token").listZones() }
            #expect(await serve.stop() == 0)
        }
    }

    @Test func missingTokensFile_failsWithOneLineNamingIt() async throws {
        try await TemporaryDirectory.with { directory in
            let missing = directory.appendingPathComponent("nope.json").path
            let result = await cloudstore("serve", "--port", "0", "--data", directory.path, "--tokens", missing)
            #expect(result.isOneLineFailure(mentioning: "cannot read the tokens file \(missing)"), "\(result.standardError)")
        }
    }

    @Test func invalidTokensFile_failsWithOneLineShowingTheFormat() async throws {
        try await TemporaryDirectory.with { directory in
            let tokens = directory.appendingPathComponent("tokens.json")
            try Data("[1, 2]".utf8).write(to: tokens)
            let result = await cloudstore("serve", "--port", "0", "--data", directory.path, "--tokens", tokens.path)
            #expect(result.isOneLineFailure(mentioning: tokens.path, "is not a JSON object of strings"))
        }
    }

    @Test func missingServerKeyFile_failsWithOneLineNamingIt() async throws {
        try await TemporaryDirectory.with { directory in
            let pem = directory.appendingPathComponent("key.pem").path
            let result = await cloudstore("serve", "--port", "0", "--data", directory.path, "--server-key", "k1=\(pem)")
            #expect(result.isOneLineFailure(mentioning: "cannot read the server key file \(pem) of key k1"))
        }
    }

    @Test func portInUse_failsWithOneLine() async throws {
        let server = try await TestServer.start()
        try await TemporaryDirectory.with { directory in
            let result = await cloudstore(
                "serve", "--port", "\(server.port)", "--data", directory.path, "--tokens", try writeTokensFile(in: directory))
            #expect(result.isOneLineFailure(mentioning: "in use"), "\(result.standardError)")
        }
        try await server.shutdown()
    }
}
