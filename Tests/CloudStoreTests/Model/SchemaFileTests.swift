@testable import CloudStore
import Foundation
import Testing

@Suite("Schema files load, round-trip and report every problem at once")
struct SchemaFileTests {
    @Test func notesSchemaLoads() throws {
        let schema = try Schema.notes()
        #expect(schema.name == "Notes")
        #expect(schema.version == 2)
        #expect(schema.entities.map(\.name) == ["Folder", "Note", "Tag"])
        let note = try #require(schema.entity(named: "Note"))
        #expect(note.attribute(named: "priority")?.renamedFrom == "rank")
        #expect(note.attribute(named: "title")?.preservesValueAfterDeletion == true)
        #expect(note.attribute(named: "pinned")?.defaultValue == .bool(false))
        #expect(note.indexes == [["pinned", "created"], ["folder"]])
        #expect(schema.kind(of: try #require(note.relationship(named: "folder"))) == .manyToOne)
        #expect(schema.kind(of: try #require(note.relationship(named: "tags"))) == .manyToMany)
        #expect(schema.kind(of: try #require(schema.entity(named: "Folder")?.relationship(named: "notes"))) == .oneToMany)
        let types = Set(schema.entities.flatMap(\.attributes).map(\.type))
        #expect(types == Set(AttributeType.allCases), "Notes.json should use every attribute type")
        _ = try Schema.load(contentsOf: RepositoryPaths.notesSchemaV1)
    }

    @Test func writingAndReadingGivesTheSameSchema() throws {
        let schema = try Schema.notes()
        let reread = try Schema.load(try schema.fileData())
        #expect(reread == schema)
        #expect(reread.schemaHash == schema.schemaHash)
    }

