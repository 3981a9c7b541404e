@testable import CloudStore
import GRDB
import CloudStoreTesting
import Foundation
import Testing

@Suite("Mirroring: devices converge through a real server", .serialized)
struct MirroringConvergenceTests {
    @Test func everyAttributeAndRelationshipKindConverges() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let a = try await TestDevice.make("A", server: server.baseURL)
            let b = try await TestDevice.make("B", server: server.baseURL)
            let folder = Folder(title: "Home", sortIndex: 3, color: "blue")
            let home = Tag(name: "home"), food = Tag(name: "food", color: "green")
            var draft = EntityCodingTests.fullNote()
            draft.folder = folder.id
            draft.tags = [home.id, food.id]
            let note = draft
            let plain = Note(title: "Plain", folder: folder.id)
            try await a.write { context in
                try context.insert(folder)
                try context.insert(home)
                try context.insert(food)
                try context.insert(note)
                try context.insert(plain)
            }
            try await a.sync()
            try await b.sync()
            #expect(try b.contents() == a.contents())
            #expect(try b.note(note.id)?.tags.sorted { $0.uuidString < $1.uuidString }
                == [home.id, food.id].sorted { $0.uuidString < $1.uuidString })
            #expect(try b.folders().first?.notes.count == 2)

            // Updates, a removed link, a cleared reference and a delete travel too.
            try await a.write { context in
                var changed = try #require(try context.fetch(Note.self, id: note.id))
                changed.title = "Groceries!"
                changed.body = nil
                changed.tags = [food.id]
                changed.folder = nil
                try context.update(changed)
                try context.delete(Note.self, id: plain.id)
            }
            try await a.sync()
            try await b.sync()
            #expect(try b.contents() == a.contents())
            #expect(try b.note(note.id)?.title == "Groceries!")
            #expect(try b.note(note.id)?.tags == [food.id])
            #expect(try b.note(plain.id) == nil)

            // A third device starting from nothing gets the same.
            let c = try await TestDevice.make("C", server: server.baseURL)
            try await c.sync()
            #expect(try c.contents() == a.contents())
            for device in [a, b, c] { await device.close() }
        }
    }

    @Test func anImportIsNeverExportedBack() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let a = try await TestDevice.make("A", server: server.baseURL)
            let b = try await TestDevice.make("B", server: server.baseURL)
            try await a.write { try $0.insert(Note(title: "from A")) }
            try await a.sync()
            try await b.sync()
            let status = try await b.container.status()
            #expect(status.pendingUploads == 0)
            let history = try b.store.history(after: nil)
            #expect(history.map(\.author) == ["cloudstore.import"])
            #expect(history.first?.changes.map(\.changeType) == [.insert])
            // Sending from B changes nothing on the server: A sees no new version.
            try await b.sync()
            let before = try a.store.currentHistoryToken()
            try await a.sync()
            #expect(try a.store.currentHistoryToken() == before)
            await a.close()
            await b.close()
        }
    }

    @Test func offlineEditsToDifferentFieldsBothSurvive() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let a = try await TestDevice.make("A", server: server.baseURL)
            let b = try await TestDevice.make("B", server: server.baseURL)
            let note = Note(title: "Draft", body: "first")
            try await a.write { try $0.insert(note) }
            try await a.sync()
            try await b.sync()
            try await a.edit(note) { $0.title = "Title from A" }
            try await b.edit(note) { $0.body = "Body from B" }
            try await a.sync()
            try await b.sync()
            try await a.sync()
            for device in [a, b] {
                let merged = try #require(try device.note(note.id))
                #expect(merged.title == "Title from A")
                #expect(merged.body == "Body from B")
            }
            #expect(try a.container.conflicts().isEmpty)
            #expect(try b.container.conflicts().isEmpty)
            await a.close()
            await b.close()
        }
    }

    @Test func aChildArrivingBeforeItsParentIsLinkedWhenTheParentArrives() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let a = try await TestDevice.make("A", server: server.baseURL)
            let folder = Folder(title: "Work")
            let note = Note(title: "Memo", folder: folder.id)
            try await a.write { context in
                try context.insert(folder)
                try context.insert(note)
            }
            try await a.sync()
            // The folder changes again, so the server lists it after the note.
            try await a.write { context in
                var renamed = try #require(try context.fetch(Folder.self, id: folder.id))
                renamed.title = "Work (renamed)"
                try context.update(renamed)
            }
            try await a.sync()
            let b = try await TestDevice.make("B", server: server.baseURL, pageSize: 1)
            try await b.sync()
            #expect(try b.note(note.id)?.folder == folder.id)
            #expect(try b.folders().map(\.title) == ["Work (renamed)"])
            #expect(try b.contents() == a.contents())
            await a.close()
            await b.close()
        }
    }

    /// An app version whose schema lacks fields a newer version added (Notes v1 has no `priority`,
    /// `created` or `metadata`) edits a note the newer version wrote: the newer fields' values
    /// survive its edits, the ones it sends alone and the ones it merges with a concurrent edit.
    @Test func anOlderAppVersionEditsANoteAndTheNewerFieldsSurvive() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let newer = try await TestDevice.make("New", server: server.baseURL)
            let older = try await TestDevice.make(
                "Old", schema: try Schema.load(contentsOf: RepositoryPaths.notesSchemaV1), server: server.baseURL)
            let created = Date(timeIntervalSince1970: 1_700_000_000)
            var note = Note(title: "v2 note", created: created, priority: 7)
            let id = note.id
            try await newer.write { [note] in try $0.insert(note) }
            try await newer.sync()
            try await older.sync()
            try await older.store.write(author: "app") { context in
                try context.update(EntitySnapshot(entityName: "Note", id: id, values: ["title": .string("edited by v1")]))
            }
            try await older.sync()
            try await newer.sync()
            note = try #require(try newer.note(note.id))
            #expect(note.title == "edited by v1")
            #expect(note.priority == 7 && note.created == created, "the fields v1 does not know are kept")

            // Both edit at once: v2 the priority, v1 the body; both edits land.
            try await newer.edit(note) { $0.priority = 9 }
            try await older.store.write(author: "app") { context in
                try context.update(EntitySnapshot(entityName: "Note", id: id, values: ["body": .string("v1 body")]))
            }
            try await newer.sync()
            try await older.sync()
            try await newer.sync()
            note = try #require(try newer.note(note.id))
            #expect(note.priority == 9 && note.body == "v1 body" && note.created == created)
            #expect(try newer.container.conflicts().isEmpty && older.container.conflicts().isEmpty)
            // Each version can ask how it meets the server's schema: development adds fields as
            // saves carry them, so neither is refused anything, and v1 lacks v2's fields.
            #expect(try await newer.container.serverSchemaDifference().refusals(in: .development).isEmpty)
            let olderDifference = try await older.container.serverSchemaDifference()
            #expect(olderDifference.refusals(in: .development).isEmpty)
            #expect(olderDifference.serverOnlyFields.contains("Note.priority") && olderDifference.mismatches.isEmpty)
            await newer.close()
            await older.close()
        }
    }

    /// A note moved into a folder that another device deleted meanwhile still names the folder on
    /// the server. A fresh device that fetches the folder's tombstone before the note (pages of
    /// one record) clears the reference instead of keeping it waiting for a folder that will never
    /// arrive.
    @Test func aFreshDeviceDropsAReferenceToAParentWithATombstone() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let a = try await TestDevice.make("A", server: server.baseURL)
            let b = try await TestDevice.make("B", server: server.baseURL)
            let folder = Folder(title: "doomed")
            var note = Note(title: "moved late")
            try await a.write { [note] context in
                try context.insert(folder)
                try context.insert(note)
            }
            try await a.sync()
            try await b.sync()
            try await b.write { try $0.delete(folder) }
            try await b.sync()
            note.folder = folder.id
            try await a.write { [note] in try $0.update(note) }
            try await a.container.sendChanges()

            let fresh = try await TestDevice.make("D", server: server.baseURL, pageSize: 1)
            try await fresh.sync()
            #expect(try fresh.note(note.id)?.folder == nil)
            let waiting = try await fresh.store.read { context in
                try Int.fetchOne(context.db, sql: "SELECT count(*) FROM cloudstore_mirror_unresolved_reference")
            }
            #expect(waiting == 0, "no reference waits for a folder that has a tombstone")
            #expect(try fresh.folders().isEmpty)
            #expect(
                try fresh.container.conflicts().map { [$0.property, "\($0.losingValue)"] } == [["folder", "\(AttributeValue.uuid(folder.id))"]],
                "the reference it dropped is logged")
            for device in [a, b, fresh] { await device.close() }
        }
    }

    @Test func deletingAFolderCascadesOnTheOtherDevice() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let a = try await TestDevice.make("A", server: server.baseURL)
            let b = try await TestDevice.make("B", server: server.baseURL)
            let folder = Folder(title: "Old")
            let notes = (0..<5).map { Note(title: "n\($0)", folder: folder.id) }
            let kept = Note(title: "kept")
            try await a.write { context in
                try context.insert(folder)
                for note in notes { try context.insert(note) }
                try context.insert(kept)
            }
            try await a.sync()
            try await b.sync()
            #expect(try b.notes().count == 6)
            try await a.write { try $0.delete(Folder.self, id: folder.id) }
            #expect(try a.notes().map(\.title) == ["kept"])
            try await a.sync()
            try await b.sync()
            #expect(try b.notes().map(\.title) == ["kept"])
            #expect(try b.folders().isEmpty)
            #expect(try b.contents() == a.contents())
            await a.close()
            await b.close()
        }
    }

    @Test func aDeviceCreatedAfterAThousandChangesBootstrapsToTheSameState() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let a = try await TestDevice.make("A", server: server.baseURL)
            var random = SeededRandomNumberGenerator(seed: 7)
            var live: [UUID] = []
            let tags = (0..<5).map { Tag(name: "t\($0)") }
            try await a.write { context in for tag in tags { try context.insert(tag) } }
            var changes = 0
            while changes < 1000 {
                let batch = 50
                let plan = (0..<batch).map { _ in random.next(upTo: 10) }
                let existing = live
                let chosen = plan.map { _ in existing.isEmpty ? nil : existing[random.next(upTo: existing.count)] }
                let fresh = plan.map { _ in UUID() }
                let inserted = try await a.store.write(author: "app") { context -> [UUID] in
                    var insertedIDs: [UUID] = []
                    var deleted: Set<UUID> = []
                    for (index, kind) in plan.enumerated() {
                        if kind < 5 || chosen[index] == nil {
                            try context.insert(Note(title: "note \(fresh[index])", priority: Int64(index), tags: [tags[index % 5].id]))
                            insertedIDs.append(fresh[index])
                        } else if let id = chosen[index], !deleted.contains(id), kind < 8 {
                            guard var note = try context.fetch(Note.self, id: id) else { continue }
                            note.priority += 1
                            note.tags = [tags[(index + 1) % 5].id]
                            try context.update(note)
                        } else if let id = chosen[index], !deleted.contains(id) {
                            try context.delete(Note.self, id: id)
                            deleted.insert(id)
                        }
                    }
                    return insertedIDs.filter { !deleted.contains($0) }
                }
                live = try a.notes().map(\.id)
                _ = inserted
                changes += batch
                if changes % 200 == 0 { try await a.sync() }
            }
            try await a.sync()
            let c = try await TestDevice.make("C", server: server.baseURL)
            try await c.sync()
            #expect(try c.notes().count == a.notes().count)
            #expect(try c.contents() == a.contents())
            await a.close()
            await c.close()
        }
    }

    @Test func importedTransactionsReachHistoryObservers() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let a = try await TestDevice.make("A", server: server.baseURL)
            let b = try await TestDevice.make("B", server: server.baseURL)
            let start = try b.store.currentHistoryToken()
            let note = Note(title: "watched")
            try await a.write { try $0.insert(note) }
            try await a.sync()
            try await a.edit(note) { $0.pinned = true }
            try await a.sync()
            try await b.sync()
            let transactions = try await withTimeout {
                var iterator = b.store.transactions(after: start).makeAsyncIterator()
                return try await iterator.next()
            }
            #expect(transactions?.author == "cloudstore.import")
            #expect(transactions?.changes.first?.entityName == "Note")
            #expect(transactions?.changes.first?.objectID == note.id)
            await a.close()
            await b.close()
        }
    }
}

extension SeededRandomNumberGenerator {
    /// A number in `0..<bound`, the same for the same seed on every machine.
    mutating func next(upTo bound: Int) -> Int { Int(next() % UInt64(bound)) }
}
