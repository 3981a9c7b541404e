import CloudStore
import Foundation
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// A second process for the store's tests: it opens the same store file and writes to it, so tests
/// can kill a writer mid-transaction or observe commits made by another process.
///
/// ```
/// CloudStoreTestHelper write <store> <schema.json> <transactions>   one note per transaction, then "done"
/// CloudStoreTestHelper write-forever <store> <schema.json>           50 notes per transaction, "committed <n>" after each
/// CloudStoreTestHelper hang-in-write <store> <schema.json> <notes>   inserts, prints "inside", waits to be killed
/// CloudStoreTestHelper device <store> <schema.json> <steps> <server> <container> <token> <seed>
///     a device mirroring through a server: seeded inserts, updates, deletes and syncs, printing
///     "commit insert|update|delete <id> <title>" after each local commit and "sync" before each sync
/// CloudStoreTestHelper save-then-hang <store> <schema.json> <server> <container> <token> <title>
///     opens a container that does not sync by itself, saves one note, prints "saved <id>" and
///     waits to be killed
/// CloudStoreTestHelper write-attachment <store> <schema.json> <KiB> [<file size limit KiB>]
///     saves one note with an external attachment of <KiB> seeded KiB, under the file size limit
///     when given (SIGXFSZ ignored, so writes past it fail with EFBIG, as on a full disk); prints
///     "done", or "error <message>" and exits 1
/// CloudStoreTestHelper asset-device <store> <schema.json> <server> <container> <token> upload|download <KiB> <seed>
///     upload: saves (unless saved before) note 00000000-0000-0000-0000-00000000A55E with a seeded
///     attachment of <KiB> KiB, prints "saved"; both: print "sync", sync, print "done"
/// CloudStoreTestHelper remove-participant <store> <schema.json> <server> <container> <token> <user>
///     opens an owner's container (its key file beside the store), prints "removing", removes
///     <user> from the store's one share (rotating its zone key), prints "removed"
/// ```
@main
struct TestHelper {
    static func main() async throws {
        let arguments = CommandLine.arguments
        if arguments.count >= 9, arguments[1] == "device" {
            try await DeviceWorkload(arguments: arguments).run()
        } else if arguments.count >= 10, arguments[1] == "asset-device" {
            try await assetDevice(arguments)
        } else if arguments.count >= 8, arguments[1] == "save-then-hang" {
            try await saveThenHang(arguments)
        } else if arguments.count >= 8, arguments[1] == "remove-participant" {
            try await removeParticipant(arguments)
        } else {
            try runStoreCommand(arguments)
        }
    }

    /// The store commands, synchronous like the writers they stand for.
    static func runStoreCommand(_ arguments: [String]) throws {
        guard arguments.count >= 4 else {
            FileHandle.standardError.write(Data("usage: CloudStoreTestHelper <command> <store> <schema.json> [count]\n".utf8))
            exit(2)
        }
        let schema = try Schema.load(contentsOf: URL(fileURLWithPath: arguments[3]))
        var logger = Logger(label: "cloudstore.testhelper")
        logger.logLevel = .warning
        var configuration = PersistentStore.Configuration()
        // hang-in-write's open transaction must outgrow the writer's page cache, so that its pages
        // are in the WAL file when it is killed: a cache smaller than its 20,000 notes.
        if arguments[1] == "hang-in-write" { configuration.writerCacheSize = 1 << 20 }
        let store = try PersistentStore(
            url: URL(fileURLWithPath: arguments[2]), schema: schema, configuration: configuration, logger: logger)
        let count = arguments.count > 4 ? Int(arguments[4]) ?? 1 : 1
        switch arguments[1] {
        case "write":
            for index in 0..<count {
                try store.write(author: "helper", contextName: "child") { context in
                    try context.insert(note(title: "helper-\(index)"))
                }
            }
            say("done")
        case "write-forever":
            var batch = 0
            while true {
                try store.write(author: "helper", contextName: "child") { context in
                    for index in 0..<50 { try context.insert(note(title: "batch-\(batch)-\(index)")) }
                }
                batch += 1
                say("committed \(batch)")
            }
        case "hang-in-write":
            try store.write(author: "helper", contextName: "child") { context in
                for index in 0..<count { try context.insert(note(title: "uncommitted-\(index)")) }
                say("inside")
                while true { sleep(60) }
            }
        case "write-attachment":
            if arguments.count > 5, let limit = UInt64(arguments[5]) {
                signal(SIGXFSZ, SIG_IGN)
                var fileSize = rlimit(rlim_cur: rlim_t(limit << 10), rlim_max: rlim_t.max)
                guard setrlimit(Int32(RLIMIT_FSIZE.rawValue), &fileSize) == 0 else {
                    say("error setrlimit failed: errno \(errno)")
                    exit(1)
                }
            }
            do {
                try store.write(author: "helper", contextName: "child") { context in
                    try context.insert(
                        EntitySnapshot(
                            entityName: "Note", id: UUID(),
                            values: ["title": "attachment", "attachment": .data(assetBytes(kibibytes: count, seed: 7))]))
                }
                say("done")
            } catch {
                say("error \(error)")
                exit(1)
            }
        default:
            FileHandle.standardError.write(Data("unknown command \(arguments[1])\n".utf8))
            exit(2)
        }
    }

