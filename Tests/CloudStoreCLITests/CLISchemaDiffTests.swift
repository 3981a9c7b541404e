import CloudStore
import CloudStoreServer
import CloudStoreSync
import CloudStoreTesting
import Foundation
import Testing

/// `cloudstore schema diff --schema FILE --server URL --container ID --token T [--environment E] [--json]`.
@Suite("cloudstore schema diff")
struct CLISchemaDiffTests {
    /// A server whose production schema holds Notes v1 (saved with the operator's token).
    func withProductionV1(_ body: (URL) async throws -> Void) async throws {
        try await withCLITestServer(operatorToken: "operator-secret") { server in
            let database = HTTPCloudDatabase(
                baseURL: server.baseURL, container: "iCloud.cli.test", environment: .production, token: "operator-secret",
                deviceID: "test")
            _ = try await database.modifySchema(try StoreFixtures.schema(Fixtures.notesV1Schema).cloudSchema)
            try await body(server.baseURL)
        }
    }

    func diff(_ schema: String, _ url: URL, _ more: String...) async -> CLIResult {
        await cloudstore(
            ["schema", "diff", "--schema", schema, "--server", url.absoluteString, "--container", "iCloud.cli.test", "--token", "alice-token"]
                + more)
    }

    @Test func aNewerSchemaAgainstProduction_namesWhatWouldBeRefused() async throws {
        try await withProductionV1 { url in
            let result = await diff(Fixtures.notesSchema, url, "--environment", "production")
            #expect(result.status == 1, "the server would refuse saves: \(result.standardError)")
            #expect(result.outputLines.first == "schema \"Notes\" version 2 against production (server schema version 1)")
            #expect(result.outputLines.contains("fields only in the app     Note.created, Note.metadata, Note.priority"), "\(result.standardOutput)")
            #expect(result.outputLines.contains("fields only on the server  Note.rank"))
            #expect(result.outputLines.filter { $0.hasPrefix("refused: field Note.") }.count == 3)

            let json = await diff(Fixtures.notesSchema, url, "--environment", "production", "--json")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [String: Any])
            #expect(object["missingFields"] as? [String] == ["Note.created", "Note.metadata", "Note.priority"])
            #expect((object["refusals"] as? [String])?.count == 3)
        }
    }

    @Test func theSameSchema_isTakenWhole() async throws {
        try await withProductionV1 { url in
            let result = await diff(Fixtures.notesV1Schema, url, "--environment", "production")
            #expect(result.status == 0, "\(result.standardError)")
            #expect(result.outputLines.suffix(2) == ["no differences", "the server takes every save of this schema"])
            // Development adds what it lacks as saves carry it.
            let development = await diff(Fixtures.notesSchema, url)
            #expect(development.status == 0, "\(development.standardError)")
            #expect(development.outputLines.last == "the server takes every save of this schema")
        }
    }

    @Test func badInputs() async throws {
        try await withProductionV1 { url in
            let wrongToken = await cloudstore(
                "schema", "diff", "--schema", Fixtures.notesSchema, "--server", url.absoluteString, "--container", "iCloud.cli.test",
                "--token", "mallory-secret")
            #expect(wrongToken.isOneLineFailure(mentioning: "refused the token", "check --token"), "\(wrongToken.standardError)")
            #expect(!wrongToken.standardError.contains("mallory-secret"))
        }
        let environment = await cloudstore(
            "schema", "diff", "--schema", Fixtures.notesSchema, "--server", "http://127.0.0.1:1", "--container", "x", "--token", "t",
            "--environment", "staging")
        #expect(environment.status == 2 && environment.standardError.contains("--environment must be development or production"))
    }
}
