import Foundation
import Testing

@testable import CloudStore

/// Object ids are read from record names, columns and tokens with `UUID(text:)`: the same UUID as
/// Foundation's `UUID(uuidString:)` for every well-formed text, and nil for text that only looks
/// like one, which Foundation's `sscanf` reading lets through.
@Suite struct UUIDTextTests {
    @Test func wellFormedText_isFoundationsUUID() {
        for _ in 0..<1000 {
            let uuid = UUID()
            for text in [uuid.uuidString, uuid.uuidString.lowercased()] {
                #expect(UUID(text: text) == uuid)
                #expect(UUID(text: text) == UUID(uuidString: text))
            }
        }
    }

    @Test(arguments: [
        "", "E621E1F8C36C495A93FC0C247A3E6E5F", " E621E1F8-C36C-495A-93FC-0C247A3E6E5F",
        "E621E1F8-C36C-495A-93FC-0C247A3E6E5F ", "{E621E1F8-C36C-495A-93FC-0C247A3E6E5F}",
        "E621E1F8-C36C-495A-93FC-0C247A3E6E5G", "E621E1F8-C36C-495A-93FC0-C247A3E6E5F",
        "E621E1F8-C36C-495A-93FC-0C247A3E6E5", "E621E1F8-C36C-495A-93FC-0C247A3E6E5F0",
        "E621E1F8-C36C-495A-93FC-0C247A3E6E5٣",
        // Foundation reads these three (a sign, a hex prefix, a space inside a group) as other UUIDs.
        "+621E1F8-C36C-495A-93FC-0C247A3E6E5F", "0x21E1F8-C36C-495A-93FC-0C247A3E6E5F",
        "E621E1F8-C36C-495A-93FC-0C247A3E 6E5",
    ])
    func textThatIsNotExactlyAUUID_isNil(_ text: String) {
        #expect(UUID(text: text) == nil)
    }
}
