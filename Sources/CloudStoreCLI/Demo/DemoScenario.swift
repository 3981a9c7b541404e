import CloudStore
import CloudStoreServer
import Foundation
import NotesExample

/// The demo's story, run against an in-process server with two devices of one user (alice) that
/// sync only when told, so every run prints the same steps in the same order; then alice shares
/// the folder with bob and carol, each on a device of their own (`DemoScenario+Sharing.swift`).
struct DemoScenario {
    struct Summary {
        var elapsed: Duration
        var devices: Int
        var objects: Int
        var conflicts: Int
        /// How many users the folder was shared with.
        var sharedWith: Int
    }

    /// What the first chapter left: the folder "Ideas" and its notes, in the order they were created
    /// ("Groceries", "Trip to Lisbon", "Book list").
    struct FolderOfNotes {
        var folder: Folder
        var notes: [Note.ID]
        /// Values that lost a conflict.
        var conflicts: Int
    }

    /// Token → user record name: devices A and B are alice's.
    static let users = ["alice-token": "_alice", "bob-token": "_bob", "carol-token": "_carol"]
    static let containerIdentifier = "iCloud.com.example.notes"
    static let stepCount = 8 + sharingStepCount

    /// The example Notes app's schema, built from its `@Model` types (`Sources/NotesExample`).
    let schema = NotesModel.schema
    let directory: URL
    let context: CommandContext
    let progress: ProgressReporter

    init(directory: URL, context: CommandContext) {
        self.directory = directory
        self.context = context
        self.progress = ProgressReporter("demo", total: Self.stepCount, output: context.output)
    }

    /// Starts the server and the devices, tells the story, and closes them all (also on failure).
    func run() async throws -> Summary {
        let started = ContinuousClock.now
        let serverData = directory.appendingPathComponent("server", isDirectory: true)
        let server = try await CloudServer.start(
            configuration: ServerConfiguration(
                host: "127.0.0.1", port: 0, storage: .sqlite(directory: serverData.path),
                containers: [Self.containerIdentifier], users: Self.users,
                logger: context.logger("server")))
        var devices: [PersistentCloudContainer] = []
        do {
            say("CloudStore demo: an embedded server and two devices of one user, schema \"\(schema.name)\" version \(schema.version)")
            say("   server    \(server.baseURL.absoluteString) (SQLite in \(serverData.path))")
            let a = try await device("A", token: "alice-token", server: server.baseURL)
            devices.append(a)
            let b = try await device("B", token: "alice-token", server: server.baseURL)
            devices.append(b)
            say("")
            let folder = try await story(a, b)
            let sharedWith = try await sharing(folder, owner: a, server: server.baseURL, devices: &devices)
            for device in devices { try await device.close() }
            try await server.shutdown()
            progress.finish()
            return Summary(
                elapsed: started.duration(to: .now), devices: devices.count, objects: folder.notes.count + 1,
                conflicts: folder.conflicts, sharedWith: sharedWith)
        } catch {
            for device in devices { try? await device.close() }
            try? await server.shutdown()
            progress.finish()
            throw error
        }
    }

    /// Opens the device `name` of the user whose token is `token`, and says where its store is.
    func device(_ name: String, token: String, server: URL) async throws -> PersistentCloudContainer {
        var options = PersistentCloudContainer.Options(
            server: .init(url: server, containerIdentifier: Self.containerIdentifier, token: token, deviceID: name),
            conflictPolicy: .serverWins)
        options.automaticallySync = false
        let url = directory.appendingPathComponent("\(name).sqlite")
        let container = try await PersistentCloudContainer(
            url: url, schema: schema, options: options, logger: context.logger("mirroring"))
        say("   device \(name)  \(url.path)")
        return container
    }

    /// The numbered steps of two devices of one user; answers the folder device A created.
    private func story(_ a: PersistentCloudContainer, _ b: PersistentCloudContainer) async throws -> FolderOfNotes {
        let folder = Folder(title: "Ideas")
        let titles = ["Groceries", "Trip to Lisbon", "Book list"]
        let notes = titles.map { Note(title: $0, created: Date(), folder: folder.id) }
        try await a.store.write(author: "demo", contextName: "A") { context in
            try context.insert(folder)
            for note in notes { try context.insert(note) }
        }
        step(1, "Device A creates folder \"Ideas\" with \(titles.count) notes: \(titles.map { "\"\($0)\"" }.joined(separator: ", "))")

