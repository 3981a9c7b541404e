import CloudStore
import CloudStoreTesting
import Foundation
import Testing

/// `cloudstore migrate --store PATH --schema FILE [--migrations DIR]`.
@Suite("cloudstore migrate")
struct CLIMigrateTests {
    static let migrations = Fixtures.root.appendingPathComponent("Migrations").path

    @Test func v1Store_migratesToV2WithTheExampleStepAndSaysWhatItDid() async throws {
        try await TemporaryDirectory.with { directory in
            let (url, note) = try StoreFixtures.notesV1Store(in: directory)
            let result = await cloudstore(
                "migrate", "--store", url.path, "--schema", Fixtures.notesSchema, "--migrations", Self.migrations)
            #expect(result.status == 0, "\(result.standardError)")
            #expect(result.outputLines.first?.hasPrefix("\(url.path): schema \"Notes\" version 1 → 2, ") == true)
            for line in ["  rename Note.rank to priority", "  add Note.created", "  step 2 2-clamp-priority.sql"] {
                #expect(result.outputLines.contains(line), "missing \(line) in:\n\(result.standardOutput)")
            }
            #expect(result.outputLines.last?.hasPrefix("migrated to version 2 in ") == true)
            let info = try #require(try PersistentStore.fileInfo(at: url))
            #expect(info.schemaVersion == 2)
            let store = try PersistentStore(url: url, schema: try StoreFixtures.schema())
            defer { try? store.close() }
            let migrated = try await store.read { try $0.fetchSnapshot(entityName: "Note", id: note) }
            #expect(migrated?["priority"] == .int64(3), "the step clamped rank 7 to priority 3")

            let again = await cloudstore("migrate", "--store", url.path, "--schema", Fixtures.notesSchema)
            #expect(again.status == 0)
            #expect(again.outputLines == ["\(url.path): already at version 2 of schema \"Notes\"; nothing to do"])
        }
    }

