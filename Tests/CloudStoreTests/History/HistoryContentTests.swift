import Synchronization
import CloudStore
import Foundation
import Testing

@Suite struct HistoryContentTests {
    func change(_ transaction: HistoryTransaction?, _ id: UUID) -> HistoryChange? {
        transaction?.changes.first { $0.objectID == id }
    }

    @Test func insertUpdateDelete_recordTypesPropertiesAndTombstones() throws {
        let fixture = try StoreFixture()
        var note = Note(title: "Shopping", body: "milk", priority: 1)
        try fixture.store.write(author: "app", contextName: "editor") { try $0.insert(note) }
        note.body = "milk, eggs"
        note.priority = 2
        try fixture.store.write(author: "app", contextName: "editor") { try $0.update(note) }
        try fixture.store.write(author: "sync", contextName: "import") { try $0.delete(Note.self, id: note.id) }

        let history = try fixture.store.history(after: nil)
        try #require(history.count == 3)
        #expect(history.map(\.author) == ["app", "app", "sync"])
        #expect(history.map(\.contextName) == ["editor", "editor", "import"])
        #expect(history[0].token < history[1].token && history[1].token < history[2].token)
        #expect(change(history[0], note.id)?.changeType == .insert)
        #expect(change(history[1], note.id)?.changeType == .update)
        #expect(change(history[1], note.id)?.updatedProperties == ["body", "priority"])
        #expect(change(history[2], note.id)?.changeType == .delete)
        // Note.title is marked preserveAfterDeletion; nothing else is kept.
        #expect(change(history[2], note.id)?.tombstone == ["title": .string("Shopping")])
    }

    @Test func updateWithoutChange_recordsNoTransaction() throws {
        let fixture = try StoreFixture()
        let note = Note(title: "Same")
        try fixture.store.write { try $0.insert(note) }
        try fixture.store.write { try $0.update(note) }
        try fixture.store.write { _ in }
        #expect(try fixture.store.history(after: nil).count == 1)
    }

    @Test func unitOfWork_mergesChangesPerObject() throws {
        let fixture = try StoreFixture()
        let kept = Note(title: "kept")
        let discarded = Note(title: "discarded")
        let existing = Note(title: "existing")
        try fixture.store.write { try $0.insert(existing) }
        try fixture.store.write { context in
            try context.insert(kept)
            var changed = kept
            changed.title = "kept, edited"
            try context.update(changed)  // still one insert
            try context.insert(discarded)
            try context.delete(discarded)  // inserted and deleted: nothing
            var edited = existing
            edited.title = "existing, edited"
            try context.update(edited)
            edited.pinned = true
            try context.update(edited)  // one update with both properties
            try context.delete(existing)  // and then a delete
            try context.insert(existing)  // re-created: a delete then an insert, both kept
        }
        let last = try #require(try fixture.store.history(after: nil).last)
        #expect(last.changes.map(\.changeType) == [.insert, .delete, .insert])
        #expect(last.changes.map(\.objectID) == [kept.id, existing.id, existing.id])
    }

    @Test func deleteRules_cascadeAndNullifyInOneTransaction() throws {
        let fixture = try StoreFixture()
        let folder = Folder(title: "Old")
        let tag = Tag(name: "t")
        let first = Note(title: "a", folder: folder.id, tags: [tag.id])
        let second = Note(title: "b", folder: folder.id)
        try fixture.store.write { context in
            try context.insert(folder)
            try context.insert(tag)
            try context.insert(first)
            try context.insert(second)
        }
        // Folder.notes cascades: deleting the folder deletes its notes, and their links to tags.
        try fixture.store.write { try $0.delete(Folder.self, id: folder.id) }
        let transaction = try #require(try fixture.store.history(after: nil).last)
        #expect(change(transaction, folder.id)?.changeType == .delete)
        #expect(change(transaction, first.id)?.changeType == .delete)
        #expect(change(transaction, second.id)?.changeType == .delete)
        #expect(change(transaction, first.id)?.tombstone == ["title": .string("a")])
        // Note.tags nullifies: the tag stays, and records that its notes changed.
        #expect(change(transaction, tag.id)?.changeType == .update)
        #expect(change(transaction, tag.id)?.updatedProperties == ["notes"])
        #expect(transaction.changes.count == 4)
        try fixture.store.read { context throws in
            #expect(try context.count(Note.self) == 0)
            #expect(try context.exists(Tag.self, id: tag.id))
            #expect(try context.relatedIDs(entityName: "Tag", id: tag.id, relationship: "notes").isEmpty)
        }

        // Deleting a tag nullifies: the note stays and records its changed tags.
        let note = Note(title: "c", tags: [tag.id])
        try fixture.store.write { try $0.insert(note) }
        try fixture.store.write { try $0.delete(Tag.self, id: tag.id) }
        let nullified = try #require(try fixture.store.history(after: nil).last)
        #expect(change(nullified, note.id)?.updatedProperties == ["tags"])
        #expect(try fixture.store.read { try $0.fetch(Note.self, id: note.id)?.tags } == [])
    }

