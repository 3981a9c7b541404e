@testable import CloudStore
import CloudStoreTesting
import CloudStoreWire
import Foundation
import Testing

/// A device killed (SIGKILL) at a random moment while it uploads or downloads an asset: afterwards
/// every row's attachment file exists and matches its checksum, and restarted, the device
/// completes the transfer; B ends with A's bytes. Odd seeds encrypt the attachment: its bytes
/// travel sealed, and B opens them.
///
/// `CLOUDSTORE_ASSET_CRASH_SEEDS=N` runs N seeds (8 by default, 60 under `.ci/soak`);
/// `CLOUDSTORE_ASSET_CRASH_SEED` picks the first.
@Suite("Mirroring: devices killed during asset transfers", .serialized)
struct MirroringAssetCrashTests {
    static var seeds: Int {
        ProcessInfo.processInfo.environment["CLOUDSTORE_ASSET_CRASH_SEEDS"].flatMap(Int.init) ?? ReliabilityRun.count(ci: 8, soak: 60)
    }

    static func container(seed: UInt64) -> String { "iCloud.asset.crash.\(seed)" }

    @Test func killedDuringAnUploadOrADownload_filesMatchTheirRowsAndTheTransferCompletes() async throws {
        let first = ReliabilityRun.seed(fixed: 0, variable: "CLOUDSTORE_ASSET_CRASH_SEED")
        let containers = Set((0..<Self.seeds).map { Self.container(seed: first &+ UInt64($0)) })
        try await ServerProcess.with(users: TestServer.defaultUsers, containers: containers) { server in
            var killed = (upload: 0, download: 0)
            var encrypted = 0
            for index in 0..<Self.seeds {
                let seed = first &+ UInt64(index)
                var random = SeededRandomNumberGenerator(seed: seed)
                let directory = try TemporaryDirectory()
                let schemaFile = directory.file("schema.json")
                // Odd seeds seal the attachment (end-to-end encrypted): the sealed file is what travels.
                var schema = try Schema.notesWithExternalAttachments()
                if seed % 2 == 1 {
                    let note = try #require(schema.entities.firstIndex { $0.name == "Note" })
                    let attachment = try #require(schema.entities[note].attributes.firstIndex { $0.name == "attachment" })
                    schema.entities[note].attributes[attachment].isEncrypted = true
                    encrypted += 1
                }
                try schema.fileData().write(to: schemaFile)
                let kibibytes = Int.random(in: 256...6144, using: &random)
                func device(_ role: String, _ store: URL, killAfter delay: Duration?) async throws -> Bool {
                    try await Self.run(
                        [
                            "asset-device", store.path, schemaFile.path, server.baseURL.absoluteString,
                            Self.container(seed: seed), "alice-token", role, "\(kibibytes)", "\(seed)",
                        ], killAfter: delay)
                }
                let a = directory.file("A.sqlite"), b = directory.file("B.sqlite")

                if try await device("upload", a, killAfter: .milliseconds(Int.random(in: 0...120, using: &random))) {
                    killed.upload += 1
                }
                let uploaded = try Self.checkFiles(of: a, schemaFile: schemaFile)
                #expect(try await device("upload", a, killAfter: nil) == false)

                if try await device("download", b, killAfter: .milliseconds(Int.random(in: 0...120, using: &random))) {
                    killed.download += 1
                }
                _ = try Self.checkFiles(of: b, schemaFile: schemaFile)
                #expect(try await device("download", b, killAfter: nil) == false)
                let downloaded = try Self.checkFiles(of: b, schemaFile: schemaFile)
                #expect(uploaded != nil && downloaded == uploaded, "seed \(seed): B should hold A's attachment")
                // A sealed file a kill left behind is removed when the device starts again.
                for store in [a, b] {
                    let transfers = (try? FileManager.default.contentsOfDirectory(atPath: store.path + "-external/.transfers")) ?? []
                    #expect(!transfers.contains { $0.hasSuffix(".sealed") || $0.hasSuffix(".waiting") }, "seed \(seed): \(transfers)")
                }
            }
            print(
                "asset crash suite: first seed \(first), seeds \(Self.seeds), killed while uploading \(killed.upload), "
                    + "killed while downloading \(killed.download), encrypted \(encrypted)")
            #expect(killed.upload + killed.download > 0, "some kills must land during a transfer")
        }
    }

    /// Runs the helper; with a delay, it is killed (SIGKILL, by a timer of its own) that long
    /// after it says "sync", unless it finished. Answers whether it was killed before "done".
    static func run(_ arguments: [String], killAfter delay: Duration?) async throws -> Bool {
        let milliseconds = delay.map { String($0.components.seconds * 1000 + $0.components.attoseconds / 1_000_000_000_000_000) }
        let (child, lines) = try TestHelperProcess.start(arguments + (milliseconds.map { [$0] } ?? []))
        var done = false
        while let line = await lines.nextLine() { done = done || line == "done" }
        let termination = await child.waitForExit()
        let killed = termination == .signaled(SIGKILL)
        if !killed {
            #expect(done, "the helper \(arguments[6]) ended without finishing (\(termination))")
        }
        return killed && !done
    }

    /// Every note's attachment file exists and holds bytes with its checksum; answers the asset
    /// note's checksum, if it has arrived.
    static func checkFiles(of store: URL, schemaFile: URL) throws -> String? {
        guard FileManager.default.fileExists(atPath: store.path) else { return nil }
        let opened = try PersistentStore(inspecting: store, schema: try Schema.load(contentsOf: schemaFile), logger: .quiet)
        defer { try? opened.close() }
        var found: String?
        for snapshot in try opened.read({ try $0.fetchSnapshots(entityName: "Note") }) {
            guard case .externalData(let value)? = snapshot.values["attachment"] else { continue }
            let file = URL(fileURLWithPath: store.path + "-external/" + value.fileName!)
            let (checksum, size) = try AssetChecksum.ofFile(at: file)
            #expect(checksum == value.checksum && size == value.size, "the file of \(snapshot.id) does not match its row")
            found = value.checksum
        }
        return found
    }
}
