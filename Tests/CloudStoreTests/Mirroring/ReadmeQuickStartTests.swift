import CloudStore
import CloudStoreTesting
import Foundation
import Testing

/// The README's quick start, as written there (its entity types are the test fixtures), against
/// `cloudstore serve` in a child process.
@Suite("README quick start")
struct ReadmeQuickStartTests {
    @Test func twoDevicesSyncThroughServe() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let directory = try TemporaryDirectory()
            let serverURL = server.baseURL
            // --- as in the README, with the server's URL and the files in a temporary folder ---
            let schema = try Schema.load(contentsOf: RepositoryPaths.notesSchema)

            func device(_ name: String) async throws -> PersistentCloudContainer {
                try await PersistentCloudContainer(
                    url: directory.file("\(name).sqlite"), schema: schema,
                    options: .init(server: .init(url: serverURL, containerIdentifier: "iCloud.com.example.notes",
                                                 token: "alice-token")),
                    logger: .quiet)
            }
            let phone = try await device("phone")
            let laptop = try await device("laptop")

            let folder = Folder(title: "Ideas")
            try await phone.store.write(author: "app") { context in
                try context.insert(folder)
                try context.insert(Note(title: "Sync on Linux", folder: folder.id))
            }
            try await phone.waitUntilSynced()   // uploaded
            try await laptop.waitUntilSynced()  // and fetched
            let notes = try await laptop.store.read { try $0.fetch(Note.self, where: .equals("folder", folder.id)) }
            // --- end ---
            #expect(notes.map(\.title) == ["Sync on Linux"])
            try await phone.close()
            try await laptop.close()
        }
    }
}
