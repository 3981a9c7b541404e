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
                    "retrying uploads  0",
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

    @Test func failed_listsTheRefusedAndRetryingUploadsWithWhy() async throws {
        try await TemporaryDirectory.with { directory in
            let (url, refused, retrying) = try await StoreFixtures.failedStore(in: directory)
            let summary = await cloudstore("status", "--store", url.path)
            #expect(summary.standardOutput.contains("pending uploads   1\n"), "\(summary.standardOutput)")
            #expect(summary.standardOutput.contains("refused uploads   1\n"), "\(summary.standardOutput)")
            #expect(summary.standardOutput.contains("retrying uploads  1\n"), "\(summary.standardOutput)")

            let result = await cloudstore("status", "--store", url.path, "--failed")
            #expect(result.status == 0, "\(result.standardError)")
            let rows = result.outputLines.map { $0.split(separator: "  ", omittingEmptySubsequences: true).map { $0.trimmingCharacters(in: .whitespaces) } }
            #expect(rows.count == 3, "a header, the refused note and the retrying one: \(result.outputLines)")
            #expect(rows.first == ["ENTITY", "OBJECT", "ZONE", "PENDING", "STATE", "ERROR", "ATTEMPTS", "NEXT ATTEMPT", "REASON"])
            let byID = Dictionary(uniqueKeysWithValues: rows.dropFirst().map { ($0[1], $0) })
            let refusedRow = try #require(byID[refused.uuidString])
            #expect(Array(refusedRow.prefix(8)) == ["Note", refused.uuidString, "Notes", "whole object", "refused", "LIMIT_EXCEEDED", "-", "after a change"])
            let next = StoreFixtures.failedStoreNow.addingTimeInterval(30).formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
            let retryingRow = try #require(byID[retrying.uuidString])
            #expect(Array(retryingRow.prefix(8)) == ["Note", retrying.uuidString, "Notes", "whole object", "retrying", "THROTTLED", "1", next])
            #expect(refusedRow.count == 9 && retryingRow.count == 9, "each with the server's reason")

            let json = await cloudstore("status", "--store", url.path, "--failed", "--json")
            let objects = try #require(try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [[String: Any]])
            #expect(objects.count == 2)
            let refusedObject = try #require(objects.first { $0["id"] as? String == refused.uuidString })
            #expect(refusedObject["state"] as? String == "refused")
            #expect(refusedObject["code"] as? String == "LIMIT_EXCEEDED")
            #expect(refusedObject["pending"] as? String == "save")
            #expect((refusedObject["reason"] as? String)?.isEmpty == false)
            #expect(refusedObject["attempts"] == nil && refusedObject["nextAttempt"] == nil)
            let retryingObject = try #require(objects.first { $0["id"] as? String == retrying.uuidString })
            #expect(retryingObject["state"] as? String == "retrying")
            #expect(retryingObject["code"] as? String == "THROTTLED")
            #expect(retryingObject["attempts"] as? Int == 1)
            #expect(retryingObject["nextAttempt"] as? String == next)
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
            #expect(result.outputLines == ["no failed uploads"])
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
