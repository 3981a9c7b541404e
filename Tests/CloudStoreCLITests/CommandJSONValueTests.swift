import CloudStore
import Foundation
import Testing

@testable import CloudStoreCLI

/// `--json` output writes each attribute value as the JSON value it is.
@Suite("--json values")
struct CommandJSONValueTests {
    func json(_ value: AttributeValue) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode([CommandJSONValue(value)]), as: UTF8.self)
    }

    @Test func everyAttributeTypeIsItsJSONValue() throws {
        let id = UUID()
        let cases: [(AttributeValue, String)] = [
            (.null, "[null]"),
            (.string("B's \"title\""), #"["B's \"title\""]"#),
            (.int64(-42), "[-42]"),
            (.double(2.5), "[2.5]"),
            (.double(.nan), #"["nan"]"#),
            (.bool(true), "[true]"),
            (.date(Date(timeIntervalSince1970: 1_800_000_000.5)), #"["2027-01-15T08:00:00.500Z"]"#),
            (.data(Data([1, 2, 255])), #"["AQL/"]"#),
            (.uuid(id), "[\"\(id.uuidString)\"]"),
            (.url(URL(string: "https://example.com/a")!), #"["https://example.com/a"]"#),
            (.decimal(Decimal(string: "12.50")!), "[12.5]"),
            (.json(#"{"count":3,"done":false,"tags":["a",1.5],"none":null}"#), #"[{"count":3,"done":false,"none":null,"tags":["a",1.5]}]"#),
        ]
        for (value, expected) in cases {
            #expect(try json(value) == expected, "\(value)")
        }
    }
}
