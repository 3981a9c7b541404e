import CloudStore
import CloudStoreTesting
import Foundation
import Testing

/// `cloudstore history --store PATH [--after TOKEN] [--author A] [--entity E] [--limit N] [--json]`.
@Suite("cloudstore history")
struct CLIHistoryTests {
    @Test func listsEveryTransactionWithItsChangesAligned() async throws {
        try await TemporaryDirectory.with { directory in
            let (url, folder, note) = try StoreFixtures.notesStore(in: directory)
            let result = await cloudstore("history", "--store", url.path)
            #expect(result.status == 0, "\(result.standardError)")
            let lines = result.outputLines
            #expect(lines.count == 8, "\(result.standardOutput)")
            #expect(lines[0].firstMatch(of: #/^1@[0-9A-F-]{36}  \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z  author app  context editor  3 changes$/#) != nil, "\(lines[0])")
            #expect(lines[1] == "  insert  Folder  \(folder.uuidString)")
            #expect(lines[2] == "  insert  Note    \(note.uuidString)")
            #expect(lines[5] == "  update  Note  \(note.uuidString)  pinned, title")
            #expect(lines[6].contains("author importer  context -  1 change"))
            #expect(lines[7].hasPrefix("  delete  Note  ") && lines[7].hasSuffix("  title=\"Doomed\""), "\(lines[7])")
        }
    }

    @Test func filtersByAuthorEntityTokenAndLimit() async throws {
        try await TemporaryDirectory.with { directory in
            let (url, _, note) = try StoreFixtures.notesStore(in: directory)
            let byImporter = await cloudstore("history", "--store", url.path, "--author", "importer")
            #expect(byImporter.outputLines.count == 2 && byImporter.outputLines[0].contains("author importer"))

            let folders = await cloudstore("history", "--store", url.path, "--entity", "Folder")
            #expect(folders.outputLines.count == 2 && folders.outputLines[1].contains("insert  Folder"), "\(folders.standardOutput)")

            let first = await cloudstore("history", "--store", url.path, "--limit", "1")
            #expect(first.outputLines.count == 4)
            let token = try #require(first.outputLines.first?.split(separator: " ").first.map(String.init))
            let after = await cloudstore("history", "--store", url.path, "--after", token, "--limit", "1")
            #expect(after.outputLines == [after.outputLines[0], "  update  Note  \(note.uuidString)  pinned, title"])
            #expect(after.outputLines[0].hasPrefix("2@"))

            let none = await cloudstore("history", "--store", url.path, "--author", "nobody")
            #expect(none.status == 0 && none.outputLines == ["no transactions"])
        }
    }

    @Test func json_isMachineReadable() async throws {
        try await TemporaryDirectory.with { directory in
            let (url, _, note) = try StoreFixtures.notesStore(in: directory)
            let result = await cloudstore("history", "--store", url.path, "--json")
            #expect(result.status == 0)
            let transactions = try #require(
                try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [[String: Any]])
            #expect(transactions.count == 3)
            #expect(transactions[1]["author"] as? String == "app")
            #expect((transactions[1]["timestamp"] as? String)?.hasSuffix("Z") == true)
            let change = try #require((transactions[1]["changes"] as? [[String: Any]])?.first)
            #expect(change["id"] as? String == note.uuidString)
            #expect(change["type"] as? String == "update")
            #expect(change["updatedProperties"] as? [String] == ["pinned", "title"])
            let deleted = try #require((transactions[2]["changes"] as? [[String: Any]])?.first)
            #expect(deleted["tombstone"] as? [String: String] == ["title": "Doomed"], "values are JSON values, not quoted text")
        }
    }

    @Test func purgedToken_failsWithTheStoresExplanation() async throws {
        try await TemporaryDirectory.with { directory in
            let (url, _, _) = try StoreFixtures.notesStore(in: directory)
            let store = try PersistentStore(url: url, schema: try StoreFixtures.schema())
            let transactions = try store.history(after: nil)
            try store.purgeHistory(through: transactions[1].token)
            try store.close()
            let result = await cloudstore("history", "--store", url.path, "--after", transactions[0].token.description)
            #expect(result.isOneLineFailure(mentioning: "history after token \(transactions[0].token) was purged", "re-read the whole store"), "\(result.standardError)")
        }
    }

    @Test func opensTheStoreWithoutMigratingIt() async throws {
        try await TemporaryDirectory.with { directory in
            let (url, _) = try StoreFixtures.notesV1Store(in: directory)
            let result = await cloudstore("history", "--store", url.path)
            #expect(result.status == 0, "\(result.standardError)")
            #expect(result.outputLines.count == 2)
            #expect(try PersistentStore.fileInfo(at: url)?.schemaVersion == 1)
        }
    }

    @Test func badInputs() async throws {
        try await TemporaryDirectory.with { directory in
            let (url, _, _) = try StoreFixtures.notesStore(in: directory)
            let badToken = await cloudstore("history", "--store", url.path, "--after", "yesterday")
            #expect(badToken.status == 2)
            #expect(badToken.standardError.contains("not a history token"))

            let badLimit = await cloudstore("history", "--store", url.path, "--limit", "0")
            #expect(badLimit.status == 2)

            let entity = await cloudstore("history", "--store", url.path, "--entity", "Nope")
            #expect(entity.isOneLineFailure(mentioning: "no entity Nope", "Folder, Note, Tag"))

            let missing = await cloudstore("history", "--store", directory.appendingPathComponent("none.sqlite").path)
            #expect(missing.isOneLineFailure(mentioning: "no store at"))
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("none.sqlite").path))

            let text = try StoreFixtures.textFile(in: directory)
            let notAStore = await cloudstore("history", "--store", text.path)
            #expect(notAStore.isOneLineFailure(mentioning: "is not a CloudStore store"))

            let unknownFlag = await cloudstore("history", "--store", url.path, "--frobnicate")
            #expect(unknownFlag.status == 2)
        }
    }
}