    @Test func manyToManyMembership_recordsBothSides() throws {
        let fixture = try StoreFixture()
        let tag = Tag(name: "x")
        var note = Note(title: "n")
        try fixture.store.write { context in
            try context.insert(tag)
            try context.insert(note)
        }
        note.tags = [tag.id]
        try fixture.store.write { try $0.update(note) }
        let added = try #require(try fixture.store.history(after: nil).last)
        #expect(change(added, note.id)?.updatedProperties == ["tags"])
        #expect(change(added, tag.id)?.updatedProperties == ["notes"])

        try fixture.store.write { try $0.removeRelated(entityName: "Tag", id: tag.id, relationship: "notes", note.id) }
        let removed = try #require(try fixture.store.history(after: nil).last)
        #expect(Set(removed.changes.map(\.objectID)) == [note.id, tag.id])
        #expect(try fixture.store.read { try $0.fetch(Note.self, id: note.id)?.tags } == [])
    }

    @Test func toOneChange_recordsTheInverseOnBothDestinations() throws {
        let fixture = try StoreFixture()
        let old = Folder(title: "old")
        let new = Folder(title: "new")
        var note = Note(title: "moving", folder: old.id)
        try fixture.store.write { context in
            try context.insert(old)
            try context.insert(new)
            try context.insert(note)
        }
        note.folder = new.id
        try fixture.store.write { try $0.update(note) }
        let moved = try #require(try fixture.store.history(after: nil).last)
        #expect(change(moved, note.id)?.updatedProperties == ["folder"])
        #expect(change(moved, old.id)?.updatedProperties == ["notes"])
        #expect(change(moved, new.id)?.updatedProperties == ["notes"])
    }

    @Test func fetchFilters_authorsEntitiesAndTokens() throws {
        let fixture = try StoreFixture()
        try fixture.store.write(author: "app") { try $0.insert(Note(title: "1")) }
        try fixture.store.write(author: "cloudstore.import") { try $0.insert(Tag(name: "2")) }
        try fixture.store.write(author: "app") { context in
            try context.insert(Tag(name: "3"))
            try context.insert(Note(title: "3"))
        }
        let all = try fixture.store.history(after: nil)
        #expect(all.count == 3)
        #expect(try fixture.store.history(after: all[0].token).map(\.token) == [all[1].token, all[2].token])
        #expect(try fixture.store.history(after: nil, matching: .init(authors: ["app"])).count == 2)
        #expect(try fixture.store.history(after: nil, matching: .init(excludingAuthors: ["cloudstore.import"])).count == 2)
        let notesOnly = try fixture.store.history(after: nil, matching: .init(entities: ["Note"]))
        #expect(notesOnly.map(\.token) == [all[0].token, all[2].token])
        #expect(notesOnly.flatMap(\.changes).allSatisfy { $0.entityName == "Note" })
        #expect(try fixture.store.history(after: nil, matching: .init(limit: 1)).map(\.token) == [all[0].token])
        #expect(try fixture.store.currentHistoryToken() == all[2].token)
    }

    @Test func purge_makesOlderTokensExpire() throws {
        let clock = TestClock()
        var configuration = PersistentStore.Configuration()
        configuration.now = { clock.now }
        let fixture = try StoreFixture(configuration: configuration)
        for index in 0..<4 {
            clock.advance(seconds: 60)
            try fixture.store.write { try $0.insert(Note(title: "\(index)")) }
        }
        let all = try fixture.store.history(after: nil)
        #expect(try fixture.store.purgeHistory(through: all[0].token) == 1)
        #expect(try fixture.store.history(after: all[0].token).count == 3)
        // Before the second transaction's timestamp: nothing more to purge; after it: one more.
        #expect(try fixture.store.purgeHistory(before: all[1].timestamp) == 0)
        #expect(try fixture.store.purgeHistory(before: all[1].timestamp.addingTimeInterval(1)) == 1)

        let expired = storeError { _ = try fixture.store.history(after: all[0].token) }
        #expect(expired?.code == .historyTokenExpired)
        #expect(try fixture.store.history(after: all[1].token).map(\.token) == [all[2].token, all[3].token])
        #expect(try fixture.store.history(after: nil).count == 2)
    }

    @Test func tokens_areCodableAndBelongToTheirStore() throws {
        let fixture = try StoreFixture()
        try fixture.store.write { try $0.insert(Note(title: "x")) }
        let token = try #require(try fixture.store.currentHistoryToken())
        let decoded = try JSONDecoder().decode(HistoryToken.self, from: JSONEncoder().encode(token))
        #expect(decoded == token)
        #expect(try HistoryToken(token.description) == token)
        #expect(throws: StoreError.self) { try HistoryToken("not a token") }

        let other = try StoreFixture()
        let foreign = storeError { _ = try other.store.history(after: token) }
        #expect(foreign?.code == .historyTokenExpired)
        #expect(foreign?.message.contains("another store") == true)
    }
}

/// A clock tests move by hand.
final class TestClock: Sendable {
    private let current = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
    var now: Date { current.withLock { $0 } }
    func advance(seconds: TimeInterval) { current.withLock { $0 += seconds } }
}