    /// An entity's duplicate key rule is written only when it is not the default, read back, and
    /// named in the error when unknown; it is not the store's shape, so the hash ignores it.
    @Test func theDuplicateKeyRuleRoundTripsAndIsNotTheShape() throws {
        var schema = try Schema.notes()
        schema.entities[2].uniquenessConstraints = [["name"]]
        let merging = schema
        schema.entities[2].duplicateKeyRule = .refuse
        let text = String(decoding: try schema.fileData(), as: UTF8.self)
        #expect(text.contains(#""duplicateKeyRule": "refuse""#))
        #expect(!String(decoding: try merging.fileData(), as: UTF8.self).contains("duplicateKeyRule"))
        #expect(try Schema.load(try schema.fileData()) == schema)
        #expect(schema.schemaHash == merging.schemaHash)

        let unknown = text.replacingOccurrences(of: #""refuse""#, with: #""reject""#)
        let error = #expect(throws: SchemaError.self) { try Schema.load(Data(unknown.utf8)) }
        #expect(error?.description.contains(#"unknown duplicateKeyRule "reject" (use "merge" or "refuse")"#) == true)

        schema.entities[2].uniquenessConstraints = []
        #expect(schema.problems().map(\.message) == [
            #"duplicateKeyRule "refuse" needs a uniqueness constraint to apply to; declare one or remove the rule"#
        ])
    }

    /// `"encrypted": true` is written only when set, read back, and makes the attribute travel as
    /// `ENCRYPTED_BYTES`, not queryable on the server.
    @Test func encryptedAttributesRoundTrip() throws {
        var schema = try Schema.notes()
        let plain = schema
        schema.entities[1].attributes[1].isEncrypted = true
        let text = String(decoding: try schema.fileData(), as: UTF8.self)
        #expect(text.contains(#""encrypted": true"#))
        #expect(!String(decoding: try plain.fileData(), as: UTF8.self).contains("encrypted"))
        #expect(try Schema.load(try schema.fileData()) == schema)
        let attribute = schema.entities[1].attributes[1]
        let field = try #require(schema.cloudSchema.recordType(named: schema.entities[1].name)?.fields.first { $0.name == attribute.name })
        #expect(field.type == .encryptedBytes)
        #expect(field.queryable == false)
        #expect(schema.differences(from: plain).map(\.description).contains { $0.contains("encrypted") })
    }

    @Test func theHashIsStableAndFollowsTheShape() throws {
        let schema = try Schema.notes()
        #expect(schema.schemaHash.count == 16)
        #expect(try Schema.notes().schemaHash == schema.schemaHash)
        var bumped = schema
        bumped.version = 9
        #expect(bumped.schemaHash == schema.schemaHash, "the version is not part of the shape")
        var changed = schema
        changed.entities[2].attributes.append(AttributeDescription("emoji", .string, optional: true))
        #expect(changed.schemaHash != schema.schemaHash)
        var reordered = schema
        reordered.entities[0].attributes[0].isOptional = true
        #expect(reordered.schemaHash != schema.schemaHash)
    }

    @Test func aBrokenFileListsAllItsProblems() throws {
        let json = #"""
        {"name": "Broken", "version": 1, "entities": [
          {"name": "Note",
           "attributes": [{"name": "title", "type": "text", "default": ""},
                          {"name": "rank", "type": "int64", "default": 0}],
           "relationships": [{"name": "folder", "destination": "Folder", "toMany": false, "inverse": "notez"},
                             {"name": "owner", "destination": "Person", "toMany": false, "inverse": "notes"}]},
          {"name": "Folder",
           "attributes": [{"name": "title", "type": "string", "default": ""}],
           "relationships": [{"name": "notes", "destination": "Note", "toMany": true, "inverse": "folder"}]},
          {"name": "Folder", "attributes": []}
        ]}
        """#
        let error = #expect(throws: SchemaError.self) { try Schema.load(Data(json.utf8)) }
        let messages = try #require(error).problems.map(\.description)
        #expect(messages == [
            #"Note.title: unknown attribute type "text" (use one of string, int64, double, bool, date, data, uuid, url, decimal, json)"#,
            #"Note.folder: inverse "notez" is not a relationship of Folder"#,
            #"Note.owner: destination "Person" is not an entity of the schema"#,
            "Folder: the entity is declared twice",
        ])
        #expect(try #require(error).description.hasPrefix("schema \"Broken\" has 4 problems:\n  - Note.title"))
    }

    @Test("format problems are named", arguments: [
        ("not json", "the file is not valid JSON"),
        ("[]", #"the file must be a JSON object with "name", "version" and "entities""#),
        (#"{"name": "S", "entities": []}"#, #""version" is missing (an integer, 1 or more)"#),
        (#"{"name": "S", "version": 1.5, "entities": []}"#, #""version" must be an integer, 1 or more"#),
        (#"{"name": "S", "version": 1}"#, #""entities" is missing (an array of entities)"#),
        (#"{"name": "S", "version": 1, "entities": [], "extra": 1}"#, #"unknown schema key "extra""#),
        (#"{"name": "S", "version": 1, "entities": [{"name": "E", "attributes": [{"name": "a", "type": "string", "optinal": true}]}]}"#,
         #"E.a: unknown attribute key "optinal""#),
        (#"{"name": "S", "version": 1, "entities": [{"name": "E", "attributes": [{"name": "a", "type": "int64", "default": "x"}]}]}"#,
         #"E.a: default "x" is not a valid int64"#),
        (#"{"name": "S", "version": 1, "entities": [{"name": "E", "relationships": [{"name": "r", "destination": "E", "inverse": "r", "deleteRule": "explode"}]}]}"#,
         #"E.r: unknown delete rule "explode" (use one of nullify, cascade, deny, noAction)"#),
        (#"{"name": "S", "version": 1, "entities": [{"name": "E", "indexes": "a"}]}"#, #"E: "indexes" must be an array"#),
    ])
    func formatProblems(json: String, message: String) throws {
        let error = #expect(throws: SchemaError.self) { try Schema.load(Data(json.utf8)) }
        let messages = try #require(error).problems.map(\.description)
        #expect(messages.contains { $0.hasPrefix(message) }, "\(messages)")
    }

    @Test func defaultsOfEveryType() throws {
        let json = #"""
        {"name": "S", "version": 1, "entities": [{"name": "E", "attributes": [
          {"name": "s", "type": "string", "default": "x"},
          {"name": "i", "type": "int64", "default": 7},
          {"name": "d", "type": "double", "default": 1.5},
          {"name": "b", "type": "bool", "default": true},
          {"name": "t", "type": "date", "default": "2026-01-25T22:15:43Z"},
          {"name": "t2", "type": "date", "default": 1000},
          {"name": "bytes", "type": "data", "default": "AQI="},
          {"name": "u", "type": "uuid", "default": "5A8F4C3E-0000-4000-8000-000000000001"},
          {"name": "l", "type": "url", "default": "https://example.com/a"},
          {"name": "m", "type": "decimal", "default": "12.50"},
          {"name": "j", "type": "json", "default": {"b": 1, "a": [true]}}]}]}
        """#
        let entity = try #require(try Schema.load(Data(json.utf8)).entity(named: "E"))
        let defaults = Dictionary(uniqueKeysWithValues: entity.attributes.map { ($0.name, $0.defaultValue) })
        #expect(defaults["s"] == .string("x"))
        #expect(defaults["i"] == .int64(7))
        #expect(defaults["d"] == .double(1.5))
        #expect(defaults["b"] == .bool(true))
        #expect(defaults["t"] == .date(Date(timeIntervalSince1970: 1_769_379_343)))
        #expect(defaults["t2"] == .date(Date(timeIntervalSince1970: 1)))
        #expect(defaults["bytes"] == .data(Data([1, 2])))
        #expect(defaults["u"] == .uuid(UUID(uuidString: "5A8F4C3E-0000-4000-8000-000000000001")!))
        #expect(defaults["l"] == .url(URL(string: "https://example.com/a")!))
        #expect(defaults["m"] == .decimal(Decimal(string: "12.5")!))
        #expect(defaults["j"] == .json(#"{"a":[true],"b":1}"#))
    }

    @Test func aMissingFileIsNamed() {
        let error = #expect(throws: SchemaError.self) {
            try Schema.load(contentsOf: URL(fileURLWithPath: "/nonexistent/Notes.json"))
        }
        #expect(error?.schema == "/nonexistent/Notes.json")
        #expect(error?.problems.first?.message.hasPrefix("cannot read the schema file") == true)
    }
}
