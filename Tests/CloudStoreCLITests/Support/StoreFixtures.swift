import CloudStore
import CloudStoreSync
import CloudStoreTesting
import Foundation
import Logging
import Testing

/// Store files for the commands that read them.
enum StoreFixtures {
    static func schema(_ path: String = Fixtures.notesSchema) throws -> Schema {
        try Schema.load(contentsOf: URL(fileURLWithPath: path))
    }

    /// A local store of Notes version 1 holding one note whose `rank` is 7 (version 2 renames it
    /// `priority` and the example migration step clamps it to 3).
    /// A project folder laid out as this repository is (`Schema/Notes.json`, `Migrations/Notes/`)
    /// whose one migration step sets every note's priority to 2; answers the schema file and the
    /// project folder.
    static func projectWithMigrationStep(in directory: URL) throws -> (schema: URL, project: URL) {
        let project = directory.appendingPathComponent("project")
        let steps = project.appendingPathComponent("Migrations/Notes")
        try FileManager.default.createDirectory(at: steps, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: project.appendingPathComponent("Schema"), withIntermediateDirectories: true)
        let schema = project.appendingPathComponent("Schema/Notes.json")
        try FileManager.default.copyItem(at: URL(fileURLWithPath: Fixtures.notesSchema), to: schema)
        try Data(#"UPDATE "Note" SET "priority" = 2;"#.utf8).write(to: steps.appendingPathComponent("2-set-priority.sql"))
        return (schema, project)
    }

    static func notesV1Store(in directory: URL) throws -> (url: URL, note: UUID) {
        let url = directory.appendingPathComponent("notes-v1.sqlite")
        let store = try PersistentStore(url: url, schema: try schema(Fixtures.notesV1Schema))
        let note = UUID()
        try store.write(author: "app") { context in
            try context.insert(EntitySnapshot(entityName: "Note", id: note, values: ["title": .string("Old"), "rank": .int64(7)]))
        }
        try store.close()
        return (url, note)
    }

    /// A local store of Notes version 2 with three transactions: `app`/`editor` inserts a folder
    /// and a note, `app`/`editor` renames the note, `importer` deletes a second note.
    static func notesStore(in directory: URL) throws -> (url: URL, folder: UUID, note: UUID) {
        let url = directory.appendingPathComponent("notes.sqlite")
        let store = try PersistentStore(url: url, schema: try schema())
        let folder = UUID()
        let note = UUID()
        let doomed = UUID()
        try store.write(author: "app", contextName: "editor") { context in
            try context.insert(EntitySnapshot(entityName: "Folder", id: folder, values: ["title": .string("Ideas")]))
            try context.insert(
                EntitySnapshot(entityName: "Note", id: note, values: ["title": .string("Draft"), "folder": .uuid(folder)]))
            try context.insert(EntitySnapshot(entityName: "Note", id: doomed, values: ["title": .string("Doomed")]))
        }
        try store.write(author: "app", contextName: "editor") { context in
            try context.update(EntitySnapshot(entityName: "Note", id: note, values: ["title": .string("Final"), "pinned": .bool(true)]))
        }
        try store.write(author: "importer") { context in
            try context.delete(entityName: "Note", id: doomed)
        }
        try store.close()
        return (url, folder, note)
    }

    /// The store files of two devices of one user that mirrored through an in-process server:
    /// A created a note, B received it, both changed its title offline, A synced first, then B
    /// (so B's log holds B's title losing to A's under `serverWins`).
    static func conflictedStores(in directory: URL) async throws -> (a: URL, b: URL, note: UUID) {
        let note = UUID()
        try await devices(["A", "B"], users: ["alice-token": "_alice"], in: directory) { devices in
            let (a, b) = (devices[0], devices[1])
            try await a.write { context in
                try context.insert(EntitySnapshot(entityName: "Note", id: note, values: ["title": .string("Original")]))
            }
            try await a.sync()
            try await b.sync()
            for (device, title) in [(a, "A's title"), (b, "B's title")] {
                try await device.store.write(author: "app") { context in
                    try context.update(EntitySnapshot(entityName: "Note", id: note, values: ["title": .string(title)]))
                }
            }
            try await a.sync()
            try await b.sync()
        }
        return (directory.appendingPathComponent("A.sqlite"), directory.appendingPathComponent("B.sqlite"), note)
    }

    /// The store file of a device whose note "large" (1.5 MB of body) the server refused, beside
    /// a note "small" it took, and whose note "waiting" it answered with `THROTTLED` (retry after
    /// 30 s) at ``failedStoreNow``.
    static func failedStore(in directory: URL) async throws -> (url: URL, refused: UUID, retrying: UUID) {
        let (refused, retrying) = (UUID(), UUID())
        let faults = FaultInjectingDatabase.Box()
        let configure: @Sendable (inout PersistentCloudContainer.Options) -> Void = { options in
            options.storeConfiguration.now = { failedStoreNow }
            options.configureEngine = faults.configureEngine
        }
        try await devices(["A"], users: ["alice-token": "_alice"], in: directory, configure: configure) { devices in
            try await devices[0].write { context in
                try context.insert(
                    EntitySnapshot(
                        entityName: "Note", id: refused,
                        // 600 KB by the save's estimate, 1.2 MB once JSON escapes each quote.
                        values: ["title": .string("large"), "body": .string(String(repeating: "\"", count: 600_000))]))
                try context.insert(EntitySnapshot(entityName: "Note", id: UUID(), values: ["title": .string("small")]))
            }
            try await devices[0].container.sendChanges()
            try await devices[0].write { try $0.insert(EntitySnapshot(entityName: "Note", id: retrying, values: ["title": .string("waiting")])) }
            try #require(faults.database).inject(.recordError(.throttled, retryAfter: 30), into: .recordsModify)
            try await devices[0].container.sendChanges()
        }
        return (directory.appendingPathComponent("A.sqlite"), refused, retrying)
    }

    /// The time of ``failedStore(in:)``'s device.
    static let failedStoreNow = Date(timeIntervalSince1970: 1_800_000_000)

    /// The store file of a device whose zone was deleted on the server (by another device) while
    /// it held a note it had not sent: it waits for the app's decision.
    static func zoneDeletedStore(in directory: URL) async throws -> URL {
        try await devices(["A"], users: ["alice-token": "_alice"], in: directory) { devices in
            let device = devices[0]
            try await device.write { try $0.insert(EntitySnapshot(entityName: "Note", id: UUID(), values: ["title": .string("sent")])) }
            try await device.sync()
            try await device.write { try $0.insert(EntitySnapshot(entityName: "Note", id: UUID(), values: ["title": .string("unsent")])) }
            let server = try #require(device.container.options.server)
            let database = HTTPCloudDatabase(
                baseURL: server.url, container: server.containerIdentifier, token: "alice-token", deviceID: "elsewhere")
            _ = try await database.modifyZones(ZonesModifyRequest(operations: [.init(.delete, device.container.zoneID)]))
            try await device.container.fetchChanges()
        }
        return directory.appendingPathComponent("A.sqlite")
    }

    /// The store files of three users who shared through an in-process server: alice shared
    /// folder "Shopping" (notes "Milk" and "Eggs") with bob (`READ_WRITE`) and carol
    /// (`READ_ONLY`); bob and carol accepted by the short GUID, alice synced (both joined), then
    /// carol left and alice synced again. So alice's store holds her share and its whole activity
    /// (invited ×2, joined ×2, carol left), bob's the share he joined, carol's no share but the
    /// end of her access.
    static func sharedStores(in directory: URL) async throws -> (alice: URL, bob: URL, carol: URL, folder: UUID) {
        let folder = UUID()
        let users = ["alice-token": "_alice", "bob-token": "_bob", "carol-token": "_carol"]
        try await devices(["alice", "bob", "carol"], users: users, in: directory) { devices in
            let (alice, bob, carol) = (devices[0], devices[1], devices[2])
            try await alice.write { context in
                try context.insert(EntitySnapshot(entityName: "Folder", id: folder, values: ["title": .string("Shopping")]))
                for title in ["Milk", "Eggs"] {
                    try context.insert(
                        EntitySnapshot(entityName: "Note", id: UUID(), values: ["title": .string(title), "folder": .uuid(folder)]))
                }
            }
            try await alice.sync()
            let share = try await alice.container.share(
                entityName: "Folder", id: folder,
                with: [.init(user: "_bob", permission: .readWrite), .init(user: "_carol", permission: .readOnly)])
            let guid = try #require(share.shortGUID, "the server gave the share a short GUID")
            _ = try await bob.container.acceptShare(shortGUID: guid)
            let carolsShare = try await carol.container.acceptShare(shortGUID: guid)
            try await alice.sync()
            try await carol.container.leaveShare(carolsShare)
            try await alice.sync()
        }
        return (
            directory.appendingPathComponent("alice.sqlite"), directory.appendingPathComponent("bob.sqlite"),
            directory.appendingPathComponent("carol.sqlite"), folder
        )
    }

    /// Runs `body` with one device per name (each its own user when `users` maps a token
    /// `<name>-token`, else alice's) on an in-process server storing under `directory/server`,
    /// then closes them and moves their store files, `<name>.sqlite`, into `directory`.
    private static func devices(
        _ names: [String], users: [String: String], in directory: URL,
        configure: (inout PersistentCloudContainer.Options) -> Void = { _ in }, _ body: ([TestDevice]) async throws -> Void
    ) async throws {
        var logger = Logger(label: "test.mirroring")
        logger.logLevel = .error
        let stores = try TemporaryDirectory(prefix: "cloudstore-cli-devices")
        try await TestServer.with(users: users, storage: .sqlite(directory: directory.appendingPathComponent("server"))) {
            server in
            var devices: [TestDevice] = []
            for name in names {
                let token = users["\(name)-token"] == nil ? "alice-token" : "\(name)-token"
                devices.append(
                    try await TestDevice.make(
                        name, schema: try schema(), server: server.baseURL, containerIdentifier: "iCloud.cli.test", token: token,
                        directory: stores, logger: logger, configure: configure))
            }
            try await body(devices)
            for device in devices { try await device.container.close() }
        }
        // The devices' directory goes away with them: the closed store files move to `directory`.
        for name in try FileManager.default.contentsOfDirectory(atPath: stores.url.path) {
            try FileManager.default.moveItem(at: stores.file(name), to: directory.appendingPathComponent(name))
        }
    }

    /// A file that is not a store.
    static func textFile(in directory: URL) throws -> URL {
        let url = directory.appendingPathComponent("notes.txt")
        try Data("not a database\n".utf8).write(to: url)
        return url
    }
}
