import CloudStore
import CloudStoreTesting
import Foundation
import Logging
import Testing

/// `status`, `history`, `conflicts` and `shares` only read the store: every file of its directory
/// keeps its bytes (SHA-256), and no file appears or goes (no `-wal` or `-shm` left behind).
@Suite("cloudstore status, history, conflicts and shares leave the store as it was")
struct CLIInspectionTests {
    /// Runs the four commands on `store`, each as plain text and as JSON; returns the text runs.
    static func inspect(_ store: URL) async -> (status: CLIResult, history: CLIResult, conflicts: CLIResult, shares: CLIResult) {
        var results: [CLIResult] = []
        for command in ["status", "history", "conflicts", "shares"] {
            results.append(await cloudstore(command, "--store", store.path))
            _ = await cloudstore(command, "--store", store.path, "--json")
        }
        return (results[0], results[1], results[2], results[3])
    }

    @Test func previousReleaseStore_isReadAsItIs_andStatusNamesTheUpgrade() async throws {
        try await TemporaryDirectory.with { directory in
            let url = directory.appendingPathComponent("A.sqlite")
            try FileManager.default.copyItem(at: Fixtures.previousReleaseStore, to: url)
            let before = try DirectoryChecksums(directory)
            #expect(before.names == ["A.sqlite"])

            let (status, history, conflicts, shares) = await Self.inspect(url)
            #expect(
                status.isOneLineFailure(
                    mentioning: "written by the previous CloudStore release", "run cloudstore migrate --store \(url.path) --schema"),
                "\(status.standardError)")
            #expect(history.status == 0, "\(history.standardError)")
            #expect(history.standardOutput.contains("insert  Note  A0000000-0000-0000-0000-000000000004"), "\(history.standardOutput)")
            #expect(conflicts.status == 0 && conflicts.outputLines == ["no conflicts logged"], "\(conflicts.standardError)")
            #expect(shares.status == 0 && shares.outputLines.first?.hasPrefix("no shares in ") == true, "\(shares.standardError)")

            let after = try DirectoryChecksums(directory)
            #expect(after == before, "before: \(before)\nafter:  \(after)")
        }
    }

    @Test func mirroredStoreWithPendingChangesAndAConflict_isReadAsItIs() async throws {
        try await TemporaryDirectory.with { directory in
            let (_, b, note) = try await StoreFixtures.conflictedStores(in: directory)
            var logger = Logger(label: "test.mirroring")
            logger.logLevel = .error
            // An edit saved offline (no server configured): pending until the next sync.
            let container = try await PersistentCloudContainer(url: b, schema: try StoreFixtures.schema(), logger: logger)
            try await container.store.write(author: "app") { context in
                try context.update(EntitySnapshot(entityName: "Note", id: note, values: ["title": .string("offline edit")]))
            }
            try await container.close()
            let before = try DirectoryChecksums(directory)
            // A closed store keeps an empty WAL and its index (GRDB closes its read-only readers
            // last, and they cannot delete them): read without touching either.
            #expect(before.names.filter { $0.hasPrefix("B.") } == ["B.sqlite", "B.sqlite-shm", "B.sqlite-wal", "B.sqlite.sync-lock"])

            let (status, history, conflicts, shares) = await Self.inspect(b)
            #expect(status.status == 0, "\(status.standardError)")
            #expect(status.standardOutput.contains("pending uploads   1\n"), "\(status.standardOutput)")
            #expect(status.standardOutput.contains("conflicts logged  1\n"))
            #expect(history.status == 0 && history.standardOutput.contains("update  Note  \(note.uuidString)  title"))
            #expect(conflicts.status == 0 && conflicts.outputLines.count == 2, "\(conflicts.standardOutput)")
            #expect(shares.status == 0, "\(shares.standardError)")

            let after = try DirectoryChecksums(directory)
            #expect(after == before, "before: \(before)\nafter:  \(after)")
        }
    }

    /// While an app has the store open, its WAL holds the latest transactions: the commands read
    /// them through it and write neither the main file nor the WAL. SQLite's `-shm` index is the
    /// exception every reader of a live WAL database makes (it records where it reads).
    @Test func storeAnAppHasOpen_isReadThroughItsWAL_andNeitherFileChanges() async throws {
        try await TemporaryDirectory.with { directory in
            let (url, _, _) = try StoreFixtures.notesStore(in: directory)
            let app = try PersistentStore(url: url, schema: try StoreFixtures.schema())
            defer { try? app.close() }
            try await app.write(author: "live") { context in
                try context.insert(EntitySnapshot(entityName: "Note", id: UUID(), values: ["title": .string("in the WAL")]))
            }
            let before = try DirectoryChecksums(directory, ignoringContentsOf: ["-shm"])
            #expect(before.names == ["notes.sqlite", "notes.sqlite-shm", "notes.sqlite-wal"])

            let (status, history, conflicts, shares) = await Self.inspect(url)
            #expect(status.status == 0, "\(status.standardError)")
            #expect(history.outputLines.last { !$0.hasPrefix(" ") }?.contains("author live") == true, "\(history.standardOutput)")
            #expect(conflicts.outputLines == ["no conflicts logged"])
            #expect(shares.status == 0, "\(shares.standardError)")

            let after = try DirectoryChecksums(directory, ignoringContentsOf: ["-shm"])
            #expect(after == before, "before: \(before)\nafter:  \(after)")
        }
    }
}
