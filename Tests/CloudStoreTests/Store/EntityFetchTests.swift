@testable import CloudStore
import CloudStoreTesting
import Foundation
import GRDB
import Testing

/// Entities decoded straight from the fetch's statement (`EntityFetch`): the values and errors of
/// decoding a snapshot, with each key looked up once per fetch.
@Suite struct EntityFetchTests {
    /// A folder, two tags, a note with every attribute type set that is in the folder and has both
    /// tags, and a note with nothing set.
    static func seeded() throws -> (StoreFixture, PlainFolder, [PlainTag], PlainNote, PlainNote) {
        let fixture = try StoreFixture()
        let folder = PlainFolder(title: "Inbox", sortIndex: 2, color: "blue")
        let tags = [PlainTag(name: "home"), PlainTag(name: "work", color: "red")]
        var full = EntityCodingTests.fullNote()
        full.folder = folder.id
        full.tags = tags.map(\.id).sorted { $0.uuidString < $1.uuidString }
        let empty = PlainNote()
        try fixture.store.write { context in
            try context.insert(folder)
            for tag in tags { try context.insert(tag) }
            try context.insert(full)
            try context.insert(empty)
        }
        full.created = Date(millisecondsSince1970: full.created!.millisecondsSince1970)
        return (fixture, folder, tags, full, empty)
    }

    @Test func everyAttributeType_roundTripsThroughEveryFetch() throws {
        let (fixture, folder, _, full, empty) = try Self.seeded()
        try fixture.store.read { context throws in
            #expect(try context.fetch(PlainNote.self, id: full.id) == full)
            #expect(try context.fetch(PlainNote.self, id: empty.id) == empty)
            #expect(try context.fetch(PlainNote.self, id: UUID()) == nil)
            #expect(try context.fetch(PlainNote.self, where: .equals("pinned", true)) == [full])
            #expect(try context.related(PlainNote.self, of: PlainFolder.self, id: folder.id, through: "notes") == [full])
            // The same value as decoding the stored snapshot.
            let snapshot = try #require(try context.fetchSnapshot(entityName: "Note", id: full.id))
            #expect(try context.schema.entity(PlainNote.self, from: snapshot) { _ in full.tags } == full)
        }
    }

    struct NoteWithExtra: Entity, Equatable {
        static let entityName = "Note"
        var id = UUID()
        var title = ""
        var body: String?
        var colour: String?  // not in the schema: absent, so nil
    }

