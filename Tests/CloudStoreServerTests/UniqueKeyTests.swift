import CloudStoreWire
import Foundation
import Testing

@testable import CloudStoreServer

/// Uniqueness constraints decided without HTTP or storage: the keys a record holds
/// (``UniqueKey``), the rebuild of a type's keys (``UniqueKeyRebuild``) and the schema rules.
@Suite("uniqueness constraints: keys, rebuilds and schema rules")
struct UniqueKeyTests {
    static let list = CloudSchema.RecordType(
        name: "List",
        fields: [
            .init(name: "title", type: .string), .init(name: "owner", type: .reference), .init(name: "rank", type: .int64),
            .init(name: "weight", type: .double), .init(name: "due", type: .timestamp), .init(name: "tag", type: .bytes),
            .init(name: "photo", type: .asset), .init(name: "place", type: .location), .init(name: "tags", type: .list(.string)),
        ],
        uniquenessConstraints: [["title"], ["title", "owner"]])

    func texts(_ fields: [String: FieldValue], type: CloudSchema.RecordType = Self.list) -> [String] {
        UniqueKey.keys(of: type, fields: fields).map(\.text)
    }

    @Test func keys_onePerConstraintWhoseFieldsAreAllPresentAndNotNull() {
        let owner = FieldValue.reference(Reference(recordName: "U-1"))
        #expect(texts(["title": "Groceries", "owner": owner]) == [#"List(title)=s"Groceries""#, #"List(owner,title)=r"U-1",s"Groceries""#])
        #expect(texts(["title": "Groceries"]) == [#"List(title)=s"Groceries""#], "a missing field: that constraint holds nothing")
        #expect(texts(["title": .null, "owner": owner]) == [], "a null value collides with nothing")
        #expect(texts(["rank": 3]) == [])
        let plain = CloudSchema.RecordType(name: "Note", fields: [.init(name: "title", type: .string)])
        #expect(texts(["title": "Groceries"], type: plain) == [], "no constraints, no keys")
        let schema = CloudSchema(recordTypes: [Self.list, plain])
        #expect(UniqueKey.isConstrained("List", in: schema) && !UniqueKey.isConstrained("Note", in: schema))
        #expect(!UniqueKey.isConstrained("Unknown", in: schema))
    }

    /// The key names its type and its constraint, so keys of two types, or of two constraints of
    /// one type, never meet; the order a constraint lists its fields in does not matter.
    @Test func keys_ofOtherTypesOrConstraintsNeverMeet_theOrderOfAConstraintsFieldsDoesNotMatter() {
        let fields: [String: FieldValue] = ["title": "x", "rank": 1]
        let a = CloudSchema.RecordType(name: "A", fields: [], uniquenessConstraints: [["title"], ["rank"]])
        let b = CloudSchema.RecordType(name: "B", fields: [], uniquenessConstraints: [["title"]])
        let reordered = CloudSchema.RecordType(name: "A", fields: [], uniquenessConstraints: [["rank", "title"]])
        let ordered = CloudSchema.RecordType(name: "A", fields: [], uniquenessConstraints: [["title", "rank"]])
        #expect(Set(texts(fields, type: a)).isDisjoint(with: texts(fields, type: b)))
        #expect(texts(fields, type: a) == [#"A(title)=s"x""#, "A(rank)=i1"])
        #expect(texts(fields, type: reordered) == texts(fields, type: ordered))
        #expect(texts(fields, type: ordered) == [#"A(rank,title)=i1,s"x""#])
    }

