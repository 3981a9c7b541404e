import CloudStore
import Foundation
import Logging

/// A device the crash tests kill at random points: it mirrors a store through a server while it
/// makes seeded local changes, and says what it is about to commit ("intent …") and what it
/// committed ("commit …") so the test can check nothing is lost. A kill between the two lines may
/// land before or after the commit, so the test accepts either outcome for that one change.
struct DeviceWorkload {
    let store: URL
    let schema: URL
    let steps: Int
    let server: URL
    let container: String
    let token: String
    let seed: UInt64
    /// Whether to sync until nothing is pending before exiting.
    let drain: Bool

    init(arguments: [String]) {
        store = URL(fileURLWithPath: arguments[2])
        schema = URL(fileURLWithPath: arguments[3])
        steps = Int(arguments[4]) ?? 20
        server = URL(string: arguments[5])!
        container = arguments[6]
        token = arguments[7]
        seed = UInt64(arguments[8]) ?? 0
        drain = arguments.count > 9 && arguments[9] == "drain"
    }

    func run() async throws {
        var logger = Logger(label: "cloudstore.testhelper")
        logger.logLevel = .critical
        var options = PersistentCloudContainer.Options(
            server: .init(url: server, containerIdentifier: container, token: token, deviceID: "crashing"))
        options.automaticallySync = false
        let device = try await PersistentCloudContainer(
            url: store, schema: try Schema.load(contentsOf: schema), options: options, logger: logger)
        var random = SplitMix(state: seed)
        var mine = try await device.store.read { context in
            try context.fetchIDs(entityName: "Note", where: .beginsWith("title", "A-"))
        }
        for step in 0..<steps {
            let roll = random.next() % 10
            if roll < 4 || mine.isEmpty {
                let id = UUID()
                let title = "A-\(seed)-\(step)"
                say("intent insert \(id.uuidString) \(title)")
                try await device.store.write(author: "app") { context in
                    try context.insert(
                        EntitySnapshot(entityName: "Note", id: id, values: ["title": .string(title), "priority": .int64(Int64(step))]))
                }
                mine.append(id)
                say("commit insert \(id.uuidString) \(title)")
            } else if roll < 6 {
                let id = mine[Int(random.next() % UInt64(mine.count))]
                let title = "A-\(seed)-\(step)-edited"
                guard let previous = try await currentTitle(of: id, in: device) else { continue }
                say("intent update \(id.uuidString) \(title) \(previous)")
                try await device.store.write(author: "app") { context in
                    try context.update(EntitySnapshot(entityName: "Note", id: id, values: ["title": .string(title)]))
                }
                say("commit update \(id.uuidString) \(title) \(previous)")
            } else if roll < 7 {
                let id = mine.remove(at: Int(random.next() % UInt64(mine.count)))
                // Both lines name the title the deletion replaces, as an update's lines name the
                // title it overwrites: a kill between them may land after the commit, and then the
                // child itself replaced that title.
                guard let deletedTitle = try await currentTitle(of: id, in: device) else { continue }
                say("intent delete \(id.uuidString) - \(deletedTitle)")
                try await device.store.write(author: "app") { context in
                    try context.delete(entityName: "Note", id: id)
                }
                say("commit delete \(id.uuidString) - \(deletedTitle)")
            } else {
                say("sync")
                do {
                    try await device.sync()
                    say("synced")
                } catch {
                    say("sync-failed \(error)")
                }
            }
        }
        if drain {
            do {
                try await device.waitUntilSynced(timeout: .seconds(60))
                say("drained")
            } catch {
                say("drain-failed \(error)")
            }
        }
        say("done")
        try await device.close()
    }

    /// The title a change to note `id` replaces, read before the change ("-" when it has none);
    /// nil, said as "commit nothing", when the note is gone (another device deleted it, and an
    /// import removed it here). Nothing else writes to this store meanwhile, so what is read is
    /// what the change replaces.
    func currentTitle(of id: UUID, in device: PersistentCloudContainer) async throws -> String? {
        let old = try await device.store.read { context in
            try context.fetchSnapshot(entityName: "Note", id: id)
        }
        guard let old else {
            say("commit nothing \(id.uuidString) gone -")
            return nil
        }
        return if case .string(let text)? = old.values["title"] { text } else { "-" }
    }

    func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
}

struct SplitMix {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
