/// The engine's view of a `Clock<Duration>`: time as a `Duration` since the engine started, so
/// the scheduler can do arithmetic on plain durations whatever the clock's instant type.
struct EngineClock: Sendable {
    private let nowSinceStart: @Sendable () -> Duration
    private let sleeper: @Sendable (Duration) async throws -> Void

    init(_ clock: any Clock<Duration>) {
        self = Self.adapting(clock)
    }

    private init(now: @escaping @Sendable () -> Duration, sleep: @escaping @Sendable (Duration) async throws -> Void) {
        nowSinceStart = now
        sleeper = sleep
    }

    private static func adapting<C: Clock<Duration>>(_ clock: C) -> EngineClock {
        let origin = clock.now
        return EngineClock(
            now: { origin.duration(to: clock.now) },
            sleep: { deadline in try await clock.sleep(until: origin.advanced(by: deadline), tolerance: nil) })
    }

    var now: Duration { nowSinceStart() }

    /// Sleeps until `deadline` (time since the engine started); throws when cancelled.
    func sleep(until deadline: Duration) async throws {
        try await sleeper(deadline)
    }
}
