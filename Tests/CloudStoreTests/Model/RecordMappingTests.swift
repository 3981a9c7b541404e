import CloudStore
import Foundation
import Testing

@Suite("Snapshots become records and back")
struct RecordMappingTests {
    let zone = ZoneID(zoneName: "Notes")

    @Test func everyAttributeAndReferenceRoundTrips() throws {
        let schema = try Schema.notes()
        let note = EntityCodingTests.fullNote()
        let snapshot = try schema.snapshot(of: note)
        let record = try schema.record(for: snapshot, in: zone)
        #expect(record.recordType == "Note")
        #expect(record.recordName == note.id.uuidString)
        #expect(record.zoneID == zone)
        #expect(record["title"] == .string("Groceries"))
        #expect(record["pinned"] == .int64(1))
        #expect(record["created"] == .timestamp(Date(millisecondsSince1970: 1_763_700_000_123)))
        #expect(record["priority"] == .int64(3))
        #expect(record["rating"] == .double(4.5))
        #expect(record["attachment"] == .bytes(Data([0, 1, 2])))
        #expect(record["link"] == .string("https://example.com/x?y=1"))
        #expect(record["externalID"] == .string(note.externalID!.uuidString))
        #expect(record["price"] == .string("19.99"))
        #expect(record["metadata"] == .string(#"{"language":"en","wordCount":2}"#))
        #expect(record["folder"] == .reference(Reference(recordName: note.folder!.uuidString, zoneID: zone)))
        #expect(record["tags"] == nil, "many-to-many relationships travel as link records")

        // Through JSON, as the wire carries it.
        let wire = try WireCoding.decode(Record.self, from: try WireCoding.encode(record))
        let content = try schema.content(of: wire)
        var expected = snapshot
        expected.toMany = [:]
        #expect(content.snapshot == expected)
        #expect(content.unknownFields.isEmpty)
    }

    @Test func onlyTheRequestedKeysAndNullsThatClear() throws {
        let schema = try Schema.notes()
        var note = Note(title: "a")
        note.body = nil
        let record = try schema.record(for: try schema.snapshot(of: note), in: zone, keys: ["title", "body", "folder"])
        #expect(record.fields == ["title": .string("a"), "body": .null, "folder": .null])
    }

    @Test func unknownFieldsAreKeptAndMissingOnesDefault() throws {
        let schema = try Schema.notes()
        let id = UUID()
        let record = Record(
            recordName: id.uuidString, recordType: "Note", zoneID: zone,
            fields: ["title": "from the future", "mood": .string("happy"), "stars": .list([1, 2])])
        let content = try schema.content(of: record)
        #expect(content.snapshot["title"] == .string("from the future"))
        #expect(content.snapshot["pinned"] == .bool(false), "a missing field takes the attribute's default")
        #expect(content.snapshot["body"] == .null)
        #expect(content.snapshot["folder"] == .null)
        #expect(content.unknownFields == ["mood": .string("happy"), "stars": .list([1, 2])])
        let again = try schema.record(for: content.snapshot, in: zone, unknownFields: content.unknownFields)
        #expect(again["mood"] == .string("happy"), "unknown fields go back up unchanged")
    }

    @Test("fields that do not fit name the property", arguments: [
        ("pinned", FieldValue.string("yes"), "Note.pinned: the record's field STRING value does not fit a bool attribute"),
        ("externalID", .string("not-a-uuid"), "Note.externalID: the record's field STRING value does not fit a uuid attribute"),
        ("metadata", .string("{oops"), "Note.metadata: the record's field STRING value does not fit a json attribute"),
        ("folder", .string("x"), "Note.folder: the record's field is STRING but a to-one relationship is a REFERENCE"),
    ])
    func mismatches(field: String, value: FieldValue, message: String) throws {
        let schema = try Schema.notes()
        let record = Record(recordName: UUID().uuidString, recordType: "Note", fields: [field: value])
        let error = #expect(throws: EntityError.self) { try schema.content(of: record) }
        #expect(error?.description == message)
    }

    @Test func recordsThatAreNotObjects() throws {
        let schema = try Schema.notes()
        let unknownType = #expect(throws: EntityError.self) {
            try schema.content(of: Record(recordName: UUID().uuidString, recordType: "Sticker"))
        }
        #expect(unknownType?.description.contains("not an entity of schema Notes") == true)
        let badName = #expect(throws: EntityError.self) {
            try schema.content(of: Record(recordName: "N-1", recordType: "Note"))
        }
        #expect(badName?.description == #"Note: record name "N-1" is not a UUID, so it is not an object id"#)
    }
}
