import CloudStore
import Foundation
import NotesExample

extension DemoScenario {
    static let sharingStepCount = 8

    /// The sharing chapter: alice (device A) shares the folder with bob (`READ_WRITE`) and carol
    /// (`READ_ONLY`), each on a device of their own; bob's edit reaches alice, carol's is refused,
    /// bob leaves and alice's share activity says who joined and left. Opened devices are
    /// appended to `devices` (the caller closes them). Answers how many users the folder was
    /// shared with.
    func sharing(
        _ folder: FolderOfNotes, owner a: PersistentCloudContainer, server: URL, devices: inout [PersistentCloudContainer]
    ) async throws -> Int {
        say("")
        say("Sharing: devices A and B are alice's; bob and carol each have a device of their own")
        let bob = try await device("bob", token: "bob-token", server: server)
        devices.append(bob)
        let carol = try await device("carol", token: "carol-token", server: server)
        devices.append(carol)
        say("")
        let (lisbon, bookList) = (folder.notes[1], folder.notes[2])

        let invitations: [PersistentCloudContainer.Invitation] = [
            .init(user: "_bob", permission: .readWrite), .init(user: "_carol", permission: .readOnly),
        ]
        let share = try await a.share(folder.folder, with: invitations, title: folder.folder.title)
        guard let guid = share.shortGUID else {
            throw CommandError("the server saved the share of folder Ideas without a short GUID: report this as a bug, with the output of --debug 3")
        }
        step(9, "Device A: alice shares folder \"Ideas\" with bob (READ_WRITE) and carol (READ_ONLY); short GUID \(guid)")
        say("   the folder and its \(folder.notes.count) notes moved into a zone of their own; as cloudstore shares prints it:")
        for line in SharesCommand.lines(share, user: Self.users["alice-token"]) { say("     " + line) }

        let bobsShare = try await bob.acceptShare(shortGUID: guid)
        let bobsNotes = try await noteTitles(on: bob)
        step(
            10,
            "Bob accepts with the short GUID: folder \"Ideas\" arrives with \(bobsNotes.count) notes: \(bobsNotes.joined(separator: ", "))")

        let carolsShare = try await carol.acceptShare(shortGUID: guid)
        step(11, "Carol accepts too: her permission is \(carolsShare.currentUserPermission.rawValue)")

        let bobsTitle = "Book list: Dune, Middlemarch"
        try await edit(bookList, on: bob, as: "bob") { $0.title = bobsTitle }
        try await bob.sync()
        step(12, "Bob retitles note \"Book list\" \"\(bobsTitle)\" and syncs")

        try await a.sync()
        let received = try await title(of: bookList, on: a)
        let joined = try a.shareActivity().filter { $0.change == .joined }.compactMap(\.user)
        step(
            13,
            "Device A syncs: alice has bob's edit, \(received.map { "\"\($0)\"" } ?? "no title"); joined: \(joined.joined(separator: ", "))")
        guard received == bobsTitle else {
            throw CommandError("alice did not receive bob's edit of note \(bookList): report this as a bug, with the output of --debug 3")
        }

        let carolsTitle = "Trip to Porto"
        do {
            try await edit(lisbon, on: carol, as: "carol") { $0.title = carolsTitle }
            throw CommandError("carol's edit of note \(lisbon), shared with her read-only, was saved: report this as a bug")
        } catch let error as ContainerError {
            guard error.code == .readOnlyShare else { throw error }
            step(14, "Carol retitles note \"Trip to Lisbon\" \"\(carolsTitle)\": refused before anything is saved:")
            say("   \(error)")
        }

        try await bob.leaveShare(bobsShare)
        let left = try await noteTitles(on: bob)
        step(15, "Bob leaves the share: his copy goes (\(SchemaValidateCommand.count(left.count, "note")) left on his device)")

        try await a.sync()
        let activity = try a.shareActivity()
        step(16, "Device A syncs: alice's share activity, as cloudstore shares prints it:")
        context.output.print(SharesCommand.table(activity, indent: "     "))
        return invitations.count
    }

    /// The titles of the notes on `device`, sorted.
    func noteTitles(on device: PersistentCloudContainer) async throws -> [String] {
        try await device.store.read { context in
            try context.fetch(FetchDescriptor<Note>(sortBy: [SortDescriptor(\.title)])).map(\.title)
        }
    }

    /// The title of note `id` on `device`.
    private func title(of id: Note.ID, on device: PersistentCloudContainer) async throws -> String? {
        try await device.store.read { context in try context.fetch(Note.self, id: id)?.title }
    }
}
