import CloudStore
import CloudStoreSync
import CloudStoreTesting
import Foundation
import Testing

/// `cloudstore sync --store PATH --server URL --container ID --token-file FILE`.
@Suite("cloudstore sync", .timeLimit(.minutes(ReliabilityRun.hangLimitMinutes)))
struct CLISyncTests {
    /// A store of `count` notes, written before it ever mirrored.
    static func store(_ name: String, notes count: Int, in directory: URL) throws -> URL {
        let url = directory.appendingPathComponent(name)
        let store = try PersistentStore(url: url, schema: try StoreFixtures.schema())
        try store.write(author: "app") { context in
            for index in 0..<count {
                try context.insert(EntitySnapshot(entityName: "Note", id: UUID(), values: ["title": .string("n\(index)")]))
            }
        }
        try store.close()
        return url
    }

    @Test func aStoreUploadsWithProgressAndAnotherFetchesIt() async throws {
        try await TemporaryDirectory.with { directory in
            try await TestServer.with(users: ["alice-token": "_alice"]) { server in
                let a = try Self.store("a.sqlite", notes: 450, in: directory)
                let b = try Self.store("b.sqlite", notes: 0, in: directory)
                let tokenFile = directory.appendingPathComponent("alice.token")
                try "alice-token\n".write(to: tokenFile, atomically: true, encoding: .utf8)
                let common = ["--server", server.baseURL.absoluteString, "--container", "iCloud.cli.test"]

                let upload = await cloudstore(["sync", "--store", a.path, "--token-file", tokenFile.path] + common)
                #expect(upload.status == 0, "\(upload.standardError)")
                #expect(upload.outputLines == ["synced \(a.path): 450 uploaded, 0 fetched, 0 conflicts logged, nothing pending"])
                #expect(
                    upload.errorLines.contains { $0.hasPrefix("uploading: 450/450 (100%) in ") },
                    "a final progress line on standard error: \(upload.standardError)")

                let fetch = await cloudstore(
                    ["sync", "--store", b.path, "--json"] + common, environment: ["CLOUDSTORE_TOKEN": "alice-token"])
                #expect(fetch.status == 0, "\(fetch.standardError)")
                let summary = try #require(try JSONSerialization.jsonObject(with: Data(fetch.standardOutput.utf8)) as? [String: Any])
                #expect(summary["fetched"] as? Int == 450)
                #expect(summary["uploaded"] as? Int == 0)
                #expect(summary["pendingUploads"] as? Int == 0)
                #expect(fetch.errorLines.contains { $0.hasPrefix("downloading: 450 in ") }, "\(fetch.standardError)")
                let store = try PersistentStore(inspecting: b, schema: try StoreFixtures.schema())
                #expect(try await store.read { try $0.count(entityName: "Note") } == 450)
                try store.close()
            }
        }
    }

    /// A store whose app mirrors its entities in the public database: `sync` sends them there by
    /// default (the entities the store keeps), and another user's store named with
    /// `--public-entity` reads them.
    @Test func publicEntities_areThoseTheStoreKeeps_orThoseNamed() async throws {
        try await TemporaryDirectory.with { directory in
            try await TestServer.with(users: ["alice-token": "_alice", "bob-token": "_bob"]) { server in
                let a = try Self.store("a.sqlite", notes: 3, in: directory)
                let b = try Self.store("b.sqlite", notes: 0, in: directory)
                let everything: Set<String> = ["Folder", "Note", "Tag"]
                var options = PersistentCloudContainer.Options()
                options.publicEntities = everything
                try await PersistentCloudContainer(url: a, schema: try StoreFixtures.schema(), options: options).close()
                #expect(try PersistentCloudContainer.publicEntities(at: a) == everything)
                #expect(try PersistentCloudContainer.publicEntities(at: b).isEmpty)
                let common = ["--server", server.baseURL.absoluteString, "--container", "iCloud.cli.test"]

                let upload = await cloudstore(["sync", "--store", a.path] + common, environment: ["CLOUDSTORE_TOKEN": "alice-token"])
                #expect(upload.outputLines == ["synced \(a.path): 3 uploaded, 0 fetched, 0 conflicts logged, nothing pending"], "\(upload.standardError)")
                let named = everything.sorted().flatMap { ["--public-entity", $0] }
                let fetch = await cloudstore(["sync", "--store", b.path] + named + common, environment: ["CLOUDSTORE_TOKEN": "bob-token"])
                #expect(fetch.outputLines == ["synced \(b.path): 0 uploaded, 3 fetched, 0 conflicts logged, nothing pending"], "\(fetch.standardError)")
                #expect(try PersistentCloudContainer.publicEntities(at: b) == everything, "the store keeps them for the next sync")
                // Bob's private database holds none of them.
                let bobsPrivate = await cloudstore(
                    ["sync", "--store", try Self.store("c.sqlite", notes: 0, in: directory).path] + common,
                    environment: ["CLOUDSTORE_TOKEN": "bob-token"])
                #expect(bobsPrivate.outputLines.first?.contains("0 fetched") == true, "\(bobsPrivate.standardOutput)")
            }
        }
    }

    /// The zone is deleted on the server after a sync: the next sync stops and says how to
    /// decide; `--decide uploadAgain` puts the store's notes back.
    @Test func aZoneDeletedOnTheServer_waitsFor_decide() async throws {
        try await TemporaryDirectory.with { directory in
            try await TestServer.with(users: ["alice-token": "_alice"]) { server in
                let a = try Self.store("a.sqlite", notes: 3, in: directory)
                let common = ["sync", "--store", a.path, "--server", server.baseURL.absoluteString, "--container", "iCloud.cli.test"]
                let environment = ["CLOUDSTORE_TOKEN": "alice-token"]
                let first = await cloudstore(common, environment: environment)
                #expect(first.status == 0, "\(first.standardError)")
                let database = HTTPCloudDatabase(
                    baseURL: server.baseURL, container: "iCloud.cli.test", token: "alice-token", deviceID: "elsewhere")
                _ = try await database.modifyZones(ZonesModifyRequest(operations: [.init(.delete, ZoneID(zoneName: "Notes"))]))

                let waiting = await cloudstore(common, environment: environment)
                #expect(
                    waiting.errorLines == [
                        "cloudstore: error: \(a.path) did not finish syncing: zone Notes was deleted on the server; this device holds 3 object(s) and 0 change(s) not uploaded: run again with --decide uploadAgain, keepLocalOnly or deleteLocalData to say what happens to this device's data"
                    ], "\(waiting.standardError)")
                #expect(waiting.status == 1)
                let wrong = await cloudstore(common + ["--decide", "maybe"], environment: environment)
                #expect(wrong.isOneLineFailure(mentioning: "--decide maybe is not a choice"), "\(wrong.standardError)")

                let decided = await cloudstore(common + ["--decide", "uploadAgain"], environment: environment)
                #expect(decided.status == 0, "\(decided.standardError)")
                #expect(decided.outputLines.first?.hasPrefix("synced \(a.path): 3 uploaded") == true, "\(decided.standardOutput)")
                let b = try Self.store("b.sqlite", notes: 0, in: directory)
                let fetch = await cloudstore(["sync", "--store", b.path] + common.dropFirst(3), environment: environment)
                #expect(fetch.outputLines.first?.contains("3 fetched") == true, "\(fetch.standardOutput) \(fetch.standardError)")
            }
        }
    }

    /// Alice and carol each share a folder with bob, bob edits a note of each, and both stop
    /// sharing before bob uploads: one `sync --decide keepLocalOnly` answers both shares, each once,
    /// and both edits stay on bob's device.
    @Test func decide_answersEveryShareThatEnded() async throws {
        let users = ["alice-token": "_alice", "bob-token": "_bob", "carol-token": "_carol"]
        try await ServerProcess.with(users: users) { server in
            let schema = Schema(name: "Notes", version: 1, entities: [Folder.self, Note.self])
            let bob = try await TestDevice.make("bob", schema: schema, server: server.baseURL, token: "bob-token")
            var owners: [(device: TestDevice, share: PersistentCloudContainer.Share)] = []
            var notes: [Note] = []
            for owner in ["alice", "carol"] {
                let device = try await TestDevice.make(owner, schema: schema, server: server.baseURL, token: "\(owner)-token")
                let folder = Folder(title: "\(owner)'s trip")
                let note = Note(title: "tickets", folder: folder.id)
                try await device.write { context in
                    try context.insert(folder)
                    try context.insert(note)
                }
                try await device.sync()
                let share = try await device.container.share(folder, with: [.init(user: "_bob", permission: .readWrite)])
                _ = try await bob.container.acceptShare(shortGUID: try #require(share.shortGUID))
                owners.append((device, share))
                notes.append(note)
            }
            try await bob.sync()
            for index in notes.indices { notes[index].body = "bob's seat" }
            try await bob.write { [notes] context in
                for note in notes { try context.update(note) }
            }
            for (device, share) in owners {
                try await device.container.stopSharing(share)
                await device.close()
            }
            await bob.close()

            let store = bob.directory.file("bob.sqlite")
            let decided = await cloudstore(
                ["sync", "--store", store.path, "--server", server.baseURL.absoluteString, "--container", TestDevice.containerIdentifier,
                 "--decide", "keepLocalOnly"],
                environment: ["CLOUDSTORE_TOKEN": "bob-token"])
            #expect(decided.status == 0, "\(decided.standardError)")
            let answers = decided.errorLines.filter { $0.hasSuffix(": keepLocalOnly") }
            #expect(answers.count == 2, "each share answered once: \(decided.standardError)")
            #expect(answers.allSatisfy { $0.contains("1 change(s) not uploaded") }, "\(answers)")
            let kept = try PersistentStore(inspecting: store, schema: schema)
            #expect(try await kept.read { try $0.fetch(Note.self).map(\.body) } == ["bob's seat", "bob's seat"])
            try kept.close()
        }
    }

    @Test func badInputs_areOneLineFailures() async throws {
        try await TemporaryDirectory.with { directory in
            try await TestServer.with(users: ["alice-token": "_alice"]) { server in
                let a = try Self.store("a.sqlite", notes: 2, in: directory)
                let common = ["--store", a.path, "--container", "iCloud.cli.test"]
                let noToken = await cloudstore(["sync", "--server", server.baseURL.absoluteString] + common)
                #expect(noToken.isOneLineFailure(mentioning: "no token", "--token-file", "CLOUDSTORE_TOKEN"), "\(noToken.standardError)")

                let badURL = await cloudstore(
                    ["sync", "--server", "127.0.0.1:8080"] + common, environment: ["CLOUDSTORE_TOKEN": "alice-token"])
                #expect(badURL.isOneLineFailure(mentioning: "is not a server URL", "http://"), "\(badURL.standardError)")

                let missing = await cloudstore(
                    ["sync", "--server", server.baseURL.absoluteString, "--store", directory.appendingPathComponent("none.sqlite").path,
                     "--container", "iCloud.cli.test"], environment: ["CLOUDSTORE_TOKEN": "alice-token"])
                #expect(missing.isOneLineFailure(mentioning: "no store at"), "\(missing.standardError)")

                let refused = await cloudstore(
                    ["sync", "--server", server.baseURL.absoluteString, "--timeout", "20"] + common,
                    environment: ["CLOUDSTORE_TOKEN": "mallory-token"])
                #expect(refused.isOneLineFailure(mentioning: "did not finish syncing"), "\(refused.standardError)")
            }
        }
    }
}

