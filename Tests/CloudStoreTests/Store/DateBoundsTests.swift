@testable import CloudStore
import CloudStoreWire
import Foundation
import Testing

/// The millisecond bounds a typed query compares stored dates with: for any date, a stored
/// millisecond is below, inside or above them exactly as the date it reads back as compares with
/// the date.
@Suite struct DateBoundsTests {
    static func read(_ milliseconds: Int64) -> Date { Date(millisecondsSince1970: milliseconds) }

    @Test(arguments: [
        0.0, 0.0004, -0.0004, 1.0, 1.0005, 1_763_700_000.123, 1_763_700_000.1234, -62_135_596_800.0,
        253_402_300_799.999, 253_402_300_799.9995, Date.distantFuture.timeIntervalSince1970,
        Date.distantPast.timeIntervalSince1970,
    ])
    func storedMilliseconds_compareAsTheirDatesDo(_ seconds: Double) {
        let date = Date(timeIntervalSince1970: seconds)
        let bounds = DateBounds(date)
        let around = Int64((seconds * 1000).rounded(.down))
        for milliseconds in (around - 3)...(around + 3) {
            let stored = Self.read(milliseconds)
            #expect((milliseconds < bounds.first) == (stored < date), "\(milliseconds) ms < \(seconds) s")
            #expect((milliseconds < bounds.afterLast) == (stored <= date), "\(milliseconds) ms <= \(seconds) s")
            let inside = bounds.first <= milliseconds && milliseconds < bounds.afterLast
            #expect(inside == (stored == date), "\(milliseconds) ms == \(seconds) s")
        }
    }

    @Test func aWholeMillisecond_isOneMillisecond_andAFractionNone() {
        let whole = DateBounds(Self.read(1_763_700_000_123))
        #expect(whole.afterLast - whole.first == 1)
        let between = DateBounds(Date(timeIntervalSince1970: 1_763_700_000.1234))
        #expect(between.first == between.afterLast)
    }

    @Test func infiniteDates_boundEverythingOrNothing() {
        let future = DateBounds(Date(timeIntervalSince1970: .infinity))
        #expect(future.first > Date.timestampRange.upperBound, "every stored date is before it")
        let past = DateBounds(Date(timeIntervalSince1970: -.infinity))
        #expect(past.afterLast <= Date.timestampRange.lowerBound, "no stored date is before it")
    }
}
