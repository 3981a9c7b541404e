import CloudStore
import CloudStoreTesting
import Foundation
import Testing

/// `cloudstore conflicts --store PATH [--after SEQ] [--limit N] [--json]`.
@Suite("cloudstore conflicts")
struct CLIConflictsTests {
    @Test func conflictedStore_printsOneAlignedLinePerLosingValue() async throws {
        try await TemporaryDirectory.with { directory in
            let (a, b, note) = try await StoreFixtures.conflictedStores(in: directory)
            let result = await cloudstore("conflicts", "--store", b.path)
            #expect(result.status == 0, "\(result.standardError)")
            let lines = result.outputLines
            #expect(lines.count == 2, "\(result.standardOutput)")
            #expect(lines[0].hasPrefix("SEQ  DATE                      ENTITY  OBJECT"))
            let row = try #require(
                lines[1].firstMatch(of: #/^1    \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z  Note    ([0-9A-F-]{36})  title     local  "B's title"   "A's title"    serverWins$/#),
                "\(lines[1])")
            #expect(String(row.1) == note.uuidString)
            let columns = lines[0].ranges(of: "PROPERTY").first.map { lines[0].distance(from: lines[0].startIndex, to: $0.lowerBound) }
            #expect(columns == lines[1].ranges(of: "title").first.map { lines[1].distance(from: lines[1].startIndex, to: $0.lowerBound) })

            let json = await cloudstore("conflicts", "--store", b.path, "--json")
            let entries = try #require(try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [[String: Any]])
            #expect(entries.count == 1)
            #expect(entries.first?["losingValue"] as? String == "B's title", "values are JSON values, not quoted text")
            #expect(entries.first?["winningValue"] as? String == "A's title")
            #expect(entries.first?["policy"] as? String == "serverWins")
            #expect(entries.first?["sequence"] as? Int == 1)

            let after = await cloudstore("conflicts", "--store", b.path, "--after", "1")
            #expect(after.status == 0 && after.outputLines == ["no conflicts logged after 1"])
            let winner = await cloudstore("conflicts", "--store", a.path)
            #expect(winner.outputLines == ["no conflicts logged"])
        }
    }

    @Test func badInputs() async throws {
        try await TemporaryDirectory.with { directory in
            let (url, _, _) = try StoreFixtures.notesStore(in: directory)
            let local = await cloudstore("conflicts", "--store", url.path)
            #expect(local.status == 0 && local.outputLines == ["no conflicts logged"])

            let limit = await cloudstore("conflicts", "--store", url.path, "--limit", "0")
            #expect(limit.status == 2 && limit.standardError.contains("--limit must be at least 1"))
            let after = await cloudstore("conflicts", "--store", url.path, "--after", "soon")
            #expect(after.status == 2)

            let missing = await cloudstore("conflicts", "--store", "/nonexistent/notes.sqlite")
            #expect(missing.isOneLineFailure(mentioning: "no store at /nonexistent/notes.sqlite"))
            let text = try StoreFixtures.textFile(in: directory)
            let notAStore = await cloudstore("conflicts", "--store", text.path)
            #expect(notAStore.isOneLineFailure(mentioning: "is not a CloudStore store"))
        }
    }
}
