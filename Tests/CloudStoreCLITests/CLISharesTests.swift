import CloudStore
import CloudStoreTesting
import Foundation
import Testing

/// `cloudstore shares --store PATH [--after SEQ] [--json]`, on the stores of alice, who shared a
/// folder, bob, who joined, and carol, who joined and left (``StoreFixtures/sharedStores(in:)``).
@Suite("cloudstore shares", .timeLimit(.minutes(ReliabilityRun.hangLimitMinutes)))
struct CLISharesTests {
    @Test func sharedStores_nameTheParticipantsTheirPermissionsAndTheActivity() async throws {
        try await TemporaryDirectory.with { directory in
            let (alice, bob, carol, folder) = try await StoreFixtures.sharedStores(in: directory)
            let before = try DirectoryChecksums(directory)

            // Alice owns the share: she is "me", bob joined read-write; the log says who came and went.
            let owner = await cloudstore("shares", "--store", alice.path)
            #expect(owner.status == 0, "\(owner.standardError)")
            let text = owner.standardOutput
            #expect(owner.outputLines.first?.firstMatch(of: #/^share of zone \S+, owned by me \(_alice\)$/#) != nil, "\(text)")
            for line in [
                "  public permission  NONE\n", "  my permission      READ_WRITE\n", "  pending changes    no\n",
                "  shared object      Folder \(folder.uuidString)\n",
            ] {
                #expect(text.contains(line), "missing \(line) in:\n\(text)")
            }
            #expect(owner.outputLines.contains { $0.firstMatch(of: #/^  short GUID         \S+$/#) != nil }, "\(text)")
            #expect(owner.outputLines.contains { $0.firstMatch(of: #/^  _alice +READ_WRITE +ACCEPTED +owner$/#) != nil }, "\(text)")
            #expect(owner.outputLines.contains { $0.firstMatch(of: #/^  _bob +READ_WRITE +ACCEPTED$/#) != nil }, "\(text)")
            let activity = try #require(owner.outputLines.firstIndex(of: "share activity:"), "\(text)")
            #expect(owner.outputLines[activity + 1].hasPrefix("SEQ  DATE                      ZONE"))
            let entries = owner.outputLines[(activity + 2)...].map(Self.changeUserPermission)
            #expect(
                entries == [
                    "invited _bob READ_WRITE", "invited _carol READ_ONLY", "joined _bob READ_WRITE", "joined _carol READ_ONLY",
                    "left _carol -",
                ], "\(text)")
            #expect(
                owner.outputLines[activity + 2].firstMatch(of: #/^1    \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z  /#) != nil,
                "dates to the millisecond: \(text)")

            // Bob joined alice's share: she owns it, he may write.
            let participant = await cloudstore("shares", "--store", bob.path)
            #expect(participant.status == 0, "\(participant.standardError)")
            #expect(participant.outputLines.first?.firstMatch(of: #/^share of zone \S+, owned by _alice$/#) != nil)
            #expect(participant.standardOutput.contains("  my permission      READ_WRITE\n"), "\(participant.standardOutput)")

            // Carol left: no share, but the log says her access ended.
            let former = await cloudstore("shares", "--store", carol.path)
            #expect(former.status == 0, "\(former.standardError)")
            #expect(former.outputLines.first == Self.noShares(carol))
            #expect(former.outputLines.contains("share activity:"))
            #expect(former.outputLines.contains { $0.contains("  accessEnded  _carol") }, "\(former.standardOutput)")

            // JSON: the same facts as data; alice's and bob's short GUIDs are the same.
            let aliceJSON = try Self.json(await cloudstore("shares", "--store", alice.path, "--json"))
            let bobJSON = try Self.json(await cloudstore("shares", "--store", bob.path, "--json"))
            let aliceShare = try #require((aliceJSON["shares"] as? [[String: Any]])?.first)
            let bobShare = try #require((bobJSON["shares"] as? [[String: Any]])?.first)
            #expect(aliceJSON["user"] as? String == "_alice" && aliceShare["isOwnedByMe"] as? Bool == true)
            #expect(bobShare["owner"] as? String == "_alice" && bobShare["myPermission"] as? String == "READ_WRITE")
            #expect(aliceShare["shortGUID"] as? String != nil && aliceShare["shortGUID"] as? String == bobShare["shortGUID"] as? String)
            let participants = try #require(aliceShare["participants"] as? [[String: Any]])
            #expect(participants.contains { $0["user"] as? String == "_bob" && $0["status"] as? String == "ACCEPTED" })
            #expect((aliceJSON["activity"] as? [[String: Any]])?.compactMap { $0["change"] as? String }.last == "left")

            // --after: only newer entries.
            let after = await cloudstore("shares", "--store", alice.path, "--after", "4")
            #expect(
                after.outputLines.suffix(2).map(Self.changeUserPermission) == ["CHANGE USER PERMISSION", "left _carol -"],
                "\(after.standardOutput)")
            #expect(after.outputLines.last?.hasPrefix("5  ") == true)
            let none = await cloudstore("shares", "--store", alice.path, "--after", "99")
            #expect(none.status == 0 && none.outputLines.last == "no share activity after 99")

