import ArgumentParser
import CloudStore
import Foundation

/// `cloudstore demo [--keep]`: an embedded server and two devices of one user in one process,
/// narrated step by step: saves, sync, a conflict and its log, history; then the user shares a
/// folder with two others, one of whom may only read.
///
/// ```sh
/// $ swift run cloudstore demo
/// CloudStore demo: an embedded server and two devices of one user, schema "Notes" version 2
/// …
/// 1. Device A creates folder "Ideas" with 3 notes: "Groceries", "Trip to Lisbon", "Book list"
/// 2. Device A syncs: uploaded 4 objects
/// 3. Device B syncs: fetched 4 records (1 Folder, 3 Note)
/// …
/// 9. Device A: alice shares folder "Ideas" with bob (READ_WRITE) and carol (READ_ONLY); short GUID …
/// …
/// ```
public struct DemoCommand: CloudStoreSubcommand {
    public static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Watch two devices sync through an embedded server, with a conflict, then share a folder.",
        discussion: """
            Starts a server on a free loopback port with SQLite in a temporary folder, opens two \
            devices of one user with the example Notes app's model (Sources/NotesExample, written \
            as Schema/Notes.json), and narrates: device A creates a folder \
            of notes, device B receives them, both edit the same note offline, the conflict is \
            resolved (the server's value wins) and logged, and B's history is printed. Then alice, \
            whose devices A and B are, shares the folder with bob (read-write) and carol \
            (read-only), each on a device of their own; they accept by the short GUID, bob's edit \
            reaches alice, carol's is refused, bob leaves, and alice's share activity is printed. \
            Then everything is closed and deleted, unless --keep is given (the folder is printed, \
            to inspect with cloudstore history, status, conflicts and shares). --debug 2 shows \
            each request.

            Example:
              cloudstore demo
              cloudstore demo --keep --debug 1
            """)

    @Flag(help: "Keep the server's data and both stores in the temporary folder, and print where.")
    var keep = false

    @OptionGroup public var global: GlobalOptions

    public init() {}

    public func run(in context: CommandContext) async throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("cloudstore-demo-\(UUID().uuidString.prefix(8))", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let result: Result<DemoScenario.Summary, any Error>
        do {
            result = .success(try await DemoScenario(directory: directory, context: context).run())
        } catch {
            result = .failure(error)
        }
        if keep {
            context.output.print(
                "Kept the data in \(directory.path): server/ (the server's SQLite), A.sqlite, B.sqlite, bob.sqlite, carol.sqlite.")
            context.output.print("  Inspect it: cloudstore history --store \(directory.appendingPathComponent("B.sqlite").path)")
            context.output.print("              cloudstore shares --store \(directory.appendingPathComponent("A.sqlite").path)")
        } else {
            try? FileManager.default.removeItem(at: directory)
        }
        let summary = try result.get()
        context.output.print(
            "Done in \(CommandOutput.seconds(summary.elapsed)): \(summary.devices) devices, \(summary.objects) objects, \(SchemaValidateCommand.count(summary.conflicts, "conflict")) resolved and logged, a folder shared with \(SchemaValidateCommand.count(summary.sharedWith, "user"))\(keep ? "" : "; \(directory.path) removed").")
    }
}
