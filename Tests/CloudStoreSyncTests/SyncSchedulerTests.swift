import Testing

@testable import CloudStoreSync

@Suite struct SyncSchedulerTests {
    var configuration = SyncScheduler.Configuration(
        sendDebounce: .seconds(1), maxSendDelay: .seconds(5), pollInterval: .seconds(60), backoffBase: .seconds(2),
        backoffMax: .seconds(60))

    func idleScheduler(push: Bool = true) -> SyncScheduler {
        var scheduler = SyncScheduler(configuration: configuration, now: .zero, pushAvailable: push, hasPendingChanges: false)
        #expect(scheduler.nextAction(at: .zero) == .fetch, "a new engine catches up first")
        scheduler.willStart(.fetch)
        scheduler.succeeded(.fetch, at: .zero)
        return scheduler
    }

    @Test func start_sendsPendingChangesAfterTheFirstFetch() {
        var scheduler = SyncScheduler(configuration: configuration, now: .zero, pushAvailable: true, hasPendingChanges: true)
        #expect(scheduler.nextAction(at: .zero) == .fetch)
        scheduler.willStart(.fetch)
        scheduler.succeeded(.fetch, at: .zero)
        #expect(scheduler.nextAction(at: .zero) == .send)
    }

    @Test func changes_areSentAfterTheDebounce() {
        var scheduler = idleScheduler()
        #expect(scheduler.nextAction(at: .seconds(10)) == .idle)
        scheduler.changesAdded(at: .seconds(10))
        #expect(scheduler.nextAction(at: .seconds(10)) == .wait(until: .seconds(11)))
        scheduler.changesAdded(at: .milliseconds(10_500))
        #expect(scheduler.nextAction(at: .milliseconds(10_500)) == .wait(until: .milliseconds(11_500)))
        #expect(scheduler.nextAction(at: .milliseconds(11_500)) == .send)
        scheduler.willStart(.send)
        scheduler.succeeded(.send, at: .seconds(12))
        #expect(scheduler.nextAction(at: .seconds(12)) == .idle)
    }

    @Test func leadingEdge_aChangeWhileNothingIsSentGoesAtOnce_theOnesDuringASendAreDebounced() {
        var configuration = configuration
        configuration.sendsAtLeadingEdge = true
        var scheduler = SyncScheduler(configuration: configuration, now: .zero, pushAvailable: true, hasPendingChanges: false)
        scheduler.willStart(.fetch)
        scheduler.succeeded(.fetch, at: .zero)
        scheduler.changesAdded(at: .seconds(10))
        scheduler.changesAdded(at: .seconds(10))
        #expect(scheduler.nextAction(at: .seconds(10)) == .send, "the leading edge goes at once")
        scheduler.willStart(.send)
        // Changes while that send is in flight wait for the debounce, gathered.
        scheduler.changesAdded(at: .milliseconds(10_100))
        scheduler.changesAdded(at: .milliseconds(10_600))
        #expect(scheduler.nextAction(at: .milliseconds(10_600)) == .wait(until: .milliseconds(11_600)))
        scheduler.succeeded(.send, at: .milliseconds(10_700))
        #expect(scheduler.nextAction(at: .milliseconds(10_700)) == .wait(until: .milliseconds(11_600)), "still gathered")
        #expect(scheduler.nextAction(at: .milliseconds(11_600)) == .send)
        scheduler.willStart(.send)
        scheduler.succeeded(.send, at: .milliseconds(11_700))
        #expect(scheduler.nextAction(at: .milliseconds(11_700)) == .idle)
        // A change once nothing is sent or waiting goes at once again, however soon after.
        scheduler.changesAdded(at: .milliseconds(11_705))
        #expect(scheduler.nextAction(at: .milliseconds(11_705)) == .send)
        scheduler.willStart(.send)
        scheduler.succeeded(.send, at: .milliseconds(11_708))
        scheduler.changesAdded(at: .milliseconds(11_710))
        #expect(scheduler.nextAction(at: .milliseconds(11_710)) == .send)
    }

    @Test func changes_thatKeepComingAreSentByTheMaxDelay() {
        var scheduler = idleScheduler()
        for tenth in stride(from: 0, through: 80, by: 5) {
            scheduler.changesAdded(at: .milliseconds(100 * tenth))
        }
        #expect(scheduler.nextAction(at: .seconds(8)) == .send, "first change at 0 s must go by 5 s")
    }

