import CloudStoreWire
import Testing

/// `CloudSchema.difference(from:)`: an app's record types against a server's schema.
@Suite("Wire: an app's schema against the server's")
struct CloudSchemaDifferenceTests {
    typealias Field = CloudSchema.Field

    static let server = CloudSchema(
        recordTypes: [
            .init(name: "Note", fields: [Field(name: "title", type: .string), Field(name: "rank", type: .int64), Field(name: "tags", type: .unknownList)]),
            .init(name: "Folder", fields: [Field(name: "title", type: .string)]),
        ], version: 4)

    @Test func theSameRecordTypesDifferInNothing() {
        let difference = Self.server.difference(from: Self.server)
        #expect(difference == CloudSchema.Difference())
        #expect(difference.isCompatible)
        #expect(difference.refusals(in: .production).isEmpty)
    }

    @Test func eachKindOfDifferenceIsNamed() {
        let app = CloudSchema(recordTypes: [
            .init(name: "Note", fields: [
                Field(name: "title", type: .int64), Field(name: "priority", type: .int64),
                Field(name: "tags", type: .list(.string)),
            ]),
            .init(name: "Tag", fields: [Field(name: "name", type: .string)]),
        ])
        let difference = app.difference(from: Self.server)
        #expect(difference.missingRecordTypes == ["Tag"])
        #expect(difference.missingFields == ["Note.priority"])
        #expect(difference.mismatches == [.init(recordType: "Note", field: "title", app: .int64, server: .string)])
        #expect(difference.serverOnlyFields == ["Note.rank"], "a list of strings fits the server's list of unknown type")
        #expect(!difference.isCompatible)

        // Development adds record types and fields as saves carry them: only the retyped field is refused.
        let development = difference.refusals(in: .development)
        #expect(development.count == 1)
        #expect(development.first?.contains("Note.title is INT64 in the app and STRING on the server") == true)
        let production = difference.refusals(in: .production)
        #expect(production.count == 3)
        #expect(production.contains { $0.hasPrefix("record type Tag is not in the production schema") })
        #expect(production.contains { $0.hasPrefix("field Note.priority is not in the production schema") })
    }

    @Test func uniquenessConstraintsTheServerLacksAreNamed() {
        var app = Self.server
        app.recordTypes[0].uniquenessConstraints = [["title"], ["rank", "title"]]
        app.recordTypes[1].uniquenessConstraints = [["title"]]
        app.recordTypes.append(.init(name: "Tag", fields: [Field(name: "name", type: .string)], uniquenessConstraints: [["name"]]))
        var server = Self.server
        server.recordTypes[0].uniquenessConstraints = [["title", "rank"]]
        let difference = app.difference(from: server)
        #expect(difference.missingUniquenessConstraints == ["Folder[title]", "Note[title]", "Tag[name]"], "a constraint is a set of fields")
        #expect(difference.refusals(in: .production).count == 1, "only the missing record type refuses saves")
        #expect(app.difference(from: app).missingUniquenessConstraints.isEmpty)
    }

    @Test func aServerWithoutASchemaLacksEveryRecordType() {
        let difference = Self.server.difference(from: CloudSchema(recordTypes: []))
        #expect(difference.missingRecordTypes == ["Folder", "Note"])
        #expect(difference.refusals(in: .development).isEmpty)
        #expect(difference.refusals(in: .production).count == 2)
    }
}