    @Test func previousReleaseMirroredStore_movesToTheCurrentLayout_andStatusCountsItsUnsentChanges() async throws {
        try await TemporaryDirectory.with { directory in
            let url = directory.appendingPathComponent("A.sqlite")
            try FileManager.default.copyItem(at: Fixtures.previousReleaseStore, to: url)
            let result = await cloudstore("migrate", "--store", url.path, "--schema", Fixtures.notesSchema)
            #expect(result.status == 0, "\(result.standardError)")
            #expect(
                result.outputLines.dropLast() == [
                    "\(url.path): schema \"Notes\" version 2, 1 change",
                    "  move the mirroring metadata of the previous release to this release's layout (unsent changes become pending uploads)",
                ], "\(result.standardOutput)")
            #expect(result.outputLines.last?.hasPrefix("migrated to version 2 in ") == true)
            #expect(try PersistentCloudContainer.holdsLegacyMirrorLayout(at: url) == false)

            // The fixture's README: four notes and one tag link changed since the last upload.
            let status = await cloudstore("status", "--store", url.path)
            #expect(status.standardOutput.contains("pending uploads   5\n"), "\(status.standardOutput)\(status.standardError)")
            let again = await cloudstore("migrate", "--store", url.path, "--schema", Fixtures.notesSchema)
            #expect(again.outputLines == ["\(url.path): already at version 2 of schema \"Notes\"; nothing to do"])
        }
    }

    /// Without --migrations, the steps kept where the project keeps them (Migrations/ beside the
    /// schema's folder) run, and the output says from where: they are never skipped for want of a flag.
    @Test func withoutMigrationsOption_findsTheStepsBesideTheSchemaAndSaysSo() async throws {
        try await TemporaryDirectory.with { directory in
            let (url, note) = try StoreFixtures.notesV1Store(in: directory)
            let (schema, project) = try StoreFixtures.projectWithMigrationStep(in: directory)

            let result = await cloudstore("migrate", "--store", url.path, "--schema", schema.path)
            #expect(result.status == 0, "\(result.standardError)")
            #expect(result.outputLines.contains("migration steps from \(project.standardizedFileURL.path)/Migrations/Notes"), "\(result.standardOutput)")
            #expect(result.outputLines.contains("  step 2 2-set-priority.sql"), "\(result.standardOutput)")
            let store = try PersistentStore(url: url, schema: try StoreFixtures.schema())
            defer { try? store.close() }
            let migrated = try await store.read { try $0.fetchSnapshot(entityName: "Note", id: note) }
            #expect(migrated?["priority"] == .int64(2), "the step found beside the schema ran")
        }
    }

    @Test func failingStep_namesItAndLeavesTheStoreAsItWas() async throws {
        try await TemporaryDirectory.with { directory in
            let (url, _) = try StoreFixtures.notesV1Store(in: directory)
            let steps = directory.appendingPathComponent("steps/Notes", isDirectory: true)
            try FileManager.default.createDirectory(at: steps, withIntermediateDirectories: true)
            try Data("UPDATE \"NoSuchTable\" SET x = 1;".utf8).write(to: steps.appendingPathComponent("2-broken.sql"))
            let result = await cloudstore(
                "migrate", "--store", url.path, "--schema", Fixtures.notesSchema, "--migrations",
                directory.appendingPathComponent("steps").path)
            #expect(result.isOneLineFailure(mentioning: "2-broken.sql", "NoSuchTable"), "\(result.standardError)")
            #expect(try PersistentStore.fileInfo(at: url)?.schemaVersion == 1, "the store was not migrated")
        }
    }

    @Test func schemaOlderThanTheStore_isRefused() async throws {
        try await TemporaryDirectory.with { directory in
            let (url, _, _) = try StoreFixtures.notesStore(in: directory)
            let result = await cloudstore("migrate", "--store", url.path, "--schema", Fixtures.notesV1Schema)
            #expect(result.isOneLineFailure(mentioning: url.path, "version 2", "newer than this app's version 1"), "\(result.standardError)")
        }
    }

    @Test func badInputs_failWithOneLine() async throws {
        try await TemporaryDirectory.with { directory in
            let text = try StoreFixtures.textFile(in: directory)
            let notAStore = await cloudstore("migrate", "--store", text.path, "--schema", Fixtures.notesSchema)
            #expect(notAStore.isOneLineFailure(mentioning: text.path, "is not a CloudStore store"), "\(notAStore.standardError)")
            #expect(try String(contentsOf: text, encoding: .utf8) == "not a database\n")

            let missing = await cloudstore("migrate", "--store", directory.appendingPathComponent("none.sqlite").path, "--schema", Fixtures.notesSchema)
            #expect(missing.isOneLineFailure(mentioning: "no store at", "none.sqlite"))
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("none.sqlite").path))

            let (url, _) = try StoreFixtures.notesV1Store(in: directory)
            let noSchema = await cloudstore("migrate", "--store", url.path, "--schema", "/nonexistent/Notes.json")
            #expect(noSchema.isOneLineFailure(mentioning: "no schema file at /nonexistent/Notes.json"))

            let invalid = directory.appendingPathComponent("Invalid.json")
            try Data("{\"name\": \"Notes\", \"version\": 2, \"entities\": [{\"name\": \"Note\", \"attributes\": [{\"name\": \"title\", \"type\": \"string\"}]}]}".utf8).write(to: invalid)
            let invalidSchema = await cloudstore("migrate", "--store", url.path, "--schema", invalid.path)
            #expect(invalidSchema.isOneLineFailure(mentioning: "Note.title"), "\(invalidSchema.standardError)")

            let noSteps = await cloudstore(
                "migrate", "--store", url.path, "--schema", Fixtures.notesSchema, "--migrations", "/nonexistent/Migrations")
            #expect(noSteps.isOneLineFailure(mentioning: "no migrations folder at /nonexistent/Migrations"))
            #expect(try PersistentStore.fileInfo(at: url)?.schemaVersion == 1)

            let usage = await cloudstore("migrate", "--schema", Fixtures.notesSchema)
            #expect(usage.status == 2)
            #expect(usage.standardError.contains("Missing expected argument '--store <store>'"))
        }
    }
}