    @Test func push_fetchesNowAndPollingStartsOnlyWhenPushFails() {
        var scheduler = idleScheduler()
        scheduler.pushReceived(changed: false, at: .seconds(3))
        #expect(scheduler.nextAction(at: .seconds(3)) == .idle)
        scheduler.pushReceived(changed: true, at: .seconds(4))
        #expect(scheduler.nextAction(at: .seconds(4)) == .fetch)
        scheduler.willStart(.fetch)
        scheduler.succeeded(.fetch, at: .seconds(4))

        scheduler.pushFailed(at: .seconds(5))
        #expect(scheduler.nextAction(at: .seconds(5)) == .wait(until: .seconds(65)))
        #expect(scheduler.nextAction(at: .seconds(65)) == .fetch)
        scheduler.willStart(.fetch)
        scheduler.succeeded(.fetch, at: .seconds(66))
        #expect(scheduler.nextAction(at: .seconds(66)) == .wait(until: .seconds(125)))

        scheduler.pushReceived(changed: false, at: .seconds(70))
        #expect(scheduler.nextAction(at: .seconds(200)) == .idle, "push works again: no more polling")
    }

    @Test func start_withoutPushPollsAtTheInterval() {
        var scheduler = idleScheduler(push: false)
        #expect(scheduler.nextAction(at: .seconds(1)) == .wait(until: .seconds(60)))
    }

    @Test func failure_backsOffExponentiallyWithJitterUpToTheCap() {
        var scheduler = idleScheduler()
        scheduler.changesAdded(at: .zero)
        var delays: [Duration] = []
        var now = Duration.seconds(1)
        for _ in 0..<7 {
            #expect(scheduler.nextAction(at: now) == .send)
            scheduler.willStart(.send)
            scheduler.failed(.send, at: now, cause: .network, retryAfter: nil, jitter: 1)
            guard case .wait(let until) = scheduler.nextAction(at: now) else {
                Issue.record("expected a wait after a failure")
                return
            }
            delays.append(until - now)
            now = until
        }
        #expect(delays == [2, 4, 8, 16, 32, 60, 60].map { Duration.seconds($0) })
    }

    @Test func jitter_scalesTheDelayIntoItsUpperHalf() {
        let low = SyncScheduler.backoffDelay(failures: 3, base: .seconds(2), max: .seconds(60), jitter: 0)
        let high = SyncScheduler.backoffDelay(failures: 3, base: .seconds(2), max: .seconds(60), jitter: 0.999)
        #expect(low == .seconds(4))
        #expect(high > .milliseconds(7_990) && high <= .seconds(8))
    }

    @Test func retryAfter_overridesTheBackoffAndSurvivesTheNetworkComingBack() {
        var scheduler = idleScheduler()
        scheduler.changesAdded(at: .zero)
        scheduler.willStart(.send)
        scheduler.failed(.send, at: .seconds(1), cause: .server, retryAfter: .seconds(30), jitter: 0.5)
        #expect(scheduler.nextAction(at: .seconds(1)) == .wait(until: .seconds(31)))
        scheduler.pushReceived(changed: false, at: .seconds(2))
        #expect(scheduler.nextAction(at: .seconds(2)) == .wait(until: .seconds(31)))
        #expect(scheduler.nextAction(at: .seconds(31)) == .send)
    }

    @Test func networkComingBack_endsANetworkBackoff() {
        var scheduler = idleScheduler()
        scheduler.changesAdded(at: .zero)
        scheduler.willStart(.send)
        scheduler.failed(.send, at: .seconds(1), cause: .network, retryAfter: nil, jitter: 0)
        scheduler.failed(.send, at: .seconds(2), cause: .network, retryAfter: nil, jitter: 0)
        #expect(scheduler.nextAction(at: .seconds(2)) == .wait(until: .seconds(4)))
        scheduler.pushReceived(changed: false, at: .seconds(3))
        #expect(scheduler.nextAction(at: .seconds(3)) == .send)
        #expect(scheduler.consecutiveFailures == 0)
    }

    @Test func success_resetsTheBackoff() {
        var scheduler = idleScheduler()
        scheduler.failed(.fetch, at: .zero, cause: .server, retryAfter: nil, jitter: 1)
        scheduler.failed(.fetch, at: .zero, cause: .server, retryAfter: nil, jitter: 1)
        #expect(scheduler.consecutiveFailures == 2)
        scheduler.willStart(.fetch)
        scheduler.succeeded(.fetch, at: .seconds(5))
        #expect(scheduler.consecutiveFailures == 0)
        #expect(scheduler.backoffUntil == nil)
        scheduler.failed(.send, at: .seconds(5), cause: .server, retryAfter: nil, jitter: 1)
        #expect(scheduler.nextAction(at: .seconds(5)) == .wait(until: .seconds(7)), "back at the base delay")
    }

    @Test func fetch_comesBeforeSendWhenBothAreDue() {
        var scheduler = idleScheduler()
        scheduler.changesAdded(at: .zero)
        scheduler.pushReceived(changed: true, at: .seconds(2))
        #expect(scheduler.nextAction(at: .seconds(2)) == .fetch)
    }

    @Test func authenticationFailure_stopsEverything() {
        var scheduler = idleScheduler()
        scheduler.changesAdded(at: .zero)
        scheduler.authenticationFailed()
        #expect(scheduler.nextAction(at: .seconds(10)) == .stop)
    }
}