            let afterwards = try DirectoryChecksums(directory)
            #expect(afterwards == before, "shares only reads: before: \(before)\nafter:  \(afterwards)")
        }
    }

    @Test func storesWithoutShares_sayHowToShare() async throws {
        try await TemporaryDirectory.with { directory in
            let (local, _, _) = try StoreFixtures.notesStore(in: directory)
            let never = await cloudstore("shares", "--store", local.path)
            #expect(never.status == 0 && never.outputLines == [Self.noShares(local)], "\(never.standardOutput)")
            let json = try Self.json(await cloudstore("shares", "--store", local.path, "--json"))
            #expect((json["shares"] as? [Any])?.isEmpty == true && (json["activity"] as? [Any])?.isEmpty == true)

            let devices = directory.appendingPathComponent("devices")
            try FileManager.default.createDirectory(at: devices, withIntermediateDirectories: true)
            let (mirrored, _, _) = try await StoreFixtures.conflictedStores(in: devices)
            let unshared = await cloudstore("shares", "--store", mirrored.path)
            #expect(unshared.status == 0 && unshared.outputLines == [Self.noShares(mirrored)], "\(unshared.standardOutput)")
        }
    }

    @Test func badInputs() async throws {
        try await TemporaryDirectory.with { directory in
            let missing = await cloudstore("shares", "--store", "/nonexistent/notes.sqlite")
            #expect(missing.isOneLineFailure(mentioning: "no store at /nonexistent/notes.sqlite"))
            let text = try StoreFixtures.textFile(in: directory)
            let notAStore = await cloudstore("shares", "--store", text.path)
            #expect(notAStore.isOneLineFailure(mentioning: "is not a CloudStore store"))
            let after = await cloudstore("shares", "--store", text.path, "--after", "soon")
            #expect(after.status == 2)
            let negative = await cloudstore("shares", "--store", text.path, "--after=-1")
            #expect(negative.status == 2 && negative.standardError.contains("--after must be 0 or more"), "\(negative.standardError)")
            let noStore = await cloudstore("shares")
            #expect(noStore.status == 2)
        }
    }

    /// The last three columns of a line of the activity table, one space apart.
    static func changeUserPermission(_ line: String) -> String {
        line.split(separator: " ").dropFirst(3).joined(separator: " ")
    }

    static func noShares(_ store: URL) -> String {
        "no shares in \(store.path): share an object and what belongs to it with PersistentCloudContainer.share(_:with:)"
    }

    static func json(_ result: CLIResult) throws -> [String: Any] {
        try #require(
            try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any], "\(result.standardError)")
    }
}
