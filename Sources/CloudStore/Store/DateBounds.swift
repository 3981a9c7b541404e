import CloudStoreWire
import Foundation

/// The stored milliseconds that equal a Swift date when read back: `first..<afterLast` (empty when
/// the date falls between two milliseconds). A stored date `m` is less than the date exactly when
/// `m < first`, at most the date when `m < afterLast`.
struct DateBounds: Equatable {
    let first: Int64
    let afterLast: Int64

    init(_ date: Date) {
        let range = Date.timestampRange
        func read(_ milliseconds: Int64) -> Date { Date(millisecondsSince1970: milliseconds) }
        let guess = date.timeIntervalSince1970 * 1000
        guard guess.isFinite else {
            let bound = guess > 0 ? range.upperBound + 1 : range.lowerBound
            (first, afterLast) = (bound, bound)
            return
        }
        var milliseconds = Int64(max(Double(range.lowerBound), min(Double(range.upperBound), guess.rounded(.down))))
        // The smallest millisecond that reads back at or after the date.
        while milliseconds > range.lowerBound && read(milliseconds - 1) >= date { milliseconds -= 1 }
        while milliseconds <= range.upperBound && read(milliseconds) < date { milliseconds += 1 }
        first = milliseconds
        var after = milliseconds
        while after <= range.upperBound && read(after) == date { after += 1 }
        afterLast = after
    }
}
