import CloudStore
import Foundation
import Testing

@Suite struct StoreFetchTests {
    /// Ten notes: priority 0...9, pinned when even, titles "note-0"..."note-9", half in a folder.
    static func seeded() throws -> (StoreFixture, Folder, [Note]) {
        let fixture = try StoreFixture()
        let folder = Folder(title: "Inbox")
        let notes = (0..<10).map { index in note(index, folder: index < 5 ? folder.id : nil) }
        try fixture.store.write { context in
            try context.insert(folder)
            for note in notes { try context.insert(note) }
        }
        return (fixture, folder, notes)
    }

    static func note(_ index: Int, folder: UUID?) -> Note {
        var note = Note(title: "note-\(index)", pinned: index % 2 == 0, priority: Int64(index))
        note.body = index == 3 ? nil : "body \(index)"
        note.created = Date(timeIntervalSince1970: TimeInterval(1_700_000_000 + index))
        note.rating = Double(index) / 2
        note.price = Decimal(index * 10)
        note.folder = folder
        return note
    }

    func titles(_ fixture: StoreFixture, _ condition: Condition?, sortBy: [SortKey] = [.ascending("priority")]) throws -> [String] {
        try fixture.store.read { try $0.fetch(Note.self, where: condition, sortBy: sortBy).map(\.title) }
    }

    @Test func conditions_selectTheRightObjects() throws {
        let (fixture, folder, _) = try Self.seeded()
        #expect(try titles(fixture, .equals("priority", 4)) == ["note-4"])
        #expect(try titles(fixture, .notEquals("body", "body 1")).count == 9)  // includes the null body
        #expect(try titles(fixture, .isNull("body")) == ["note-3"])
        #expect(try titles(fixture, .lessThan("priority", 2)) == ["note-0", "note-1"])
        #expect(try titles(fixture, .greaterThanOrEqual("rating", 4.0)) == ["note-8", "note-9"])
        #expect(try titles(fixture, .lessThanOrEqual("created", Date(timeIntervalSince1970: 1_700_000_001))) == ["note-0", "note-1"])
        #expect(try titles(fixture, .greaterThan("price", Decimal(75))) == ["note-8", "note-9"])
        #expect(try titles(fixture, .in("priority", [1, 7, 42])) == ["note-1", "note-7"])
        #expect(try titles(fixture, .beginsWith("title", "note-1")) == ["note-1"])
        #expect(try titles(fixture, .equals("pinned", true) && .lessThan("priority", 5)) == ["note-0", "note-2", "note-4"])
        #expect(try titles(fixture, .equals("priority", 1) || .equals("priority", 8)) == ["note-1", "note-8"])
        #expect(try titles(fixture, !.equals("pinned", true)) == ["note-1", "note-3", "note-5", "note-7", "note-9"])
        #expect(try titles(fixture, .equals("folder", folder.id)).count == 5)
    }

    @Test func sortLimitOffsetAndCount() throws {
        let (fixture, _, _) = try Self.seeded()
        let page = try fixture.store.read { context in
            try context.fetch(Note.self, sortBy: [.descending("pinned"), .descending("priority")], limit: 3, offset: 1)
        }
        #expect(page.map(\.title) == ["note-6", "note-4", "note-2"])
        #expect(try fixture.store.read { try $0.count(Note.self, where: .equals("pinned", false)) } == 5)
        let ids = try fixture.store.read { try $0.fetchIDs(entityName: "Note", sortBy: [.ascending("title")], offset: 8) }
        #expect(ids.count == 2)
    }

    @Test func badConditions_nameTheEntityAndProperty() throws {
        let (fixture, _, _) = try Self.seeded()
        let unknown = storeError { _ = try titles(fixture, .equals("colour", "red")) }
        #expect(unknown?.code == .unknownProperty)
        #expect(unknown?.message.contains("Note.colour") == true)
        let wrongType = storeError { _ = try titles(fixture, .equals("priority", "high")) }
        #expect(wrongType?.code == .invalidValue)
        #expect(wrongType?.message.contains("Note.priority") == true)
        let prefixOnNumber = storeError { _ = try titles(fixture, .beginsWith("priority", "1")) }
        #expect(prefixOnNumber?.message.contains("Note.priority") == true)
        let badSort = storeError { _ = try titles(fixture, nil, sortBy: [.ascending("size")]) }
        #expect(badSort?.message.contains("Note.size") == true)
    }

    @Test func relationships_navigateBothWays() throws {
        let fixture = try StoreFixture()
        let folder = Folder(title: "Projects")
        let urgent = Tag(name: "urgent")
        let later = Tag(name: "later")
        let first = Note(title: "first", folder: folder.id, tags: [urgent.id, later.id])
        let second = Note(title: "second", folder: folder.id, tags: [urgent.id])
        try fixture.store.write { context in
            for value in [urgent, later] { try context.insert(value) }
            try context.insert(folder)
            try context.insert(first)
            try context.insert(second)
        }
        try fixture.store.read { context throws in
            // to-one, and its to-many inverse
            #expect(try context.related(Folder.self, of: Note.self, id: first.id, through: "folder").map(\.id) == [folder.id])
            #expect(Set(try context.related(Note.self, of: Folder.self, id: folder.id, through: "notes").map(\.title)) == ["first", "second"])
            #expect(try context.fetch(Note.self, where: .equals("folder", folder.id)).count == 2)
            #expect(try context.fetch(Folder.self, where: .contains("notes", second.id)).map(\.id) == [folder.id])
            // many-to-many, both sides
            #expect(Set(try context.related(Tag.self, of: Note.self, id: first.id, through: "tags").map(\.name)) == ["urgent", "later"])
            #expect(Set(try context.related(Note.self, of: Tag.self, id: urgent.id, through: "notes").map(\.title)) == ["first", "second"])
            #expect(try context.fetch(Note.self, where: .contains("tags", later.id)).map(\.title) == ["first"])
            #expect(try context.fetch(Tag.self, where: .contains("notes", second.id)).map(\.name) == ["urgent"])
            // typed values carry their declared to-many relationships
            #expect(Set(try context.fetch(Note.self, id: first.id)?.tags ?? []) == [urgent.id, later.id])
            #expect(Set(try context.fetch(Folder.self, id: folder.id)?.notes ?? []) == [first.id, second.id])
        }
    }
}
