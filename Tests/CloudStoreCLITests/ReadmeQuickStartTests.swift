import CloudStore
import CloudStoreTesting
import Foundation
import Logging
import Testing

// --- the README's models, as written there ---
@Model
struct Folder {
    var id = UUID.timeOrdered()
    var title = ""
    @Relationship(deleteRule: .cascade, inverse: \Note.folder) var notes: [Note.ID] = []
}

@Model
struct Note {
    var id = UUID.timeOrdered()
    var title = ""
    var body: String?
    var pinned = false
    var created: Date?
    var folder: Folder.ID?
}
// --- end ---

/// The README's quick start, as written there, against `cloudstore serve` in a child process: no
/// schema file, the models declared once.
@Suite("README quick start")
struct ReadmeQuickStartTests {
    @Test func twoDevicesSyncThroughServe() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let directory = try TemporaryDirectory()
            let serverURL = server.baseURL
            var quiet = Logger(label: "cloudstore.tests")
            quiet.logLevel = .warning
            // --- as in the README, with the server's URL and the files in a temporary folder ---
            let schema = Schema(name: "Notes", version: 1, entities: [Folder.self, Note.self])

            func device(_ name: String, _ schema: Schema) async throws -> PersistentCloudContainer {
                try await PersistentCloudContainer(
                    url: directory.file("\(name).sqlite"), schema: schema,
                    options: .init(server: .init(url: serverURL, containerIdentifier: "iCloud.com.example.notes",
                                                 token: "alice-token")),
                    logger: quiet)
            }
            let phone = try await device("phone", schema)
            let laptop = try await device("laptop", schema)

            let folder = Folder(title: "Ideas")
            try await phone.store.write(author: "app") { context in
                try context.insert(folder)
                try context.insert(Note(title: "Sync on Linux", created: Date(), folder: folder.id))
            }
            try await phone.waitUntilSynced()   // uploaded
            try await laptop.waitUntilSynced()  // and fetched

            let folderID = folder.id
            let inFolder = FetchDescriptor<Note>(predicate: #Predicate { $0.folder == folderID },
                                                 sortBy: [SortDescriptor(\.created, order: .reverse)])
            let notes = try await laptop.store.read { try $0.fetch(inFolder) }
            // --- end ---
            #expect(notes.map(\.title) == ["Sync on Linux"])
            // The same query, live: the current array, then the laptop's next sync.
            var live = laptop.store.results(for: inFolder).makeAsyncIterator()
            #expect(try await live.next()?.map(\.title) == ["Sync on Linux"])
            try await phone.store.write(author: "app") { context in
                try context.insert(Note(title: "Typed queries", created: Date(), folder: folder.id))
            }
            try await phone.waitUntilSynced()
            try await laptop.waitUntilSynced()
            #expect(try await live.next()?.map(\.title) == ["Typed queries", "Sync on Linux"])
            try await phone.close()
            try await laptop.close()
        }
    }
}
