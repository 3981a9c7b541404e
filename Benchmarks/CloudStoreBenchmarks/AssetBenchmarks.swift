import CloudStore
import CloudStoreWire
import Foundation

/// Item 9 (issue 16): one large attachment (100 MiB by default) synced from device A to device B
/// through the server: MB/s each way, and how much each process's peak resident memory rises
/// during the transfer. A and B are child processes (this executable, `cloudstore-bench asset
/// ...`); each saves or opens its store first, then resets its peak (`/proc/self/clear_refs`) and
/// measures only the sync. The server's peak is reset the same way before each transfer.
struct AssetBenchmarks {
    let directory: URL
    let server: BenchServer

    /// What an asset child prints as its last line.
    struct Outcome: Codable {
        var seconds: Double
        /// Resident memory when the transfer began.
        var baselineKiB: Int
        /// Peak resident memory during the transfer.
        var peakKiB: Int
        /// Base64 SHA-256 of the attachment as the child's store holds it after the transfer.
        var checksum: String
    }

    static let schema = Schema(name: "BenchAssets", version: 1, entities: [
        EntityDescription("Attachment", attributes: [
            AttributeDescription("title", .string, default: .string("")),
            AttributeDescription("file", .data, optional: true, externalStorage: true),
        ]),
    ])

    /// ``schema`` with the attachment end-to-end encrypted (its own record type): the file that
    /// travels is sealed in chunks on A and opened in chunks on B.
    static let encryptedSchema = Schema(name: "BenchAssets", version: 1, entities: [
        EntityDescription("SealedAttachment", attributes: [
            AttributeDescription("title", .string, default: .string("")),
            AttributeDescription("file", .data, optional: true, externalStorage: true, encrypted: true),
        ]),
    ])

    func run(mebibytes: Int, encrypted: Bool = false) async throws -> [Figure] {
        let zone = "Assets\(UUID().uuidString.prefix(6))"
        let serverBefore = resetPeak(of: server.processID)
        let upload = try child("upload", zone: zone, mebibytes: mebibytes, encrypted: encrypted)
        let serverUpload = peakRise(of: server.processID, since: serverBefore)
        let serverBeforeDownload = resetPeak(of: server.processID)
        let download = try child("download", zone: zone, mebibytes: mebibytes, encrypted: encrypted)
        let serverDownload = peakRise(of: server.processID, since: serverBeforeDownload)
        guard download.checksum == upload.checksum else {
            throw BenchError("device B's attachment (SHA-256 \(download.checksum)) is not A's (\(upload.checksum))")
        }
        let backend = server.backend.rawValue + (encrypted ? ", encrypted" : "")
        let megabytes = Double(mebibytes) * 1_048_576 / 1_000_000
        return [
            Figure(item: 9, "asset \(mebibytes) MiB upload A → server, \(backend)", megabytes / upload.seconds, "MB/s",
                   String(format: "%.2f s for the sync that uploads it", upload.seconds)),
            Figure(item: 9, "asset \(mebibytes) MiB download server → B, \(backend)", megabytes / download.seconds, "MB/s",
                   String(format: "%.2f s for the sync that downloads, verifies and imports it", download.seconds)),
            Figure(item: 9, "asset peak memory rise on A (upload), \(backend)", Double(upload.peakKiB - upload.baselineKiB) / 1024,
                   "MiB", "VmHWM during the sync minus VmRSS before it", goal: .atMost(32)),
            Figure(item: 9, "asset peak memory rise on B (download), \(backend)",
                   Double(download.peakKiB - download.baselineKiB) / 1024, "MiB", "VmHWM during the sync minus VmRSS before it",
                   goal: .atMost(32)),
            Figure(item: 9, "asset peak memory rise on the server (upload), \(backend)", Double(serverUpload) / 1024, "MiB",
                   "server VmHWM during A's sync minus VmRSS before it", goal: .atMost(32)),
            Figure(item: 9, "asset peak memory rise on the server (download), \(backend)", Double(serverDownload) / 1024, "MiB",
                   "server VmHWM during B's sync minus VmRSS before it", goal: .atMost(32)),
        ]
    }