    @Test func optionalProperties_nullOrNotInTheEntity_decodeAsNil() throws {
        let (fixture, _, _, full, empty) = try Self.seeded()
        let values = try fixture.store.read { try $0.fetch(NoteWithExtra.self, sortBy: [.ascending("pinned")]) }
        #expect(values == [
            NoteWithExtra(id: empty.id, title: "", body: nil, colour: nil),
            NoteWithExtra(id: full.id, title: full.title, body: full.body, colour: nil),
        ])
    }

    struct TitleOnly: Entity, Equatable {
        static let entityName = "Note"
        var id = UUID()
        var title = ""
    }

    struct NameOnly: Entity, Equatable {
        static let entityName = "Tag"
        var id = UUID()
        var name = ""
    }

    @Test func typeWithFewerPropertiesThanTheEntity_decodes() throws {
        let (fixture, _, tags, full, _) = try Self.seeded()
        try fixture.store.read { context throws in
            #expect(try context.fetch(TitleOnly.self, id: full.id) == TitleOnly(id: full.id, title: full.title))
            #expect(try context.fetch(NameOnly.self, sortBy: [.ascending("name")]) == tags.map { NameOnly(id: $0.id, name: $0.name) })
        }
    }

    struct NoteWithColour: Entity {
        static let entityName = "Note"
        var id = UUID()
        var title = ""
        var colour = ""
    }

    struct RequiredBody: Entity {
        static let entityName = "Note"
        var id = UUID()
        var body = ""
    }

    @Test func propertyNotInTheEntity_andNullIntoNonOptional_areErrorsNamingTheProperty() throws {
        let (fixture, _, _, _, empty) = try Self.seeded()
        let unknown = #expect(throws: EntityError.self) { try fixture.store.read { try $0.fetch(NoteWithColour.self) } }
        #expect(unknown?.description == "Note.colour: not an attribute or relationship of Note")
        let null = #expect(throws: EntityError.self) {
            try fixture.store.read { try $0.fetch(RequiredBody.self, id: empty.id) }
        }
        #expect(null?.description.hasPrefix("Note.body: the stored value is null but the Swift property is not optional (object ") == true)
    }

    @Test func storedValuesThatDoNotFitTheSwiftType_areErrors() throws {
        let fixture = try StoreFixture(schema: EntityCodingTests.itemSchema)
        let item = EntityCodingTests.Wrapped(mood: .busy, level: .high, count: 42, small: -3, ratio: 0.25, tags: ["a"])
        var tooLarge = try fixture.store.schema.snapshot(of: EntityCodingTests.Wrapped())
        tooLarge["small"] = .int64(1000)
        var badMood = try fixture.store.schema.snapshot(of: EntityCodingTests.Wrapped())
        badMood["mood"] = .string("angry")
        try fixture.store.write { context in
            try context.insert(item)
            try context.insert(tooLarge)
            try context.insert(badMood)
        }
        try fixture.store.read { context throws in
            #expect(try context.fetch(EntityCodingTests.Wrapped.self, id: item.id) == item)
            let overflow = #expect(throws: EntityError.self) {
                try context.fetch(EntityCodingTests.Wrapped.self, id: tooLarge.id)
            }
            #expect(overflow?.description == "Item.small: the stored value 1000 cannot be read as Int8")
            let mood = #expect(throws: EntityError.self) { try context.fetch(EntityCodingTests.Wrapped.self, id: badMood.id) }
            #expect(mood?.property == "mood")
        }
    }

    @Test func toManyRelationships_loadForTheFetchedObjects_withConditionSortLimitAndOffset() throws {
        let fixture = try StoreFixture()
        let tags = (0..<3).map { PlainTag(name: "tag-\($0)") }
        let folders = (0..<4).map { PlainFolder(title: "folder-\($0)", sortIndex: Int64($0)) }
        var notes: [PlainNote] = []
        for index in 0..<12 {
            let folder = folders[index % 3]  // the last folder stays empty
            let tagged = tags.indices.filter { (index >> $0) & 1 == 1 }.map { tags[$0].id }
            notes.append(
                PlainNote(title: "note-\(index)", priority: Int64(index), folder: folder.id,
                     tags: tagged.sorted { $0.uuidString < $1.uuidString }))
        }
        try fixture.store.write { context in
            for tag in tags { try context.insert(tag) }
            for folder in folders { try context.insert(folder) }
            for note in notes { try context.insert(note) }
        }
        func members(of folder: PlainFolder) -> [UUID] {
            notes.filter { $0.folder == folder.id }.map(\.id).sorted { $0.uuidString < $1.uuidString }
        }
        try fixture.store.read { context throws in
            let fetchedFolders = try context.fetch(PlainFolder.self, sortBy: [.descending("sortIndex")], limit: 3, offset: 1)
            #expect(fetchedFolders.map(\.title) == ["folder-2", "folder-1", "folder-0"])
            #expect(fetchedFolders.map(\.notes) == [folders[2], folders[1], folders[0]].map(members))
            #expect(try context.fetch(PlainFolder.self, id: folders[3].id)?.notes == [])
            let page = try context.fetch(
                PlainNote.self, where: .greaterThan("priority", 2), sortBy: [.descending("priority")], limit: 4, offset: 2)
            #expect(page == Array(notes[6...9].reversed()))
            #expect(try context.fetch(PlainNote.self, sortBy: [.ascending("priority")]) == notes)
        }
    }

    /// Decodes its keys in another order than the table's columns, some more than once.
    struct Reordered: Entity, Equatable {
        static let entityName = "Note"
        var id = UUID()
        var title = ""
        var priority: Int64 = 0
        var body: String?
        var folder: UUID?

        enum CodingKeys: String, CodingKey { case id, title, priority, body, folder }

        init(id: UUID, title: String, priority: Int64, body: String?, folder: UUID?) {
            (self.id, self.title, self.priority, self.body, self.folder) = (id, title, priority, body, folder)
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            folder = try container.decodeIfPresent(UUID.self, forKey: .folder)
            priority = try container.decode(Int64.self, forKey: .priority)
            body = try container.decodeIfPresent(String.self, forKey: .body)
            title = try container.decode(String.self, forKey: .title)
            guard try container.decode(Int64.self, forKey: .priority) == priority else {
                throw DecodingError.dataCorruptedError(forKey: .priority, in: container, debugDescription: "read twice, differs")
            }
            id = try container.decode(UUID.self, forKey: .id)
        }
    }

    @Test func keysDecodedInAnotherOrderThanTheColumns() throws {
        let (fixture, folder, _, full, empty) = try Self.seeded()
        let values = try fixture.store.read { try $0.fetch(Reordered.self, sortBy: [.ascending("pinned")]) }
        #expect(values == [
            Reordered(id: empty.id, title: "", priority: 0, body: nil, folder: nil),
            Reordered(id: full.id, title: full.title, priority: full.priority, body: full.body, folder: folder.id),
        ])
    }

    @Test func sameFetchTwice_andOtherTypesInBetween_readTheirOwnColumns() throws {
        let (fixture, folder, tags, full, _) = try Self.seeded()
        try fixture.store.read { context throws in
            // `color` is column 2 of PlainTag and column 3 of PlainFolder; `title` is in PlainFolder and PlainNote.
            for _ in 0..<2 {
                #expect(try context.fetch(PlainTag.self, sortBy: [.ascending("name")]) == tags)
                #expect(try context.fetch(PlainFolder.self) == [PlainFolder(
                    id: folder.id, title: folder.title, sortIndex: folder.sortIndex, color: folder.color, notes: [full.id])])
                #expect(try context.fetch(TitleOnly.self, where: .equals("pinned", true)) == [TitleOnly(id: full.id, title: full.title)])
                #expect(try context.fetch(PlainNote.self, id: full.id) == full)
            }
        }
    }

    /// Records what its container says about some keys.
    struct KeyReport: Entity {
        static let entityName = "Note"
        var id = UUID()
        var allKeys: [String] = []
        var contains: [String: Bool] = [:]
        var isNil: [String: Bool] = [:]
        var tags: [UUID]?

        struct Key: CodingKey {
            var stringValue: String
            var intValue: Int? { nil }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: Key.self)
            id = try container.decode(UUID.self, forKey: Key(stringValue: "id"))
            allKeys = container.allKeys.map(\.stringValue).sorted()
            for name in ["id", "title", "body", "folder", "tags", "colour"] {
                contains[name] = container.contains(Key(stringValue: name))
                isNil[name] = try container.decodeNil(forKey: Key(stringValue: name))
            }
            tags = try container.decodeIfPresent([UUID].self, forKey: Key(stringValue: "tags"))
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(id, forKey: Key(stringValue: "id"))
        }
    }

    @Test func containsDecodeNilAndAllKeys_matchSnapshotDecoding() throws {
        let (fixture, _, _, full, empty) = try Self.seeded()
        try fixture.store.read { context throws in
            for note in [full, empty] {
                let fetched = try #require(try context.fetch(KeyReport.self, id: note.id))
                let snapshot = try #require(try context.fetchSnapshot(entityName: "Note", id: note.id))
                let decoded = try context.schema.entity(KeyReport.self, from: snapshot) { _ in note.tags }
                #expect(fetched.allKeys == decoded.allKeys)
                #expect(fetched.allKeys == (["id", "tags"] + snapshot.values.keys).sorted())
                #expect(fetched.contains == decoded.contains)
                #expect(fetched.contains == ["id": true, "title": true, "body": true, "folder": true, "tags": true, "colour": false])
                #expect(fetched.isNil == decoded.isNil)
                #expect(fetched.isNil["body"] == (note.body == nil))
                #expect(fetched.isNil["colour"] == true)
                #expect(fetched.isNil["id"] == false)
                #expect(fetched.tags == note.tags)
            }
        }
    }

    /// Decodes its id as a String.
    struct StringID: Entity {
        static let entityName = "Note"
        var id = UUID()

        init(from decoder: any Decoder) throws {
            _ = try decoder.container(keyedBy: CodingKeys.self).decode(String.self, forKey: .id)
        }
    }

    /// Decodes its title as a nested container.
    struct NestedTitle: Entity {
        static let entityName = "Note"
        var id = UUID()
        var title = ""

        init(from decoder: any Decoder) throws {
            _ = try decoder.container(keyedBy: CodingKeys.self).nestedContainer(keyedBy: CodingKeys.self, forKey: .title)
        }
    }

    /// Decodes itself from a single value.
    struct SingleValue: Entity {
        static let entityName = "Note"
        var id = UUID()

        init(from decoder: any Decoder) throws {
            id = try decoder.singleValueContainer().decode(UUID.self)
        }
    }

    @Test func unsupportedShapes_areErrorsNamingTheProblem() throws {
        let (fixture, _, _, full, _) = try Self.seeded()
        try fixture.store.read { context throws in
            let stringID = #expect(throws: EntityError.self) { try context.fetch(StringID.self, id: full.id) }
            #expect(stringID?.description == "Note.id: the id must be declared as UUID")
            let nested = #expect(throws: EntityError.self) { try context.fetch(NestedTitle.self, id: full.id) }
            #expect(
                nested?.description == "Note.title: nested containers are not supported; use a json attribute for structured values")
            let single = #expect(throws: EntityError.self) { try context.fetch(SingleValue.self, id: full.id) }
            #expect(single?.description == "Note: an entity decodes itself from a keyed container (one key per property)")
        }
    }

    @Test func damagedRow_isAnError_evenInAColumnTheTypeDoesNotDeclare() throws {
        let (fixture, _, _, full, _) = try Self.seeded()
        let queue = try DatabaseQueue(path: fixture.url.path)
        try queue.write { db in
            try db.execute(sql: #"UPDATE "Note" SET "priority" = 'high' WHERE "id" = ?"#, arguments: [full.id.uuidString])
        }
        try queue.close()
        let message = "Note.priority of \(full.id.uuidString) holds \"high\", which is not an int64 (a row written outside the store?); fix the row with SQL"
        try fixture.store.read { context throws in
            #expect(storeError { _ = try context.fetchSnapshot(entityName: "Note", id: full.id) }?.message == message)
            #expect(storeError { _ = try context.fetch(PlainNote.self, id: full.id) }?.message == message)
            #expect(storeError { _ = try context.fetch(PlainNote.self) }?.message == message)
            #expect(storeError { _ = try context.fetch(TitleOnly.self) }?.message == message)
        }
    }
}
