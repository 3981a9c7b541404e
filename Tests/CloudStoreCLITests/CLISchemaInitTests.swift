import CloudStore
import CloudStoreServer
import CloudStoreSync
import CloudStoreTesting
import Foundation
import Testing

/// `cloudstore schema init --schema FILE --server URL --container ID --token T [--dry-run]`.
@Suite("cloudstore schema init")
struct CLISchemaInitTests {
    /// Runs `body` with a server on a free loopback port whose only user is `alice-token`.
    func withServer(_ body: (URL) async throws -> Void) async throws {
        try await withCLITestServer { server in try await body(server.baseURL) }
    }

    @Test func dryRun_printsTheRecordTypesAndContactsNothing() async throws {
        let result = await cloudstore("schema", "init", "--schema", Fixtures.notesSchema, "--dry-run")
        #expect(result.status == 0, "\(result.standardError)")
        let cloudSchema = try StoreFixtures.schema().cloudSchema
        #expect(result.outputLines.first == "schema \"Notes\" version 2: \(cloudSchema.recordTypes.count) record types (dry run: nothing was sent)")
        for recordType in cloudSchema.recordTypes {
            #expect(result.outputLines.contains("\(recordType.name)  (\(recordType.fields.count) fields)"), "\(recordType.name)")
        }
        #expect(result.outputLines.contains { $0.hasPrefix("  title ") && $0.contains("STRING") && $0.hasSuffix("queryable") })
        // A server that does not exist is never contacted.
        let unreachable = await cloudstore(
            "schema", "init", "--schema", Fixtures.notesSchema, "--server", "http://127.0.0.1:1", "--container", "iCloud.x",
            "--token", "t", "--dry-run")
        #expect(unreachable.status == 0 && unreachable.standardOutput == result.standardOutput)
    }

    @Test func uniquenessConstraintsAreListedAndSaved() async throws {
        try await withServer { url in
            try await TemporaryDirectory.with { directory in
                var schema = try StoreFixtures.schema()
                let folder = try #require(schema.entities.firstIndex { $0.name == "Folder" })
                schema.entities[folder].uniquenessConstraints = [["title"]]
                let file = directory.appendingPathComponent("Unique.json")
                try schema.fileData().write(to: file)
                let result = await cloudstore(
                    "schema", "init", "--schema", file.path, "--server", url.absoluteString, "--container", "iCloud.cli.test",
                    "--token", "alice-token")
                #expect(result.status == 0, "\(result.standardError)")
                #expect(result.outputLines.contains("  unique per zone: title"), "\(result.standardOutput)")
                let database = HTTPCloudDatabase(baseURL: url, container: "iCloud.cli.test", token: "alice-token", deviceID: "test")
                #expect(try await database.fetchSchema().recordType(named: "Folder")?.uniquenessConstraints == [["title"]])
            }
        }
    }

    @Test func server_savesTheRecordTypes() async throws {
        try await withServer { url in
            let result = await cloudstore(
                "schema", "init", "--schema", Fixtures.notesSchema, "--server", url.absoluteString, "--container",
                "iCloud.cli.test", "--token", "alice-token")
            #expect(result.status == 0, "\(result.standardError)")
            #expect(result.outputLines.first?.hasPrefix("schema \"Notes\" version 2: 4 record types saved on \(url.absoluteString) container iCloud.cli.test (development)") == true, "\(result.standardOutput)")
            let database = HTTPCloudDatabase(baseURL: url, container: "iCloud.cli.test", token: "alice-token", deviceID: "test")
            let saved = try await database.fetchSchema()
            #expect(Set(saved.recordTypes.map(\.name)) == Set(try StoreFixtures.schema().cloudSchema.recordTypes.map(\.name)))
        }
    }

    /// `--store` holding an older version migrates with the steps kept beside the schema, as
    /// `cloudstore migrate` does, and says where they came from.
    @Test func store_migratesWithTheStepsBesideTheSchemaAndSaysSo() async throws {
        try await withServer { url in
            try await TemporaryDirectory.with { directory in
                let (store, note) = try StoreFixtures.notesV1Store(in: directory)
                let (schema, project) = try StoreFixtures.projectWithMigrationStep(in: directory)

                let result = await cloudstore(
                    "schema", "init", "--schema", schema.path, "--store", store.path, "--server", url.absoluteString,
                    "--container", "iCloud.cli.test", "--token", "alice-token")
                #expect(result.status == 0, "\(result.standardError)")
                #expect(
                    result.outputLines.first
                        == "\(store.path): schema \"Notes\" version 1 → 2; migration steps from \(project.standardizedFileURL.path)/Migrations/Notes",
                    "\(result.standardOutput)")
                let migrated = try PersistentStore(url: store, schema: try StoreFixtures.schema())
                defer { try? migrated.close() }
                let snapshot = try await migrated.read { try $0.fetchSnapshot(entityName: "Note", id: note) }
                #expect(snapshot?["priority"] == .int64(2), "the step found beside the schema ran")
            }
        }
    }

    @Test func wrongToken_isRefusedInOneLineWithoutTheToken() async throws {
        try await withServer { url in
            let result = await cloudstore(
                "schema", "init", "--schema", Fixtures.notesSchema, "--server", url.absoluteString, "--container",
                "iCloud.cli.test", "--token", "mallory-secret")
            #expect(result.isOneLineFailure(mentioning: "refused the token", "check --token"), "\(result.standardError)")
            #expect(!result.standardError.contains("mallory-secret"))
        }
    }

    @Test func unreachableServer_saysSoInOneLine() async throws {
        // The address of a loopback server that has stopped: nothing listens there any more.
        var stopped: URL?
        try await withServer { url in stopped = url }
        let url = try #require(stopped).absoluteString
        let result = await cloudstore(
            "schema", "init", "--schema", Fixtures.notesSchema, "--server", url, "--container", "iCloud.cli.test",
            "--token", "alice-token")
        #expect(result.isOneLineFailure(mentioning: "cannot reach the server at \(url)", "check --server"), "\(result.standardError)")
    }

    @Test func badInputs() async throws {
        let noServer = await cloudstore("schema", "init", "--schema", Fixtures.notesSchema)
        #expect(noServer.status == 2)
        #expect(noServer.standardError.contains("required unless --dry-run"))
        let badURL = await cloudstore(
            "schema", "init", "--schema", Fixtures.notesSchema, "--server", "nowhere", "--container", "c", "--token", "t")
        #expect(badURL.status == 2)
        let missing = await cloudstore("schema", "init", "--schema", "/nonexistent/Notes.json", "--dry-run")
        #expect(missing.isOneLineFailure(mentioning: "no schema file at /nonexistent/Notes.json"))
        try await TemporaryDirectory.with { directory in
            let invalid = directory.appendingPathComponent("Invalid.json")
            try Data("{\"name\": \"Notes\", \"version\": 1, \"entities\": [{\"name\": \"Note\", \"attributes\": [{\"name\": \"title\", \"type\": \"string\"}]}]}".utf8).write(to: invalid)
            let result = await cloudstore("schema", "init", "--schema", invalid.path, "--dry-run")
            #expect(result.isOneLineFailure(mentioning: "Note.title"), "\(result.standardError)")
        }
        let unknown = await cloudstore("schema", "init", "--schema", Fixtures.notesSchema, "--dry-run", "--frobnicate")
        #expect(unknown.status == 2)
    }
}
