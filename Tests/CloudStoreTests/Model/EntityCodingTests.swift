@testable import CloudStore
import Foundation
import Testing

@Suite("Swift entities become snapshots and back, checked against the schema")
struct EntityCodingTests {
    static func fullNote() -> PlainNote {
        PlainNote(
            title: "Groceries", body: "milk", pinned: true,
            created: Date(timeIntervalSince1970: 1_763_700_000.123_456), priority: 3, rating: 4.5,
            attachment: Data([0, 1, 2]), link: URL(string: "https://example.com/x?y=1"),
            externalID: UUID(), price: Decimal(string: "19.99"),
            metadata: NoteMetadata(wordCount: 2, language: "en"), folder: UUID(), tags: [UUID(), UUID()])
    }

    @Test func everyAttributeTypeRoundTrips() throws {
        let schema = try Schema.notes()
        let note = Self.fullNote()
        let snapshot = try schema.snapshot(of: note)
        #expect(snapshot.entityName == "Note")
        #expect(snapshot.id == note.id)
        #expect(snapshot["title"] == .string("Groceries"))
        #expect(snapshot["body"] == .string("milk"))
        #expect(snapshot["pinned"] == .bool(true))
        #expect(snapshot["created"] == .date(Date(millisecondsSince1970: 1_763_700_000_123)))
        #expect(snapshot["priority"] == .int64(3))
        #expect(snapshot["rating"] == .double(4.5))
        #expect(snapshot["attachment"] == .data(Data([0, 1, 2])))
        #expect(snapshot["link"] == .url(URL(string: "https://example.com/x?y=1")!))
        #expect(snapshot["externalID"] == .uuid(note.externalID!))
        #expect(snapshot["price"] == .decimal(Decimal(string: "19.99")!))
        #expect(snapshot["metadata"] == .json(#"{"language":"en","wordCount":2}"#))
        #expect(snapshot["folder"] == .uuid(note.folder!))
        #expect(snapshot.toMany["tags"] == note.tags)

        let back = try schema.entity(PlainNote.self, from: snapshot) { name in
            #expect(name == "tags")
            return note.tags
        }
        var expected = note
        expected.created = Date(millisecondsSince1970: 1_763_700_000_123)
        #expect(back == expected)
    }

    @Test func nilOptionalsAndUndeclaredRelationships() throws {
        let schema = try Schema.notes()
        let snapshot = try schema.snapshot(of: PlainNote())
        #expect(snapshot["body"] == .null)
        #expect(snapshot["metadata"] == .null)
        #expect(snapshot["folder"] == .null, "a declared to-one that is nil is stored as null")
        let tag = try schema.snapshot(of: PlainTag(name: "home"))
        #expect(tag.values.keys.sorted() == ["color", "name"], "Tag does not declare its to-many notes")
        #expect(tag.toMany.isEmpty)
    }

    @Test func theNotesTypesMatchTheSchema() throws {
        let schema = try Schema.notes()
        try schema.check(PlainNote.self)
        try schema.check(PlainFolder.self)
        try schema.check(PlainTag.self)
    }

    struct WrongNote: Entity {
        static let entityName = "Note"
        var id = UUID()
        var title: String?          // optional in Swift, not in the schema
        var body: String            // optional in the schema, not in Swift
        var pinned = false
        var created: Date?
        var priority = "high"       // wrong type
        var rating = 0.0
        var attachment: Data?
        var link: URL?
        var externalID: UUID?
        var price: Decimal?
        var metadata: NoteMetadata?
        var folder: String?         // a to-one is UUID?
        var colour: String?         // not in the schema
    }

