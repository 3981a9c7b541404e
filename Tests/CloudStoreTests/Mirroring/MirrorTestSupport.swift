import CloudStore
import CloudStoreTesting
import Foundation
import Logging
import Testing

extension WriteContext {
    /// Puts a note in `folder` (in none when nil), as the app moves a note between folders.
    func move(note id: UUID, to folder: UUID?) throws {
        try setRelated(entityName: "Note", id: id, relationship: "folder", to: folder.map { [$0] } ?? [])
    }
}

extension TestDevice {
    /// Saves `note` as `change` leaves it, in a unit of work of its own, as the app edits a note.
    func edit(_ note: Note, _ change: (inout Note) -> Void) async throws {
        var edited = note
        change(&edited)
        try await write { [edited] context in try context.update(edited) }
    }

    /// A device of the Notes app: the shared `make` with `Schema.notes()` and a quiet logger.
    static func make(
        _ name: String, server: URL?, token: String = "alice-token", policy: ConflictPolicy = .serverWins,
        automatic: Bool = false, pageSize: Int? = nil, directory: TemporaryDirectory? = nil, logger: Logger = .quiet,
        configure: (inout PersistentCloudContainer.Options) -> Void = { _ in }
    ) async throws -> TestDevice {
        try await make(
            name, schema: Schema.notes(), server: server, token: token, policy: policy, automatic: automatic,
            pageSize: pageSize, directory: directory, logger: logger, configure: configure)
    }

    func notes() throws -> [Note] { try store.read { try $0.fetch(Note.self, sortBy: [.ascending("title")]) } }
    func folders() throws -> [Folder] { try store.read { try $0.fetch(Folder.self, sortBy: [.ascending("title")]) } }
    func tags() throws -> [Tag] { try store.read { try $0.fetch(Tag.self, sortBy: [.ascending("name")]) } }
    func note(_ id: UUID) throws -> Note? { try store.read { try $0.fetch(Note.self, id: id) } }

    /// Every mirrored object as snapshots with their to-many links, sorted: what two converged
    /// devices agree on.
    func contents() throws -> [EntitySnapshot] { try store.mirroredContents() }
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

extension ServerProcess {
    /// The PostgreSQL the tests may use (`bash .ci/run` sets it); nil skips the tests that need it.
    static let testPostgresURL = ProcessInfo.processInfo.environment["CLOUDSTORE_TEST_POSTGRES_URL"]

    /// Two `cloudstore serve` processes on one fresh PostgreSQL schema of ``testPostgresURL``,
    /// knowing `users` (token → user record name), for `body`.
    static func withTwoOnPostgres(users: [String: String], _ body: (URL, URL) async throws -> Void) async throws {
        try await withTwoOnPostgres(users: users) { first, second, _ in try await body(first, second) }
    }

    /// ``withTwoOnPostgres(users:_:)`` that also hands `body` the name of the PostgreSQL schema
    /// the servers' tables are in.
    static func withTwoOnPostgres(users: [String: String], _ body: (URL, URL, _ schema: String) async throws -> Void) async throws {
        try await TestPostgresSchema.with(in: try #require(testPostgresURL)) { url in
            let schema = try #require(URLComponents(string: url)?.queryItems?.first { $0.name == "schema" }?.value)
            let root = try TemporaryDirectory(prefix: "cloudstore-pg-two")
            let tokens = root.file("tokens.json")
            try JSONEncoder().encode(users).write(to: tokens)
            let first = try await ServerProcess.launch(["--postgres", url, "--tokens", tokens.path] + ServerProcess.containerArguments())
            let second = try await ServerProcess.launch(["--postgres", url, "--tokens", tokens.path] + ServerProcess.containerArguments())
            do {
                try await body(first.baseURL, second.baseURL, schema)
            } catch {
                _ = await first.terminate()
                _ = await second.terminate()
                throw error
            }
            _ = await first.terminate()
            _ = await second.terminate()
            withExtendedLifetime(root) {}
        }
    }
}