    /// The container of `<store> <schema.json> <server> <container> <token>` (arguments 2 to 6),
    /// syncing only when told.
    static func manualContainer(_ arguments: [String], deviceID: String) async throws -> PersistentCloudContainer {
        var logger = Logger(label: "cloudstore.testhelper")
        logger.logLevel = .critical
        var options = PersistentCloudContainer.Options(
            server: .init(url: URL(string: arguments[4])!, containerIdentifier: arguments[5], token: arguments[6], deviceID: deviceID))
        options.automaticallySync = false
        return try await PersistentCloudContainer(
            url: URL(fileURLWithPath: arguments[2]), schema: try Schema.load(contentsOf: URL(fileURLWithPath: arguments[3])),
            options: options, logger: logger)
    }

    /// Saves one note through a container and waits to be killed, before any sync could run.
    static func saveThenHang(_ arguments: [String]) async throws {
        let device = try await manualContainer(arguments, deviceID: "killed")
        let id = UUID()
        try await device.store.write(author: "app") { context in
            try context.insert(EntitySnapshot(entityName: "Note", id: id, values: ["title": .string(arguments[7])]))
        }
        say("saved \(id.uuidString)")
        while true { try await Task.sleep(for: .seconds(60)) }
    }

    /// Removes a participant from the store's share: the test kills it at a random moment.
    static func removeParticipant(_ arguments: [String]) async throws {
        let device = try await manualContainer(arguments, deviceID: "phone")
        guard let share = try device.shares().first else {
            say("error no share")
            exit(1)
        }
        say("removing")
        try await device.removeParticipant(arguments[7], from: share)
        say("removed")
        try await device.close()
    }

    /// The note of `asset-device`.
    static let assetNoteID = UUID(uuidString: "00000000-0000-0000-0000-00000000A55E")!

    /// The seeded bytes of `asset-device`'s attachment.
    static func assetBytes(kibibytes: Int, seed: UInt64) -> Data {
        var state = seed | 1
        var bytes = Data(count: kibibytes << 10)
        bytes.withUnsafeMutableBytes { buffer in
            for index in buffer.indices {
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                buffer[index] = UInt8(truncatingIfNeeded: state >> 33)
            }
        }
        return bytes
    }

    static func assetDevice(_ arguments: [String]) async throws {
        var logger = Logger(label: "cloudstore.testhelper")
        logger.logLevel = .critical
        let role = arguments[7]
        var options = PersistentCloudContainer.Options(
            server: .init(url: URL(string: arguments[4])!, containerIdentifier: arguments[5], token: arguments[6], deviceID: role))
        options.automaticallySync = false
        let device = try await PersistentCloudContainer(
            url: URL(fileURLWithPath: arguments[2]), schema: try Schema.load(contentsOf: URL(fileURLWithPath: arguments[3])),
            options: options, logger: logger)
        if role == "upload" {
            let saved = try await device.store.read { try $0.fetchSnapshot(entityName: "Note", id: assetNoteID) } != nil
            if !saved {
                let bytes = assetBytes(kibibytes: Int(arguments[8]) ?? 1024, seed: UInt64(arguments[9]) ?? 1)
                try await device.store.write(author: "app") { context in
                    try context.insert(
                        EntitySnapshot(entityName: "Note", id: assetNoteID, values: ["title": "asset", "attachment": .data(bytes)]))
                }
            }
            say("saved")
        }
        if device.store.schema.mirroredEntities.contains(where: { $0.attributes.contains(where: \.isEncrypted) }) {
            // Both devices are alice's: the first sets the passphrase up, the second unlocks with it.
            try await device.setUpEncryption(passphrase: "asset crash")
        }
        say("sync")
        if arguments.count > 10, let milliseconds = Int(arguments[10]) {
            // Killed by its own timer, so the moment lands inside the transfer however late the
            // test reads "sync" on a loaded machine.
            Thread.detachNewThread {
                Thread.sleep(forTimeInterval: Double(milliseconds) / 1000)
                kill(getpid(), SIGKILL)
            }
        }
        try await device.sync()
        say("done")
        try await device.close()
    }

    static func note(title: String) -> EntitySnapshot {
        EntitySnapshot(entityName: "Note", id: UUID(), values: ["title": .string(title), "body": .string(String(repeating: "x", count: 200))])
    }

    static func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
}
