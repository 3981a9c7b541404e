import Foundation
import Synchronization

/// A token bucket per caller: `rate` requests per second, with a burst of one second's worth.
///
/// The decision is pure (``Bucket/take(now:rate:)``); the limiter only keeps the buckets.
final class RateLimiter: Sendable {
    struct Bucket: Hashable, Sendable {
        var tokens: Double
        var updated: Date

        /// Takes one token at `now`; answers nil when allowed, else the seconds until one is back.
        mutating func take(now: Date, rate: Double) -> Double? {
            let capacity = max(rate, 1)
            let elapsed = max(0, now.timeIntervalSince(updated))
            tokens = min(capacity, tokens + elapsed * rate)
            updated = max(updated, now)
            if tokens >= 1 {
                tokens -= 1
                return nil
            }
            return (1 - tokens) / rate
        }
    }

    private let rate: Double
    private let buckets = Mutex<[String: Bucket]>([:])

    init(requestsPerSecond: Double) {
        precondition(requestsPerSecond > 0, "a rate limit must allow some requests")
        rate = requestsPerSecond
    }

    /// Takes a token for a caller; answers nil when allowed, else the seconds to wait.
    func take(for key: String, now: Date) -> Double? {
        buckets.withLock { buckets in
            var bucket = buckets[key] ?? Bucket(tokens: max(rate, 1), updated: now)
            let wait = bucket.take(now: now, rate: rate)
            buckets[key] = bucket
            if buckets.count > 10_000 {
                // A bucket that has refilled is the same as no bucket.
                let rate = self.rate
                buckets = buckets.filter { $0.value.tokens + now.timeIntervalSince($0.value.updated) * rate < max(rate, 1) }
            }
            return wait
        }
    }
}