    private func child(_ role: String, zone: String, mebibytes: Int, encrypted: Bool) throws -> Outcome {
        try runChild(
            [
                "asset", role, "--url", server.url.absoluteString, "--container", server.containerIdentifier, "--zone", zone,
                "--mebibytes", String(mebibytes), "--store", directory.appendingPathComponent("\(zone)-\(role).sqlite").path,
            ] + (encrypted ? ["--encrypted"] : []), what: "the asset \(role) child")
    }

    /// Resets a process's peak resident memory to its current one and answers that, in KiB.
    private func resetPeak(of processID: Int32) -> Int {
        try? Data("5".utf8).write(to: URL(fileURLWithPath: "/proc/\(processID)/clear_refs"))
        return ProcessMemory.of(processID).residentKiB
    }

    private func peakRise(of processID: Int32, since baselineKiB: Int) -> Int {
        ProcessMemory.of(processID).peakKiB - baselineKiB
    }

    /// The child: `asset upload` saves an attachment of `--mebibytes` MiB and syncs it up;
    /// `asset download` opens a fresh store and syncs until it has it. Prints an ``Outcome``.
    static func child(_ arguments: [String]) async throws {
        func option(_ name: String) throws -> String {
            guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else {
                throw BenchError("asset needs \(name)")
            }
            return arguments[index + 1]
        }
        let role = arguments.first ?? ""
        let mebibytes = Int(try option("--mebibytes")) ?? 100
        var options = PersistentCloudContainer.Options(
            server: .init(
                url: URL(string: try option("--url"))!, containerIdentifier: try option("--container"), token: "user0-token",
                deviceID: "asset-\(role)"))
        options.automaticallySync = false
        options.zoneName = try option("--zone")
        let encrypted = arguments.contains("--encrypted")
        let schema = encrypted ? encryptedSchema : schema
        let entityName = schema.entities[0].name
        let container = try await PersistentCloudContainer(
            url: URL(fileURLWithPath: try option("--store")), schema: schema, options: options,
            logger: StoreBenchmarks.quietLogger)
        // Both children are the same user: A creates the account key, B unlocks it (scrypt), before the measured sync.
        if encrypted { try await container.setUpEncryption(passphrase: SyncBenchmarks.passphrase) }
        let id = UUID(uuidString: "00000000-0000-0000-0000-00000000A55E")!
        if role == "upload" {
            // A pseudo-random attachment, saved (and freed) before the measured transfer.
            var generator = SystemRandomNumberGenerator()
            var bytes = Data(count: mebibytes << 20)
            bytes.withUnsafeMutableBytes { buffer in
                let words = buffer.bindMemory(to: UInt64.self)
                for index in words.indices { words[index] = generator.next() }
            }
            let snapshot = EntitySnapshot(entityName: entityName, id: id, values: ["title": "big", "file": .data(bytes)])
            try await container.store.write { try $0.insert(snapshot) }
        }
        try Data("5".utf8).write(to: URL(fileURLWithPath: "/proc/self/clear_refs"))
        let baseline = ProcessMemory.current().residentKiB
        let start = ContinuousClock.now
        try await container.waitUntilSynced(timeout: .seconds(900))
        let seconds = start.duration(to: .now).inSeconds
        let peak = ProcessMemory.current().peakKiB
        let stored = try await container.store.read { try $0.fetchSnapshot(entityName: entityName, id: id) }
        guard case .externalData(let value)? = stored?.values["file"], let file = container.store.externalDataURL(for: value)
        else { throw BenchError("the \(role) store has no attachment file after syncing") }
        let checksum = try AssetChecksum.ofFile(at: file).fileChecksum
        try await container.close()
        let outcome = Outcome(seconds: seconds, baselineKiB: baseline, peakKiB: peak, checksum: checksum)
        print(String(decoding: try JSONEncoder().encode(outcome), as: UTF8.self))
    }
}
