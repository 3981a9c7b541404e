@testable import CloudStore
import CloudStoreTesting
import Foundation
import Testing

/// `cloudstore check --store PATH [--schema FILE] [--json]` on a store holding a null where a
/// NaN was saved before CloudStore refused it, and after the repair the message names.
@Suite("cloudstore check", .timeLimit(.minutes(ReliabilityRun.hangLimitMinutes)))
struct CLICheckTests {
    @Test func findsAValueThatDoesNotRead_leavesTheStore_andIsQuietOnceRepaired() async throws {
        try await TemporaryDirectory.with { directory in
            let (url, _, note) = try StoreFixtures.notesStore(in: directory)
            // What a NaN saved by an earlier version left in the required `rating`.
            let raw = try PersistentStore(url: url, schema: try StoreFixtures.schema())
            try await raw.write { context in try context.db.run("UPDATE \"Note\" SET rating = NULL WHERE id = ?", [.uuid(note)]) }
            try raw.close()
            let before = try DirectoryChecksums(directory)

            let found = await cloudstore("check", "--store", url.path)
            #expect(found.status == 1, "\(found.standardError)")
            #expect(found.outputLines.first?.firstMatch(of: #/^ENTITY +ATTRIBUTE +OBJECT +PROBLEM$/#) != nil, "\(found.standardOutput)")
            #expect(
                found.outputLines.dropFirst().first?.hasPrefix("Note    rating     \(note.uuidString)  null, but the attribute is required (a NaN saved before CloudStore refused it leaves a null); give it a value with context.update(EntitySnapshot(entityName: \"Note\"") == true,
                "\(found.standardOutput)")
            #expect(found.outputLines.last == "1 value does not read: a fetch of its object fails until it is repaired")
            let json = await cloudstore("check", "--store", url.path, "--json")
            #expect(json.status == 1)
            #expect(json.standardOutput.contains("\"attribute\" : \"rating\"") && json.standardOutput.contains(note.uuidString), "\(json.standardOutput)")
            #expect(try DirectoryChecksums(directory) == before, "check only reads the store")

            let store = try PersistentStore(url: url, schema: try StoreFixtures.schema())
            try await store.write { try $0.update(EntitySnapshot(entityName: "Note", id: note, values: ["rating": .double(4)])) }
            try store.close()
            let clean = await cloudstore("check", "--store", url.path)
            #expect(clean.status == 0 && clean.outputLines == ["every stored value reads as its attribute"], "\(clean.standardError)")
        }
    }
}