    @Test func mismatchesNameTheirProperty() throws {
        let schema = try Schema.notes()
        let error = #expect(throws: SchemaError.self) { try schema.check(WrongNote.self) }
        #expect(error?.problems.map(\.description) == [
            "Note.title: the Swift property is optional but the attribute is not; declare it as String",
            "Note.body: the attribute is optional but the Swift property is not, so a missing value could not be read; declare it as String?",
            "Note.priority: the Swift property is a String but the attribute is an int64; declare it as Int64 (or Int)",
            "Note.folder: a to-one relationship is declared as UUID? (the related object's id), not String?",
            "Note.colour: the Swift type WrongNote declares it, but it is not an attribute or relationship of Note",
        ])
        #expect(throws: EntityError.self) { try schema.snapshot(of: WrongNote(body: "")) }
    }

    struct PartialTag: Entity {
        static let entityName = "Tag"
        var id = UUID()
        var name = ""
    }

    struct Unknown: Entity {
        var id = UUID()
    }

    @Test func missingAttributesAndUnknownEntities() throws {
        let schema = try Schema.notes()
        let missing = #expect(throws: SchemaError.self) { try schema.check(PartialTag.self) }
        #expect(missing?.problems.map(\.description) == [
            "Tag.color: the attribute is not a property of the Swift type PartialTag; declare it"
        ])
        let unknown = #expect(throws: SchemaError.self) { try schema.check(Unknown.self) }
        #expect(unknown?.problems.map(\.description) == [
            #"Unknown: the Swift type Unknown names entity "Unknown", which is not in the schema; set entityName or add the entity"#
        ])
    }

    enum Mood: String, Codable, Sendable { case calm, busy }
    enum Level: Int32, Codable, Sendable { case low = 1, high = 9 }

    struct Wrapped: Entity, Equatable {
        static let entityName = "Item"
        var id = UUID()
        var mood: Mood = .calm
        var level: Level?
        var count: Int = 0
        var small: Int8 = 0
        var ratio: Float = 0
        var tags: [String] = []
    }

    static let itemSchema = Schema(name: "Items", version: 1, entities: [
        EntityDescription("Item", attributes: [
            AttributeDescription("mood", .string, default: .string("calm")),
            AttributeDescription("level", .int64, optional: true),
            AttributeDescription("count", .int64, default: .int64(0)),
            AttributeDescription("small", .int64, default: .int64(0)),
            AttributeDescription("ratio", .double, default: .double(0)),
            AttributeDescription("tags", .json, default: .json("[]")),
        ])
    ])

    @Test func rawValueEnumsNarrowIntegersAndJSON() throws {
        let schema = Self.itemSchema
        try schema.check(Wrapped.self)
        let item = Wrapped(mood: .busy, level: .high, count: 42, small: -3, ratio: 0.25, tags: ["a", "b"])
        let snapshot = try schema.snapshot(of: item)
        #expect(snapshot["mood"] == .string("busy"))
        #expect(snapshot["level"] == .int64(9))
        #expect(snapshot["count"] == .int64(42))
        #expect(snapshot["small"] == .int64(-3))
        #expect(snapshot["ratio"] == .double(0.25))
        #expect(snapshot["tags"] == .json(#"["a","b"]"#))
        #expect(try schema.entity(Wrapped.self, from: snapshot) == item)
    }

    @Test func storedValuesThatDoNotFitAreErrors() throws {
        let schema = Self.itemSchema
        var snapshot = try schema.snapshot(of: Wrapped())
        snapshot["small"] = .int64(1000)
        let overflow = #expect(throws: EntityError.self) { try schema.entity(Wrapped.self, from: snapshot) }
        #expect(overflow?.description == "Item.small: the stored value 1000 cannot be read as Int8")
        snapshot["small"] = .int64(0)
        snapshot["mood"] = .string("angry")
        let badEnum = #expect(throws: EntityError.self) { try schema.entity(Wrapped.self, from: snapshot) }
        #expect(badEnum?.property == "mood")
        snapshot["mood"] = .null
        let null = #expect(throws: EntityError.self) { try schema.entity(Wrapped.self, from: snapshot) }
        #expect(null?.description.hasPrefix("Item.mood: the stored value is null but the Swift property is not optional (object ") == true)
    }

    struct NilTitle: Entity {
        static let entityName = "Tag"
        var id = UUID()
        var name: String?
        var color: String?
    }

    @Test func nilForARequiredAttributeIsAnError() throws {
        let schema = try Schema.notes()
        let error = #expect(throws: EntityError.self) { try schema.snapshot(of: NilTitle()) }
        #expect(error?.description == "Tag.name: the Swift property is optional but the attribute is not; declare it as String")
    }
}