        let created = try a.store.history(after: nil, matching: HistoryFilter(authors: ["demo"])).flatMap(\.changes)
        try await a.sync()
        let afterA = try await a.status()
        step(
            2,
            "Device A syncs: \(created.count) changed objects to upload (\(Self.byEntity(created))); \(afterA.hasNothingToUpload ? "nothing" : "\(afterA.pendingUploads) records") left to upload")

        let imported = try await fetch(b)
        step(3, "Device B syncs: fetched \(imported.count) records (\(Self.byEntity(imported)))")
        let received = try await noteTitles(on: b)
        say("   B now has folder \"Ideas\" with \(received.count) notes: \(received.joined(separator: ", "))")

        let groceries = notes[0].id
        let aTitle = "Groceries for Saturday"
        let bTitle = "Groceries (bring bags)"
        try await edit(groceries, on: a, as: "A") { $0.title = aTitle }
        try await edit(groceries, on: b, as: "B") { note in
            note.title = bTitle
            note.pinned = true
        }
        step(4, "Both devices are offline and edit note \"Groceries\":")
        say("   A retitles it \"\(aTitle)\"; B retitles it \"\(bTitle)\" and pins it")

        try await a.sync()
        step(5, "Device A comes online first and syncs: its title reaches the server")

        try await b.sync()
        let conflicts = try b.conflicts()
        let final = try await b.store.read { context in try context.fetch(Note.self, id: groceries) }
        step(
            6,
            "Device B syncs: \(SchemaValidateCommand.count(conflicts.count, "conflict")) on Note.title, resolved by the policy \(conflicts.first?.policy ?? "serverWins")")
        say(
            "   winner: \(final.map { "\"\($0.title)\"" } ?? "?") (A's, from the server); B's pin is kept, since only B changed it (pinned = \(final.map { "\($0.pinned)" } ?? "?"))")
        say("   B's conflict log:")
        context.output.print(ConflictsCommand.table(conflicts, indent: "     "))

        try await a.sync()
        let aFinal = try await a.store.read { context in try context.fetch(Note.self, id: groceries) }
        let agree = aFinal != nil && aFinal?.title == final?.title && aFinal?.pinned == final?.pinned
        step(
            7,
            "Device A syncs again: \(agree ? "both devices agree" : "the devices DISAGREE"): \(aFinal.map { "\"\($0.title)\"" } ?? "?"), pinned = \(aFinal.map { "\($0.pinned)" } ?? "?")")

        let history = try b.store.history(after: nil)
        step(8, "History of device B (\(SchemaValidateCommand.count(history.count, "transaction"))): its own edit and what it imported")
        for transaction in history {
            say("   " + HistoryCommand.headline(transaction))
            context.output.print(TextTable(transaction.changes.map(HistoryCommand.row), indent: "     "))
        }
        guard agree else {
            throw CommandError("the devices did not converge on note \(groceries): report this as a bug, with the output of --debug 3")
        }
        return FolderOfNotes(folder: folder, notes: notes.map(\.id), conflicts: conflicts.count)
    }

    /// Fetches into `device`; answers the changes the fetch wrote (its import transactions).
    private func fetch(_ device: PersistentCloudContainer) async throws -> [HistoryChange] {
        let before = try device.store.currentHistoryToken()
        try await device.sync()
        return try device.store.history(after: before, matching: HistoryFilter(authors: ["cloudstore.import"]))
            .flatMap(\.changes)
    }

    /// `1 Folder, 3 Note`.
    static func byEntity(_ changes: [HistoryChange]) -> String {
        Dictionary(grouping: changes, by: \.entityName).sorted { $0.key < $1.key }
            .map { "\($0.value.count) \($0.key)" }.joined(separator: ", ")
    }

    /// Changes note `id` on `device` as the app edits a note: reads it, changes it, saves it (the
    /// update records only the properties that changed).
    func edit(_ id: Note.ID, on device: PersistentCloudContainer, as name: String, _ change: @escaping @Sendable (inout Note) -> Void) async throws {
        try await device.store.write(author: "demo", contextName: name) { context in
            guard var note = try context.fetch(Note.self, id: id) else {
                throw CommandError("note \(id) is not on device \(name): report this as a bug, with the output of --debug 3")
            }
            change(&note)
            try context.update(note)
        }
    }

    func step(_ number: Int, _ text: String) {
        say("\(number). \(text)")
        progress.update(completed: number)
    }

    /// Prints a narrative line; on a terminal it first clears the progress line.
    func say(_ line: String) {
        if context.output.isTerminal { context.output.writeError("\r\u{1B}[K") }
        context.output.print(line)
    }
}