/// `sync --passphrase-file` and `status` for a store whose schema has encrypted attributes.
@Suite("cloudstore sync: encrypted attributes", .timeLimit(.minutes(ReliabilityRun.hangLimitMinutes)))
struct CLIEncryptionTests {
    static let schema = """
        {"name": "Journal", "version": 1, "entities": [{"name": "Entry", "attributes": [
            {"name": "day", "type": "string", "default": ""},
            {"name": "text", "type": "string", "optional": true, "encrypted": true}]}]}
        """

    @Test func syncNeedsThePassphraseOnce_andStatusShowsTheKeyAndWhatWaits() async throws {
        try await TemporaryDirectory.with { directory in
            try await TestServer.with(users: ["alice-token": "_alice"]) { server in
                let schema = try Schema.load(Data(Self.schema.utf8))
                let url = directory.appendingPathComponent("journal.sqlite")
                let store = try PersistentStore(url: url, schema: schema)
                try await store.write(author: "app") { context in
                    try context.insert(EntitySnapshot(entityName: "Entry", id: UUID(), values: ["day": .string("monday"), "text": .string("dear diary")]))
                }
                try store.close()
                let other = directory.appendingPathComponent("other.sqlite")
                try PersistentStore(url: other, schema: schema).close()
                let passphrase = directory.appendingPathComponent("passphrase")
                try "correct horse\n".write(to: passphrase, atomically: true, encoding: .utf8)
                let common = ["--server", server.baseURL.absoluteString, "--container", "iCloud.cli.test"]
                let alice = ["CLOUDSTORE_TOKEN": "alice-token"]

                let refused = await cloudstore(["sync", "--store", url.path] + common, environment: alice)
                #expect(refused.status == 1)
                #expect(refused.standardError.contains("--passphrase-file"), "\(refused.standardError)")

                let upload = await cloudstore(["sync", "--store", url.path, "--passphrase-file", passphrase.path] + common, environment: alice)
                #expect(upload.outputLines == ["synced \(url.path): 1 uploaded, 0 fetched, 0 conflicts logged, nothing pending"], "\(upload.standardError)")
                let again = await cloudstore(["sync", "--store", url.path] + common, environment: alice)
                #expect(again.status == 0, "the key file beside the store serves the next sync: \(again.standardError)")

                // Another store will not sync without the key; the app's container fetches before
                // it has it: the entry waits, and status says so.
                let keyless = await cloudstore(["sync", "--store", other.path, "--timeout", "5"] + common, environment: alice)
                #expect(keyless.status == 1)
                let app = try await PersistentCloudContainer(
                    url: other, schema: schema,
                    options: .init(server: .init(url: server.baseURL, containerIdentifier: "iCloud.cli.test", token: "alice-token")))
                try await app.fetchChanges()
                try await app.close()
                let status = await cloudstore(["status", "--store", other.path, "--json"])
                let report = try #require(try JSONSerialization.jsonObject(with: Data(status.standardOutput.utf8)) as? [String: Any])
                let encryption = try #require(report["encryption"] as? [String: Any], "\(status.standardOutput)")
                #expect(encryption["hasKey"] as? Bool == false)
                #expect(encryption["recordsAwaitingKey"] as? Int == 1)
                let waiting = try #require(encryption["waiting"] as? [[String: Any]])
                #expect(waiting.count == 1 && waiting.first?["zone"] as? String == "Journal" && waiting.first?["refused"] as? Bool == false)
                let text = await cloudstore(["status", "--store", other.path])
                #expect(text.standardOutput.contains("waiting") && text.standardOutput.contains("in Journal: waiting for"), "\(text.standardOutput)")

                let wrong = directory.appendingPathComponent("wrong")
                try "wrong horse\n".write(to: wrong, atomically: true, encoding: .utf8)
                let denied = await cloudstore(["sync", "--store", other.path, "--passphrase-file", wrong.path] + common, environment: alice)
                #expect(denied.status == 1)
                #expect(denied.standardError.contains("passphrase does not unlock"), "\(denied.standardError)")
                let fetched = await cloudstore(["sync", "--store", other.path, "--passphrase-file", passphrase.path] + common, environment: alice)
                #expect(fetched.status == 0, "\(fetched.standardError)")
                let unlocked = await cloudstore(["status", "--store", other.path])
                #expect(unlocked.standardOutput.contains("on this device"), "\(unlocked.standardOutput)")
                let reader = try PersistentStore(inspecting: other, schema: schema)
                #expect(try await reader.read { try $0.fetchSnapshots(entityName: "Entry").first?.values["text"] } == .string("dear diary"))
                try reader.close()
            }
        }
    }
}