    /// Values compare exactly and canonically: a reference by its record name whatever its
    /// action, -0 as 0, timestamps by millisecond, bytes by content; a string holding the
    /// separators of the text cannot pass for two values.
    @Test func values_areCanonicalAndExact() {
        let type = CloudSchema.RecordType(name: "T", fields: [], uniquenessConstraints: [["a", "b"]])
        func key(_ a: FieldValue, _ b: FieldValue) -> String? { texts(["a": a, "b": b], type: type).first }
        let validate = FieldValue.reference(Reference(recordName: "R", action: .validate))
        let none = FieldValue.reference(Reference(recordName: "R", action: .none))
        #expect(key(validate, 1) == key(none, 1), "a reference counts by its record name only")
        #expect(key(.double(-0.0), 1) == key(.double(0), 1))
        #expect(key(.double(0.1 + 0.2), 1) != key(.double(0.3), 1), "doubles compare exactly")
        #expect(key(.double(1), 1) != key(.int64(1), 1), "a DOUBLE is not an INT64")
        let t = Date(millisecondsSince1970: 1_767_225_600_123)
        #expect(key(.timestamp(t), 1) == key(.timestamp(Date(millisecondsSince1970: 1_767_225_600_123)), 1))
        #expect(key(.timestamp(t), 1) != key(.timestamp(t.addingTimeInterval(0.001)), 1))
        #expect(key(.bytes(Data([1, 2])), 1) != key(.bytes(Data([1, 3])), 1))
        #expect(key("x,s\"y", "z") != key("x", "y,s\"z"), "a string cannot pass for two values")
        #expect(key("a\"b", 1) == #"T(a,b)=s"a\"b",i1"#)
        #expect(key("\u{0}", 1)?.contains("\u{0}") == false, "no NUL reaches PostgreSQL")
        #expect(key(.list(["x"]), 1) == nil && key(.location(Location(latitude: 1, longitude: 2)), 1) == nil)
    }

    /// A text that would not fit an index entry is replaced by its digest, which keeps it unique.
    @Test func longValues_areStoredAsTheirDigest() {
        let long = String(repeating: "a", count: 4000)
        let key = texts(["title": .string(long)])[0]
        #expect(key.hasPrefix("#sha256:") && key.utf8.count == 8 + 64)
        #expect(texts(["title": .string(long + "b")])[0] != key)
        let described = UniqueKey.keys(of: Self.list, fields: ["title": .string(long)])[0].values
        #expect(described.count < 100, "an error shows a shortened value: \(described)")
    }

    @Test func typesWithChangedConstraints_compareConstraintsAsSets() {
        let before = CloudSchema(recordTypes: [
            Self.list, .init(name: "Note", fields: []), .init(name: "Tag", fields: [], uniquenessConstraints: [["a", "b"]]),
        ])
        var after = before
        after.recordTypes[2].uniquenessConstraints = [["b", "a"]]
        #expect(UniqueKey.typesWithChangedConstraints(from: before, to: after).isEmpty, "the same sets")
        after.recordTypes[1].uniquenessConstraints = [["title"]]
        after.recordTypes.append(.init(name: "New", fields: []))
        #expect(UniqueKey.typesWithChangedConstraints(from: before, to: after).map(\.name) == ["Note"])
        after.recordTypes[0].uniquenessConstraints = nil
        #expect(UniqueKey.typesWithChangedConstraints(from: before, to: after).map(\.name) == ["List", "Note"])
    }

    func record(_ name: String, _ fields: [String: FieldValue]) throws -> StoredRecord {
        let stamp = Record.Stamp(timestamp: Date(timeIntervalSince1970: 1_800_000_000), userRecordName: "_u1")
        return StoredRecord(
            name: name, type: "List", seq: 1, content: try StoredContent(RecordContent(fields: fields, created: stamp, modified: stamp)),
            deletedAt: nil)
    }

