@testable import CloudStoreServer
import CloudStoreTesting
import Testing

/// A stopping server waits for the PostgreSQL pool a bounded time (``BoundedWait``).
@Suite("bounded wait for a task's end")
struct BoundedWaitTests {
    /// A task that runs until `end` finishes.
    static func taskUntilEnded() -> (task: Task<Void, Never>, end: AsyncStream<Void>.Continuation) {
        let (ends, end) = AsyncStream.makeStream(of: Void.self)
        return (Task { for await _ in ends {} }, end)
    }

    @Test func aTaskThatEndsInTime_isEnded() async {
        let clock = TestClock()
        let (task, end) = Self.taskUntilEnded()
        async let outcome = BoundedWait.untilEnd(of: task, atMost: .seconds(5), clock: clock)
        await clock.waitForSleepers()
        end.finish()
        #expect(await outcome == .ended)
    }

    @Test func aTaskThatNeverEnds_timesOutWhenTheLimitPasses_andGoesOn() async {
        let clock = TestClock()
        let (task, end) = Self.taskUntilEnded()
        async let outcome = BoundedWait.untilEnd(of: task, atMost: .seconds(5), clock: clock)
        await clock.waitForSleepers()
        #expect(clock.nextDeadline == clock.now.advanced(by: .seconds(5)))
        clock.advance(by: .seconds(5))
        #expect(await outcome == .timedOut)
        #expect(!task.isCancelled, "the task is left to go on")
        end.finish()
        await task.value
    }
}
