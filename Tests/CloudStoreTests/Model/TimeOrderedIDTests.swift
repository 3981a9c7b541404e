@testable import CloudStore
import CloudStoreTesting
import Foundation
import Testing

@Suite("Time-ordered ids: version 7 UUIDs that sort in the order they were made")
struct TimeOrderedIDTests {
    static func bytes(_ id: UUID) -> [UInt8] { withUnsafeBytes(of: id.uuid) { Array($0) } }

    static func milliseconds(_ id: UUID) -> UInt64 {
        bytes(id).prefix(6).reduce(0) { $0 << 8 | UInt64($1) }
    }

    @Test func anIdIsVersion7WithItsMillisecondFirst() {
        var ids = TimeOrderedIDs()
        var random = SeededRandomNumberGenerator(seed: 7)
        let id = ids.next(milliseconds: 0x0123_4567_89AB, using: &random)
        let bytes = Self.bytes(id)
        #expect(Array(bytes.prefix(6)) == [0x01, 0x23, 0x45, 0x67, 0x89, 0xAB])
        #expect(bytes[6] >> 4 == 7, "version nibble")
        #expect(bytes[8] >> 6 == 0b10, "RFC 9562 variant")
        #expect(id.uuidString.hasPrefix("01234567-89AB-7"))
        // A new millisecond's counter leaves room for 3,072 more ids in it.
        #expect(ids.counter < 1024)
    }

    /// Ids sort by their text (as the store, the mirror and the server keep them, in either case)
    /// in the order they were made: many in one millisecond, a clock that steps back, a jump.
    @Test func idsSortInTheOrderTheyWereMade() {
        var ids = TimeOrderedIDs()
        var random = SeededRandomNumberGenerator(seed: 42)
        let clock: [UInt64] =
            [1_763_700_000_000] + Array(repeating: 1_763_700_000_001, count: 5_000) + [1_763_699_999_000, 1_763_700_000_002]
            + (0..<200).map { 1_763_700_100_000 + UInt64($0 / 3) }
        let made = clock.map { ids.next(milliseconds: $0, using: &random) }
        #expect(Set(made).count == made.count)
        #expect(made.map(\.uuidString) == made.map(\.uuidString).sorted())
        #expect(made.map { $0.uuidString.lowercased() } == made.map { $0.uuidString.lowercased() }.sorted())
        #expect(made.map(Self.bytes).elementsEqual(made.map(Self.bytes).sorted { $0.lexicographicallyPrecedes($1) }))
        // 5,000 ids in one millisecond fill its counter: the rest take the next millisecond, and
        // the clock stepping back a second later does not make an id go back in time.
        let inOneMillisecond = made[1...5_000].map(Self.milliseconds)
        #expect(inOneMillisecond.first == 1_763_700_000_001)
        #expect(inOneMillisecond.last == 1_763_700_000_002)
        #expect(Self.milliseconds(made[5_001]) == 1_763_700_000_002)
        #expect(Self.milliseconds(made.last!) == 1_763_700_100_066)
    }

    @Test func theCounterOverflowsIntoTheNextMillisecond() {
        var ids = TimeOrderedIDs()
        var random = SeededRandomNumberGenerator(seed: 1)
        _ = ids.next(milliseconds: 1_000, using: &random)
        let first = ids.counter
        for _ in first..<TimeOrderedIDs.maxCounter { _ = ids.next(milliseconds: 1_000, using: &random) }
        #expect(ids.milliseconds == 1_000)
        #expect(ids.counter == TimeOrderedIDs.maxCounter)
        let overflowed = ids.next(milliseconds: 1_000, using: &random)
        #expect(Self.milliseconds(overflowed) == 1_001)
        #expect(ids.counter < 1024)
    }

    @Test func theProcessWideGeneratorReadsTheClockAndKeepsTheOrder() {
        let before = UInt64(Date().timeIntervalSince1970 * 1000)
        let made = (0..<1_000).map { _ in UUID.timeOrdered() }
        #expect(Self.milliseconds(made[0]) >= before)
        #expect(Set(made).count == made.count)
        #expect(made.map(\.uuidString) == made.map(\.uuidString).sorted())
        #expect(made.allSatisfy { Self.bytes($0)[6] >> 4 == 7 })
    }
}
