import CloudStoreTesting
import Foundation
import Testing

/// `cloudstore demo [--keep]`.
@Suite("cloudstore demo", .timeLimit(.minutes(ReliabilityRun.hangLimitMinutes)))
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
        #expect(result.outputLines.last?.firstMatch(of: #/^Done in \d+\.\d\ds: 4 devices, 4 objects, 1 conflict resolved and logged, a folder shared with 2 users; .* removed\.$/#) != nil, "\(result.outputLines.last ?? "")")
        let folder = try dataFolder(result)
        #expect(!FileManager.default.fileExists(atPath: folder), "\(folder) was removed")
        #expect(result.standardError.contains("demo: 16/16 (100%)"), "the progress line ends the run:\n\(result.standardError)")
    }

    /// The sharing chapter: alice shares the folder, bob's edit reaches her, carol's is refused,
    /// bob leaves and the activity log says so.
    @Test func sharingChapter_narratesJoiningEditingARefusalAndLeaving() async throws {
        let result = await cloudstore("demo")
        #expect(result.status == 0, "\(result.standardError)")
        let lines = result.outputLines
        let text = result.standardOutput
        let chapter = try #require(lines.firstIndex(of: "Sharing: devices A and B are alice's; bob and carol each have a device of their own"), "\(text)")
        #expect(lines[chapter + 1].hasPrefix("   device bob  ") && lines[chapter + 2].hasPrefix("   device carol  "))
        let shared = try #require(
            text.firstMatch(of: #/\n9\. Device A: alice shares folder "Ideas" with bob \(READ_WRITE\) and carol \(READ_ONLY\); short GUID (\S+)\n/#),
            "\(text)")
        #expect(text.contains("       short GUID         \(shared.1)\n"), "the share as cloudstore shares prints it")
        #expect(lines.contains { $0.firstMatch(of: #/^       _bob +READ_WRITE +INVITED$/#) != nil }, "\(text)")
        #expect(lines.contains { $0.firstMatch(of: #/^       _carol +READ_ONLY +INVITED$/#) != nil }, "\(text)")
        for line in [
            "10. Bob accepts with the short GUID: folder \"Ideas\" arrives with 3 notes: Book list, Groceries for Saturday, Trip to Lisbon\n",
            "11. Carol accepts too: her permission is READ_ONLY\n",
            "12. Bob retitles note \"Book list\" \"Book list: Dune, Middlemarch\" and syncs\n",
            "13. Device A syncs: alice has bob's edit, \"Book list: Dune, Middlemarch\"; joined: _bob, _carol\n",
            "14. Carol retitles note \"Trip to Lisbon\" \"Trip to Porto\": refused before anything is saved:\n",
            "15. Bob leaves the share: his copy goes (0 notes left on his device)\n",
            "16. Device A syncs: alice's share activity, as cloudstore shares prints it:\n",
        ] {
            #expect(text.contains(line), "missing \(line) in:\n\(text)")
        }
        let refusal = try #require(lines.firstIndex { $0.hasPrefix("14. ") }.map { lines[$0 + 1] })
        #expect(refusal.contains("shares with you read-only: nothing of this unit of work was saved"), "\(refusal)")
        let activity = try #require(lines.firstIndex { $0.hasPrefix("16. ") })
        #expect(lines[activity + 1].hasPrefix("     SEQ  DATE"))
        let changes = lines[(activity + 2)...].prefix { $0.hasPrefix("     ") }.map(CLISharesTests.changeUserPermission)
        #expect(
            changes == [
                "invited _bob READ_WRITE", "invited _carol READ_ONLY", "joined _bob READ_WRITE", "joined _carol READ_ONLY",
                "left _bob -",
            ], "\(text)")
    }

    @Test func keep_leavesTheDataAndSaysWhere() async throws {
        let result = await cloudstore("demo", "--keep")
        #expect(result.status == 0, "\(result.standardError)")
        let folder = try dataFolder(result)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        #expect(result.standardOutput.contains("Kept the data in \(folder): "))
        for file in ["A.sqlite", "B.sqlite", "bob.sqlite", "carol.sqlite", "server"] {
            #expect(FileManager.default.fileExists(atPath: folder + "/" + file), "\(file) kept")
        }
        let conflicts = await cloudstore("conflicts", "--store", folder + "/B.sqlite")
        #expect(conflicts.status == 0 && conflicts.outputLines.count == 2, "the kept store can be inspected")
        #expect(result.standardOutput.contains("cloudstore shares --store \(folder)/A.sqlite\n"))
        let shares = await cloudstore("shares", "--store", folder + "/A.sqlite")
        #expect(shares.status == 0, "\(shares.standardError)")
        #expect(shares.outputLines.first?.hasSuffix(", owned by me (_alice)") == true, "\(shares.standardOutput)")
        #expect(shares.outputLines.contains { $0.firstMatch(of: #/^  _carol +READ_ONLY +ACCEPTED$/#) != nil }, "\(shares.standardOutput)")
        let carol = await cloudstore("shares", "--store", folder + "/carol.sqlite")
        #expect(carol.outputLines.first?.hasSuffix(", owned by _alice") == true, "\(carol.standardOutput)")
    }

    @Test func debugTwo_logsEachRequest() async throws {
        let result = await cloudstore("demo", "--debug", "2")
        #expect(result.status == 0)
        #expect(result.standardError.contains(" info cloudstore.server: "), "\(result.standardError.prefix(2000))")
        #expect(!result.standardError.contains(" debug cloudstore."))
        let quiet = await cloudstore("demo")
        #expect(!quiet.standardError.contains(" info cloudstore."))
    }

    @Test func unknownOption_isAUsageError() async {
        let unknown = await cloudstore("demo", "--frobnicate")
        #expect(unknown.status == 2)
        let removed = await cloudstore("demo", "--schema", "Schema/Notes.json")
        #expect(removed.status == 2, "the demo runs the example's model; it takes no schema file")
    }
}
