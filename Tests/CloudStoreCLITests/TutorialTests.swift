import CloudStore
import CloudStoreTesting
import Foundation
import Logging
import Testing

/// The tutorial (`Sources/CloudStore/CloudStore.docc/Tutorial.md`), step by step, as written there,
/// against `cloudstore serve` in a child process. Its models are the README's (`Folder`, `Note`,
/// declared in `ReadmeQuickStartTests.swift`), as the tutorial's are.
@Suite("Tutorial")
struct TutorialTests {
    @Test func fromOneDeviceToTwoSyncedDevicesAConflictAndASharedFolder() async throws {
        let directory = try TemporaryDirectory()
        var quiet = Logger(label: "cloudstore.tests")
        quiet.logLevel = .warning

        // --- Step 3: save and query on one device ---
        let schema = Schema(name: "Notes", version: 1, entities: [Folder.self, Note.self])
        let store = try PersistentStore(url: directory.file("notes.sqlite"), schema: schema, logger: quiet)
        let groceries = Folder(title: "Groceries")
        try await store.write(author: "app") { context in
            try context.insert(groceries)
            try context.insert(Note(title: "Milk", created: Date(), folder: groceries.id))
            try context.insert(Note(title: "Bread", created: Date(), folder: groceries.id))
        }
        let groceriesID = groceries.id
        let inGroceries = FetchDescriptor<Note>(
            predicate: #Predicate { $0.folder == groceriesID }, sortBy: [SortDescriptor(\.title)])
        let titles = try await store.read { try $0.fetch(inGroceries) }.map(\.title)
        #expect(titles == ["Bread", "Milk"])
        var live = store.results(for: inGroceries).makeAsyncIterator()
        #expect(try await live.next()?.map(\.title) == ["Bread", "Milk"])
        try await store.write(author: "app") { try $0.insert(Note(title: "Apples", folder: groceriesID)) }
        #expect(try await live.next()?.map(\.title) == ["Apples", "Bread", "Milk"])
        try store.close()
        // --- end of step 3 ---

        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            // --- Step 4: two devices of one user ---
            func device(_ name: String, token: String) async throws -> PersistentCloudContainer {
                var options = PersistentCloudContainer.Options(
                    server: .init(url: server.baseURL, containerIdentifier: "iCloud.com.example.notes", token: token))
                options.automaticallySync = false  // sync when told, to see each step
                return try await PersistentCloudContainer(
                    url: directory.file("\(name).sqlite"), schema: schema, options: options, logger: quiet)
            }
            let phone = try await device("phone", token: "alice-token")
            let laptop = try await device("laptop", token: "alice-token")

            let folder = Folder(title: "Groceries")
            let milk = Note(title: "Milk", created: Date(), folder: folder.id)
            try await phone.store.write(author: "app") { context in
                try context.insert(folder)
                try context.insert(milk)
            }
            try await phone.sync()   // uploads the folder and the note
            try await laptop.sync()  // fetches them
            #expect(try await laptop.store.read { try $0.fetch(Note.self, id: milk.id) }?.title == "Milk")
            // --- end of step 4 ---

            // --- Step 5: both devices edit the same note offline ---
            try await phone.store.write(author: "app") { context in
                var note = try #require(try context.fetch(Note.self, id: milk.id))
                note.title = "Oat milk"
                try context.update(note)
            }
            try await laptop.store.write(author: "app") { context in
                var note = try #require(try context.fetch(Note.self, id: milk.id))
                note.title = "Milk, 2 litres"
                note.pinned = true
                try context.update(note)
            }
            try await phone.sync()   // the phone's title reaches the server first
            try await laptop.sync()  // the laptop's conflicts with it: merged field by field
            try await phone.sync()   // and the phone gets the laptop's pin

            let merged = try await laptop.store.read { try $0.fetch(Note.self, id: milk.id) }
            #expect(merged?.title == "Oat milk" && merged?.pinned == true)
            for conflict in try laptop.conflicts() {
                print("\(conflict.entityName).\(conflict.property): \(conflict.losingValue) lost to \(conflict.winningValue)")
            }
            // --- end of step 5 ---
            let conflicts = try laptop.conflicts()
            #expect(conflicts.map(\.property) == ["title"])
            #expect(conflicts.first?.losingValue == .string("Milk, 2 litres"))
            let onPhone = try await phone.store.read { try $0.fetch(Note.self, id: milk.id) }
            #expect(onPhone?.title == "Oat milk" && onPhone?.pinned == true)

            // --- Step 6: share the folder with bob ---
            let bobsPhone = try await device("bob", token: "bob-token")
            let share = try await phone.share(folder, with: [.init(user: "_bob", permission: .readWrite)], title: "Groceries")
            _ = try await bobsPhone.acceptShare(shortGUID: try #require(share.shortGUID))

            try await bobsPhone.store.write(author: "app") { try $0.insert(Note(title: "Coffee", folder: folder.id)) }
            try await bobsPhone.sync()
            try await phone.sync()
            let folderID = folder.id
            let shared = try await phone.store.read {
                try $0.fetch(FetchDescriptor<Note>(predicate: #Predicate { $0.folder == folderID }, sortBy: [SortDescriptor(\.title)]))
            }
            // --- end of step 6 ---
            #expect(shared.map(\.title) == ["Coffee", "Oat milk"])
            for container in [phone, laptop, bobsPhone] { try await container.close() }
        }
    }
}