    /// A rebuild keys every live record, apart per zone; two records of one zone with one key
    /// refuse the change, naming both, the zone and the fields.
    @Test func rebuild_keysEachRecordPerZone_andRefusesTwoRecordsOfAZoneWithOneKey() throws {
        var rebuild = UniqueKeyRebuild(type: Self.list)
        try rebuild.add(try record("L-1", ["title": "Groceries"]), partitionID: 1, zone: "Lists")
        try rebuild.add(try record("L-2", ["title": "Groceries"]), partitionID: 1, zone: "Other")
        try rebuild.add(try record("L-3", ["title": "Groceries"]), partitionID: 2, zone: "Lists")
        try rebuild.add(try record("L-4", [:]), partitionID: 1, zone: "Lists")
        try rebuild.add(try record("L-5", ["title": .null]), partitionID: 1, zone: "Lists")
        #expect(rebuild.rows.map(\.source) == ["L-1", "L-2", "L-3"])
        #expect(Set(rebuild.rows.map(\.key)) == [#"List(title)=s"Groceries""#])

        let error = #expect(throws: APIError.self) {
            try rebuild.add(try record("L-0", ["title": "Groceries"]), partitionID: 1, zone: "Lists")
        }
        #expect(error?.error.serverErrorCode == .uniqueFieldError && error?.status.code == 409)
        #expect(
            error?.error.reason
                == "record type List cannot have uniqueness constraint [title]: records L-0 and L-1 in zone Lists both have the same title; change or delete one of them (or merge them), then declare the constraint again"
        )
    }

    @Test func schemaRules_refuseConstraintsThatCannotHold_namingTypeAndField() throws {
        func problem(_ constraints: [[String]]) -> String? {
            var type = Self.list
            type.uniquenessConstraints = constraints
            return SchemaRules.uniquenessProblem(type)
        }
        #expect(problem([["title"], ["owner", "title"], ["rank"], ["weight", "due", "tag"]]) == nil)
        #expect(problem([]) == nil)
        #expect(problem([[]])?.contains("record type List has an empty uniqueness constraint") == true)
        #expect(problem([["titel"]])?.contains("names field titel, which List does not declare") == true)
        #expect(problem([["title", "title"]])?.contains("names field title twice") == true)
        #expect(problem([["title", "owner"], ["owner", "title"]])?.contains("is declared twice") == true)
        for field in ["photo", "place", "tags"] {
            let reason = problem([[field]])
            #expect(reason?.contains("names field List.\(field), which is") == true, "\(reason ?? "accepted")")
            #expect(reason?.contains("STRING, INT64, DOUBLE, TIMESTAMP, BYTES, REFERENCE") == true)
        }
        let share = CloudSchema.RecordType(
            name: ShareMetadata.recordType, fields: [.init(name: "title", type: .string)], uniquenessConstraints: [["title"]])
        #expect(SchemaRules.uniquenessProblem(share)?.contains("cannot have uniqueness constraints") == true)

        var bad = Self.list
        bad.uniquenessConstraints = [["photo"]]
        let refused = #expect(throws: APIError.self) {
            try SchemaRules.merge(CloudSchema(recordTypes: [bad]), into: .empty, environment: .development)
        }
        #expect(refused?.status.code == 400 && refused?.error.serverErrorCode == .badRequest)
    }

    /// A `schema/modify` replaces a type's constraints with the request's (an empty list is none);
    /// saves that extend the schema just in time keep them.
    @Test func schemaRules_mergeReplacesConstraints_admitKeepsThem() throws {
        let current = CloudSchema(recordTypes: [Self.list], version: 1)
        var emptied = Self.list
        emptied.uniquenessConstraints = []
        let merged = try #require(try SchemaRules.merge(CloudSchema(recordTypes: [emptied]), into: current, environment: .production))
        #expect(merged.recordTypes[0].uniquenessConstraints == nil && merged.version == 2)
        #expect(try SchemaRules.merge(CloudSchema(recordTypes: [Self.list]), into: current, environment: .production) == nil)

        var schema = current
        #expect(SchemaRules.admit(recordType: "List", fields: ["color": "red", "title": "x"], into: &schema, environment: .development) == nil)
        #expect(schema.recordTypes[0].field(named: "color")?.type == .string)
        #expect(schema.recordTypes[0].uniquenessConstraints == [["title"], ["title", "owner"]])
        #expect(SchemaRules.admit(recordType: "Fresh", fields: ["title": "x"], into: &schema, environment: .development) == nil)
        #expect(schema.recordType(named: "Fresh")?.uniquenessConstraints == nil)
    }
}
