import Foundation
import Testing

@testable import CloudStore

/// The names a fetch from scratch saw (``RecordNameSet``): objects' names held as ids, every other
/// name as text, and a name is found exactly as it was inserted.
@Suite struct RecordNameSetTests {
    @Test func namesAreFoundExactlyAsInserted() {
        let id = UUID()
        let lowerCase = UUID().uuidString.lowercased()
        var names = RecordNameSet()
        for name in [id.uuidString, lowerCase, "Note.tags/\(id.uuidString)/X", "", "settings", id.uuidString] {
            names.insert(name)
        }
        #expect(names.count == 5, "the repeated id counts once")
        #expect(names.contains(id.uuidString))
        #expect(names.contains(lowerCase))
        #expect(names.contains("Note.tags/\(id.uuidString)/X") && names.contains("") && names.contains("settings"))
        #expect(!names.contains(id.uuidString.lowercased()), "names are case-sensitive: another name")
        #expect(!names.contains(lowerCase.uppercased()))
        #expect(!names.contains(UUID().uuidString))
        #expect(!names.contains("+\(id.uuidString.dropFirst())"), "not read as an id by a lenient parser")
    }
}
