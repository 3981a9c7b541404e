import CloudStore
import Foundation
import Testing

@Suite struct StoreWriteTests {
    @Test func insert_roundTripsEveryAttributeType() throws {
        let fixture = try StoreFixture()
        let folder = Folder(title: "Work")
        let tag = Tag(name: "urgent")
        let note = Note(
            title: "Plan", body: "Write it", pinned: true, created: Date(timeIntervalSince1970: 1_763_700_000.1234),
            priority: 3, rating: 4.5, attachment: Data([1, 2, 3]), link: URL(string: "https://example.com/a?b=c"),
            externalID: UUID(), price: Decimal(string: "12.50"), metadata: NoteMetadata(wordCount: 2, language: "en"),
            folder: folder.id, tags: [tag.id])
        try fixture.store.write(author: "app") { context in
            try context.insert(folder)
            try context.insert(tag)
            try context.insert(note)
        }
        let stored = try #require(try fixture.store.read { try $0.fetch(Note.self, id: note.id) })
        var expected = note
        expected.created = Date(millisecondsSince1970: 1_763_700_000_123)
        #expect(stored == expected)
        let storedFolder = try fixture.store.read { try $0.fetch(Folder.self, id: folder.id) }
        #expect(storedFolder?.notes == [note.id])
    }

    @Test func insert_missingAttributesTakeTheirDefaults() throws {
        let fixture = try StoreFixture()
        let id = UUID()
        try fixture.store.write { try $0.insert(EntitySnapshot(entityName: "Note", id: id)) }
        let snapshot = try #require(try fixture.store.read { try $0.fetchSnapshot(entityName: "Note", id: id) })
        #expect(snapshot["title"] == .string(""))
        #expect(snapshot["pinned"] == .bool(false))
        #expect(snapshot["priority"] == .int64(0))
        #expect(snapshot["body"] == .null)
    }

    @Test func insert_existingIDIsAClearError() throws {
        let fixture = try StoreFixture()
        let note = Note(title: "One")
        try fixture.store.write { try $0.insert(note) }
        let error = storeError { try fixture.store.write { try $0.insert(note) } }
        #expect(error?.code == .objectExists)
        #expect(error?.message.contains("Note \(note.id.uuidString) already exists") == true)
    }

    @Test func update_missingIDIsAClearError() throws {
        let fixture = try StoreFixture()
        let note = Note(title: "Ghost")
        let error = storeError { try fixture.store.write { try $0.update(note) } }
        #expect(error?.code == .objectNotFound)
        #expect(error?.message.contains(note.id.uuidString) == true)
    }

    @Test func save_insertsThenUpdates() throws {
        let fixture = try StoreFixture()
        var note = Note(title: "Draft")
        try fixture.store.write { try $0.save(note) }
        note.title = "Final"
        try fixture.store.write { try $0.save(note) }
        let stored = try fixture.store.read { try $0.fetch(Note.self) }
        #expect(stored.map(\.title) == ["Final"])
    }

    @Test func failingWrite_leavesNothingBehind() throws {
        struct Cancelled: Error {}
        let fixture = try StoreFixture()
        #expect(throws: Cancelled.self) {
            try fixture.store.write { context in
                try context.insert(Note(title: "A"))
                try context.insert(Note(title: "B"))
                throw Cancelled()
            }
        }
        #expect(try fixture.store.read { try $0.count(Note.self) } == 0)
        #expect(try fixture.store.history(after: nil).isEmpty)
    }

    @Test func failedOperation_rollsBackTheWriteEvenIfTheBlockCatchesIt() throws {
        let fixture = try StoreFixture()
        let folder = Folder(title: "F")
        try fixture.store.write { try $0.insert(folder) }
        // The folder's notes include a note that does not exist: the relationship change fails
        // after the folder row was updated.
        var changed = folder
        changed.title = "Renamed"
        changed.notes = [UUID()]
        let error = storeError {
            try fixture.store.write { context in
                do {
                    try context.update(changed)
                    Issue.record("the update should fail")
                } catch {}
                // Later operations refuse to run on the half-done unit of work.
                #expect(throws: StoreError.self) { try context.insert(Note(title: "after the failure")) }
            }
        }
        #expect(error?.code == .objectNotFound)
        let stored = try fixture.store.read { try $0.fetch(Folder.self, id: folder.id) }
        #expect(stored?.title == "F")
        #expect(try fixture.store.read { try $0.count(Note.self) } == 0)
    }

    @Test func badValues_nameTheEntityAndProperty() throws {
        let fixture = try StoreFixture()
        let wrongType = storeError {
            try fixture.store.write { try $0.insert(EntitySnapshot(entityName: "Note", id: UUID(), values: ["priority": .string("high")])) }
        }
        #expect(wrongType?.code == .invalidValue)
        #expect(wrongType?.message.contains("Note.priority") == true)

        let unknown = storeError {
            try fixture.store.write { try $0.insert(EntitySnapshot(entityName: "Note", id: UUID(), values: ["colour": .string("red")])) }
        }
        #expect(unknown?.code == .unknownProperty)
        #expect(unknown?.message.contains("Note.colour") == true)

        let entity = storeError { try fixture.store.write { try $0.insert(EntitySnapshot(entityName: "Memo", id: UUID())) } }
        #expect(entity?.code == .unknownEntity)

        let dangling = storeError {
            try fixture.store.write { try $0.insert(Note(title: "orphan", folder: UUID())) }
        }
        #expect(dangling?.code == .invalidValue)
        #expect(dangling?.message.contains("Note.folder") == true)
        #expect(try fixture.store.read { try $0.count(Note.self) } == 0)
    }

    @Test func asyncReadAndWrite_work() async throws {
        let fixture = try StoreFixture()
        let note = Note(title: "async")
        try await fixture.store.write(author: "app") { context in try context.insert(note) }
        let titles = try await fixture.store.read { context in try context.fetch(Note.self).map(\.title) }
        #expect(titles == ["async"])
    }

    @Test func closedStore_refusesWork() throws {
        let fixture = try StoreFixture()
        try fixture.store.close()
        let error = storeError { _ = try fixture.store.read { try $0.count(Note.self) } }
        #expect(error?.code == .closed)
    }
}
