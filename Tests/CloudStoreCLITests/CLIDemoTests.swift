import Foundation
import Testing

/// `cloudstore demo [--keep]`.
@Suite("cloudstore demo", .timeLimit(.minutes(3)))
struct CLIDemoTests {
    /// The folder the demo says it worked in.
    func dataFolder(_ result: CLIResult) throws -> String {
        let line = try #require(result.outputLines.first { $0.hasPrefix("   device B  ") })
        return URL(fileURLWithPath: String(line.dropFirst("   device B  ".count))).deletingLastPathComponent().path
    }

    @Test func narratesTheStoryExitsZeroAndCleansUp() async throws {
        let result = await cloudstore("demo")
        #expect(result.status == 0, "\(result.standardError)")
        let text = result.standardOutput
        for line in [
            "1. Device A creates folder \"Ideas\" with 3 notes: \"Groceries\", \"Trip to Lisbon\", \"Book list\"\n",
            "2. Device A syncs: 4 changed objects to upload (1 Folder, 3 Note); nothing left to upload\n",
            "3. Device B syncs: fetched 4 records (1 Folder, 3 Note)\n",
            "   B now has folder \"Ideas\" with 3 notes: Book list, Groceries, Trip to Lisbon\n",
            "6. Device B syncs: 1 conflict on Note.title, resolved by the policy serverWins\n",
            "   winner: \"Groceries for Saturday\" (A's, from the server); B's pin is kept, since only B changed it (pinned = true)\n",
            "7. Device A syncs again: both devices agree: \"Groceries for Saturday\", pinned = true\n",
        ] {
            #expect(text.contains(line), "missing \(line) in:\n\(text)")
        }
        #expect(text.contains("title     local  \"Groceries (bring bags)\"  \"Groceries for Saturday\"  serverWins"), "\(text)")
        #expect(text.contains("author cloudstore.import"))
        #expect(text.contains("author demo  context B  1 change"))
        #expect(result.outputLines.last?.firstMatch(of: #/^Done in \d+\.\d\ds: 2 devices, 4 objects, 1 conflict resolved and logged; .* removed\.$/#) != nil, "\(result.outputLines.last ?? "")")
        let folder = try dataFolder(result)
        #expect(!FileManager.default.fileExists(atPath: folder), "\(folder) was removed")
        #expect(result.standardError.contains("demo: 8/8 (100%)"), "the progress line ends the run:\n\(result.standardError)")
    }

    @Test func keep_leavesTheDataAndSaysWhere() async throws {
        let result = await cloudstore("demo", "--keep")
        #expect(result.status == 0, "\(result.standardError)")
        let folder = try dataFolder(result)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        #expect(result.standardOutput.contains("Kept the data in \(folder): "))
        for file in ["A.sqlite", "B.sqlite", "server"] {
            #expect(FileManager.default.fileExists(atPath: folder + "/" + file), "\(file) kept")
        }
        let conflicts = await cloudstore("conflicts", "--store", folder + "/B.sqlite")
        #expect(conflicts.status == 0 && conflicts.outputLines.count == 2, "the kept store can be inspected")
    }

    @Test func onTheV1Schema_leavesStoresThatMigrate() async throws {
        let result = await cloudstore("demo", "--keep", "--schema", Fixtures.notesV1Schema)
        #expect(result.status == 0, "\(result.standardError)")
        let folder = try dataFolder(result)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        #expect(result.standardOutput.contains("schema \"Notes\" version 1"))
        let migrated = await cloudstore(
            "migrate", "--store", folder + "/B.sqlite", "--schema", Fixtures.notesSchema, "--migrations",
            CLIMigrateTests.migrations)
        #expect(migrated.status == 0, "\(migrated.standardError)")
        #expect(migrated.standardOutput.contains("version 1 → 2"))
    }

    @Test func debugTwo_logsEachRequest() async throws {
        let result = await cloudstore("demo", "--debug", "2")
        #expect(result.status == 0)
        #expect(result.standardError.contains(" info cloudstore.server: "), "\(result.standardError.prefix(2000))")
        #expect(!result.standardError.contains(" debug cloudstore."))
        let quiet = await cloudstore("demo")
        #expect(!quiet.standardError.contains(" info cloudstore."))
    }

    @Test func missingSchema_failsInOneLine() async {
        let result = await cloudstore("demo", "--schema", "/nonexistent/Notes.json")
        #expect(result.isOneLineFailure(mentioning: "no schema file at /nonexistent/Notes.json"))
        let unknown = await cloudstore("demo", "--frobnicate")
        #expect(unknown.status == 2)
    }
}
