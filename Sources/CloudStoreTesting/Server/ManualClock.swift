import CloudStoreServer
import Foundation
import Synchronization

/// A clock that moves only when a test moves it, for the server's signature window, rate limit and
/// tombstone horizon.
///
/// ```swift
/// let clock = ManualClock()
/// let server = try await TestServer.start(clock: clock)
/// clock.advance(by: 31 * 24 * 3600)   // a month later: old tombstones are purged
/// ```
public final class ManualClock: Sendable {
    private let date: Mutex<Date>

    public init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) {
        date = Mutex(start)
    }

    public var now: Date { date.withLock { $0 } }

    public func advance(by seconds: TimeInterval) {
        date.withLock { $0 += seconds }
    }

    public func set(_ newDate: Date) {
        date.withLock { $0 = newDate }
    }

    /// The clock as the server takes it.
    public var serverClock: ServerClock {
        ServerClock { self.now }
    }
}
