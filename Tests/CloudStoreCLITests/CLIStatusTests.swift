import CloudStore
import CloudStoreTesting
import Foundation
import Testing

/// `cloudstore status --store PATH [--schema FILE] [--json]`.
@Suite("cloudstore status")
struct CLIStatusTests {
    @Test func localStore_hasNeverSynced() async throws {
        try await TemporaryDirectory.with { directory in
            let (url, _, _) = try StoreFixtures.notesStore(in: directory)
            let result = await cloudstore("status", "--store", url.path)
            #expect(result.status == 0, "\(result.standardError)")
            #expect(
                result.outputLines == [
                    "store             \(url.path) (schema \"Notes\" version 2)",
                    "mirroring         no (never synced)",
                    "signed out        no",
                    "pending uploads   0",
                    "refused uploads   0",
                    "server token      none",
                    "last import       never",
                    "last export       never",
                    "last error        none",
                    "conflicts logged  0",
                ])
        }
    }

    @Test func mirroredStore_showsTheUserTokensTimesAndConflicts() async throws {
        try await TemporaryDirectory.with { directory in
            let (_, b, _) = try await StoreFixtures.conflictedStores(in: directory)
            let result = await cloudstore("status", "--store", b.path, "--schema", Fixtures.notesSchema)
            #expect(result.status == 0, "\(result.standardError)")
            let text = result.standardOutput
            #expect(text.contains("mirroring         yes, user _alice\n"), "\(text)")
            #expect(text.contains("conflicts logged  1\n"))
            #expect(text.contains("pending uploads   0\n"))
            #expect(!text.contains("server token      none"))
            #expect(!text.contains("last import       never"))

            let json = await cloudstore("status", "--store", b.path, "--json")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [String: Any])
            #expect(object["user"] as? String == "_alice")
            #expect(object["conflictCount"] as? Int == 1)
            #expect(object["isMirroring"] as? Bool == true)
            #expect((object["lastExport"] as? String)?.hasSuffix("Z") == true)
        }
    }

    @Test func failed_listsTheRefusedUploadsWithWhy() async throws {
        try await TemporaryDirectory.with { directory in
            let (url, refused) = try await StoreFixtures.refusedStore(in: directory)
            let summary = await cloudstore("status", "--store", url.path)
            #expect(summary.standardOutput.contains("refused uploads   1\n"), "\(summary.standardOutput)")

            let result = await cloudstore("status", "--store", url.path, "--failed")
            #expect(result.status == 0, "\(result.standardError)")
            let lines = result.outputLines
            #expect(lines.count == 2, "a header and the one refused note: \(lines)")
            #expect(lines.first?.split(separator: " ", omittingEmptySubsequences: true) == ["ENTITY", "OBJECT", "ZONE", "PENDING", "ERROR", "REASON"])
            let row = lines.last ?? ""
            #expect(row.hasPrefix("Note    \(refused.uuidString)  Notes  whole object  LIMIT_EXCEEDED  "), "\(row)")

            let json = await cloudstore("status", "--store", url.path, "--failed", "--json")
            let objects = try #require(try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [[String: Any]])
            #expect(objects.count == 1)
            #expect(objects.first?["id"] as? String == refused.uuidString)
            #expect(objects.first?["code"] as? String == "LIMIT_EXCEEDED")
            #expect(objects.first?["pending"] as? String == "save")
            #expect((objects.first?["reason"] as? String)?.isEmpty == false)
        }
    }

    @Test func aPendingDecisionAboutLocalData_isShown() async throws {
        try await TemporaryDirectory.with { directory in
            let url = try await StoreFixtures.zoneDeletedStore(in: directory)
            let result = await cloudstore("status", "--store", url.path)
            #expect(result.status == 0, "\(result.standardError)")
            #expect(
                result.outputLines.last
                    == "decision needed   zone Notes was deleted on the server; this device holds 2 object(s) and 1 change(s) not uploaded (the app decides; syncing waits)",
                "\(result.standardOutput)")
            let json = await cloudstore("status", "--store", url.path, "--json")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [String: Any])
            #expect((object["localDataDecision"] as? String)?.hasPrefix("zone Notes was deleted on the server") == true)
        }
    }

    @Test func failed_withNothingRefusedSaysSo() async throws {
        try await TemporaryDirectory.with { directory in
            let (url, _, _) = try StoreFixtures.notesStore(in: directory)
            let result = await cloudstore("status", "--store", url.path, "--failed")
            #expect(result.status == 0, "\(result.standardError)")
            #expect(result.outputLines == ["no refused uploads"])
            let json = await cloudstore("status", "--store", url.path, "--failed", "--json")
            let objects = try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [Any]
            #expect(objects?.isEmpty == true, "\(json.standardOutput)")
        }
    }

    @Test func badInputs() async throws {
        try await TemporaryDirectory.with { directory in
            let (url, _, _) = try StoreFixtures.notesStore(in: directory)
            let older = await cloudstore("status", "--store", url.path, "--schema", Fixtures.notesV1Schema)
            #expect(older.isOneLineFailure(mentioning: "newer than this app's version 1"), "\(older.standardError)")

            let (v1, _) = try StoreFixtures.notesV1Store(in: directory)
            let newer = await cloudstore("status", "--store", v1.path, "--schema", Fixtures.notesSchema)
            #expect(newer.isOneLineFailure(mentioning: "run cloudstore migrate first"), "\(newer.standardError)")
            #expect(try PersistentStore.fileInfo(at: v1)?.schemaVersion == 1)

            let missing = await cloudstore("status", "--store", "/nonexistent/notes.sqlite")
            #expect(missing.isOneLineFailure(mentioning: "no store at /nonexistent/notes.sqlite"))

            let text = try StoreFixtures.textFile(in: directory)
            let notAStore = await cloudstore("status", "--store", text.path)
            #expect(notAStore.isOneLineFailure(mentioning: text.path, "is not a CloudStore store"))

            let directoryAsStore = await cloudstore("status", "--store", directory.path)
            #expect(directoryAsStore.isOneLineFailure(mentioning: "is a directory"))

            let noStore = await cloudstore("status")
            #expect(noStore.status == 2)
        }
    }
}
