import CloudStore
import CloudStoreTesting
import Foundation
import Logging
import Testing

/// `cloudstore serve` as a child process on a loopback port, with two users, for end-to-end tests.
final class MirrorServer: Sendable {
    static let users = ["alice-token": "_alice", "bob-token": "_bob"]
    let process: ServerProcess
    let directory: TemporaryDirectory

    /// Starts `cloudstore serve` on a data directory of its own, or on `data`.
    static func start(data: URL? = nil) async throws -> MirrorServer {
        let directory = try TemporaryDirectory()
        let tokens = directory.file("tokens.json")
        try JSONEncoder().encode(users).write(to: tokens)
        let process = try await ServerProcess.launch(["--data", (data ?? directory.file("data")).path, "--tokens", tokens.path])
        return MirrorServer(process: process, directory: directory)
    }

    private init(process: ServerProcess, directory: TemporaryDirectory) {
        self.process = process
        self.directory = directory
    }

    var url: URL { process.baseURL }

    func stop() async {
        _ = await process.terminate()
    }
}

/// One device of a user: a container on its own store file that syncs only when told, unless
/// `automatic` is set.
final class Device: Sendable {
    static let containerIdentifier = "iCloud.com.example.notes"
    let name: String
    let container: PersistentCloudContainer
    let directory: TemporaryDirectory

    static func make(
        _ name: String, server: URL?, token: String = "alice-token", policy: ConflictPolicy = .serverWins,
        automatic: Bool = false, pageSize: Int? = nil, directory: TemporaryDirectory? = nil, logger: Logger = .quiet,
        configure: (inout PersistentCloudContainer.Options) -> Void = { _ in }
    ) async throws -> Device {
        let directory = try directory ?? TemporaryDirectory()
        var options = PersistentCloudContainer.Options(
            server: server.map {
                .init(url: $0, containerIdentifier: containerIdentifier, token: token, deviceID: name)
            },
            conflictPolicy: policy)
        options.automaticallySync = automatic
        options.fetchPageSize = pageSize
        configure(&options)
        let container = try await PersistentCloudContainer(
            url: directory.file("\(name).sqlite"), schema: try Schema.notes(), options: options, logger: logger)
        return Device(name: name, container: container, directory: directory)
    }

    private init(name: String, container: PersistentCloudContainer, directory: TemporaryDirectory) {
        self.name = name
        self.container = container
        self.directory = directory
    }

    var store: PersistentStore { container.store }

    func write(_ block: @escaping @Sendable (WriteContext) throws -> Void) async throws {
        try await store.write(author: "app", contextName: name, block)
    }

    func sync() async throws { try await container.sync() }

    func notes() throws -> [Note] { try store.read { try $0.fetch(Note.self, sortBy: [.ascending("title")]) } }
    func folders() throws -> [Folder] { try store.read { try $0.fetch(Folder.self, sortBy: [.ascending("title")]) } }
    func tags() throws -> [Tag] { try store.read { try $0.fetch(Tag.self, sortBy: [.ascending("name")]) } }
    func note(_ id: UUID) throws -> Note? { try store.read { try $0.fetch(Note.self, id: id) } }

    /// Every mirrored object as snapshots with their to-many links, sorted: what two converged
    /// devices agree on.
    func contents() throws -> [EntitySnapshot] { try store.mirroredContents() }

    func close() async {
        try? await container.close()
    }
}

/// Runs a test body with a server and closes everything after it, whatever happens.
func withServer<T>(_ body: (MirrorServer) async throws -> T) async throws -> T {
    let server = try await MirrorServer.start()
    do {
        let result = try await body(server)
        await server.stop()
        return result
    } catch {
        await server.stop()
        throw error
    }
}

extension PersistentStore {
    /// Every object as snapshots with their to-many links, sorted: what two converged devices agree on.
    func mirroredContents() throws -> [EntitySnapshot] {
        try read { context in
            var all: [EntitySnapshot] = []
            for entity in context.schema.entities {
                for var snapshot in try context.fetchSnapshots(entityName: entity.name) {
                    for relationship in entity.relationships where relationship.isToMany {
                        snapshot.toMany[relationship.name] = try context.relatedIDs(
                            entityName: entity.name, id: snapshot.id, relationship: relationship.name
                        ).sorted { $0.uuidString < $1.uuidString }
                    }
                    all.append(snapshot)
                }
            }
            return all.sorted { ($0.entityName, $0.id.uuidString) < ($1.entityName, $1.id.uuidString) }
        }
    }
}
