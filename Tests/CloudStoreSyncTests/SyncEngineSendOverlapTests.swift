import CloudStoreTesting
import CloudStoreWire
import Synchronization
import Testing

@testable import CloudStoreSync

/// The engine asks for (and encodes) the next batch while a batch is in flight, with the records
/// in flight in `recordIDsToSkip`, and sends it while the delegate handles the answer of the batch
/// before: no record is in two batches at once, the delegate is never called while it handles an
/// event, each batch's `sentRecordZoneChanges` comes before the batch after the next goes out, and
/// a prepared batch is not sent after a failure or a missing zone.
///
/// The scripted server holds each `records/modify` until the delegate was asked for a batch that
/// skips that request's records, and the delegate (when asked to) holds each answer until the next
/// request arrived, so these tests fail (instead of passing by luck) when the engine does not
/// overlap.
@Suite(.timeLimit(.minutes(ReliabilityRun.hangLimitMinutes))) struct SyncEngineSendOverlapTests {
    static let zone = ZoneID(zoneName: "Notes")

    /// What the engine did, in order: requests, zone changes, asks and answers.
    final class Log: Sendable {
        private let entries = Mutex<[String]>([])

        private let requestWaiters = Mutex<[(count: Int, continuation: CheckedContinuation<Bool, Never>)]>([])

        func append(_ entry: String) {
            let requests = entries.withLock { entries in
                entries.append(entry)
                return entries.filter { $0.hasPrefix("request") }.count
            }
            let ready = requestWaiters.withLock { waiters in
                defer { waiters.removeAll { $0.count <= requests } }
                return waiters.filter { $0.count <= requests }.map(\.continuation)
            }
            for waiter in ready { waiter.resume(returning: true) }
        }

        /// Returns once `count` requests arrived; false (after a bound that only turns a hang into
        /// a failure) if they never do.
        func waitForRequests(_ count: Int) async -> Bool {
            if requests.count >= count { return true }
            let timeout = Task {
                try await Task.sleep(for: .seconds(20))
                let late = self.requestWaiters.withLock { waiters in
                    defer { waiters.removeAll { $0.count == count } }
                    return waiters.filter { $0.count == count }.map(\.continuation)
                }
                for waiter in late { waiter.resume(returning: false) }
            }
            defer { timeout.cancel() }
            return await withCheckedContinuation { continuation in
                let arrived = requestWaiters.withLock { waiters in
                    // Checked again under the lock `append` answers waiters under.
                    if requests.count >= count { return true }
                    waiters.append((count, continuation))
                    return false
                }
                if arrived { continuation.resume(returning: true) }
            }
        }
        func clear() { entries.withLock { $0 = [] } }
        var all: [String] { entries.withLock { $0 } }
        var requests: [String] { all.filter { $0.hasPrefix("request") } }
    }

    /// A delegate that keeps its own queue of pending records until the server answers for them,
    /// as CloudStore's mirroring does, and logs every call the engine makes.
    actor Queue: SyncEngineDelegate {
        /// Pending records by name, sent in name order.
        private(set) var pending: [String: Record] = [:]
        private(set) var asks: [(skipped: Set<String>, handedOut: [String])] = []
        private(set) var sentEvents: [[String]] = []
        /// Calls of the engine that began while another was under way.
        private(set) var overlappingCalls = 0
        private var isInCall = false
        private var askWaiters: [(names: Set<String>, continuation: CheckedContinuation<Bool, Never>)] = []
        let log: Log
        /// Whether a record that failed with `ZONE_NOT_FOUND` makes the zone again and is queued anew.
        let recreatesMissingZone: Bool
        /// Whether handling an answer waits until the next batch's request arrived (when records
        /// are still pending): it arrives only if the engine sends it while the answer is handled.
        let holdsAnswersUntilTheNextRequest: Bool
        /// Answers the next request did not arrive during.
        private(set) var answersWithoutOverlap: [[String]] = []

        init(log: Log, recreatesMissingZone: Bool = false, holdsAnswersUntilTheNextRequest: Bool = false) {
            self.log = log
            self.recreatesMissingZone = recreatesMissingZone
            self.holdsAnswersUntilTheNextRequest = holdsAnswersUntilTheNextRequest
        }

        func add(_ names: [String], to engine: SyncEngine) {
            for name in names {
                pending[name] = Record(recordName: name, recordType: "Note", zoneID: SyncEngineSendOverlapTests.zone, fields: ["title": "t"])
            }
            engine.state.hasPendingUntrackedChanges = true
        }

        /// Enters a call of the engine; a suspension inside lets a concurrent call show.
        private func enter() async {
            if isInCall { overlappingCalls += 1 }
            isInCall = true
            await Task.yield()
        }

        func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
            guard case .sentRecordZoneChanges(let sent) = event else { return }
            await enter()
            defer { isInCall = false }
            let answered = sent.savedRecords.map(\.recordName) + sent.failedRecordSaves.map(\.record.recordName)
            log.append("sent \(answered.sorted())")
            sentEvents.append(answered)
            for record in sent.savedRecords { pending[record.recordName] = nil }
            if holdsAnswersUntilTheNextRequest && !pending.isEmpty, await !log.waitForRequests(sentEvents.count + 1) {
                answersWithoutOverlap.append(answered)
            }
            for failure in sent.failedRecordSaves where failure.error.code == .zoneNotFound && recreatesMissingZone {
                syncEngine.state.add(pendingDatabaseChanges: [.saveZone(failure.record.recordID.zoneID)])
                syncEngine.state.hasPendingUntrackedChanges = true
            }
        }

        func nextRecordZoneChangeBatch(
            _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
        ) async -> SyncEngine.RecordZoneChangeBatch? {
            await enter()
            defer { isInCall = false }
            syncEngine.state.hasPendingUntrackedChanges = false
            let skipped = Set(context.recordIDsToSkip.map(\.recordName))
            let names = pending.keys.sorted().filter { !skipped.contains($0) }.prefix(context.maxRecordCount)
            asks.append((skipped, Array(names)))
            log.append("ask skipping \(skipped.sorted()) -> \(Array(names))")
            for waiter in askWaiters where waiter.names.isSubset(of: skipped) { waiter.continuation.resume(returning: true) }
            askWaiters.removeAll { $0.names.isSubset(of: skipped) }
            guard !names.isEmpty else { return nil }
            syncEngine.state.hasPendingUntrackedChanges = true
            return SyncEngine.RecordZoneChangeBatch(recordsToSave: names.compactMap { pending[$0] })
        }

        /// Returns once the engine asked for a batch skipping `names`; false (after a bound that
        /// only turns a hang into a failure) if it never does.
        func waitForAsk(skipping names: Set<String>) async -> Bool {
            if asks.contains(where: { names.isSubset(of: $0.skipped) }) { return true }
            let timeout = Task {
                try await Task.sleep(for: .seconds(20))
                self.giveUp(names)
            }
            defer { timeout.cancel() }
            return await withCheckedContinuation { askWaiters.append((names, $0)) }
        }

        private func giveUp(_ names: Set<String>) {
            for waiter in askWaiters where waiter.names == names { waiter.continuation.resume(returning: false) }
            askWaiters.removeAll { $0.names == names }
        }
    }

    /// A server that answers each `records/modify` once the next batch was asked for, logging it.
    static func server(
        _ queue: @escaping @Sendable () -> Queue?, log: Log,
        answer: @escaping @Sendable (Int, RecordsModifyRequest) throws -> RecordsResponse = { _, request in
            SyncEngineMechanicsTests.acceptAll(request)
        }
    ) -> ScriptedDatabase {
        let requests = Mutex(0)
        return ScriptedDatabase { script in
            script.modifyRecords = { request in
                let names = request.operations.map(\.record.recordName)
                let index = requests.withLock { count in
                    count += 1
                    return count
                }
                log.append("request \(names)")
                let overlapped = await queue()?.waitForAsk(skipping: Set(names)) ?? false
                #expect(overlapped, "the next batch was asked for while request \(index) \(names) was in flight")
                return try answer(index, request)
            }
            script.modifyZones = { request in
                log.append("zones/modify")
                return ZonesResponse(zones: request.operations.map { .value(Zone(zoneID: $0.zone.zoneID)) })
            }
        }
    }

    static func engine(_ database: ScriptedDatabase, _ queue: Queue) -> SyncEngine {
        var configuration = SyncEngine.Configuration(database: database, stateSerialization: nil, delegate: queue, automaticallySync: false)
        configuration.maxBatchCount = 2
        return SyncEngine(configuration)
    }

    @Test func send_asksForTheNextBatchWhileOneIsInFlight_sendingEachRecordOnceAndReportingInOrder() async throws {
        let log = Log()
        let queueReference = Mutex<Queue?>(nil)
        let database = Self.server({ queueReference.withLock { $0 } }, log: log)
        let queue = Queue(log: log, holdsAnswersUntilTheNextRequest: true)
        queueReference.withLock { $0 = queue }
        let engine = Self.engine(database, queue)
        await queue.add(["N1", "N2", "N3", "N4", "N5", "N6"], to: engine)

        try await engine.sendChanges()

        let entries = log.all
        let requests = entries.filter { $0.hasPrefix("request") }
        #expect(requests == [#"request ["N1", "N2"]"#, #"request ["N3", "N4"]"#, #"request ["N5", "N6"]"#], "each record sent once")
        #expect(await queue.sentEvents == [["N1", "N2"], ["N3", "N4"], ["N5", "N6"]], "answers reported in order")
        #expect(await queue.pending.isEmpty)
        #expect(await queue.overlappingCalls == 0, "the delegate is called one call at a time")
        #expect(await queue.answersWithoutOverlap.isEmpty, "the next batch went out while each answer was handled")
        // Each batch's answer is reported before the batch after the next goes out.
        let sentAt = try #require(entries.firstIndex(of: #"sent ["N1", "N2"]"#))
        let thirdRequestAt = try #require(entries.firstIndex(of: #"request ["N5", "N6"]"#))
        #expect(sentAt < thirdRequestAt, "\(entries)")
        // The records in flight were skipped, and no ask handed out a record another batch held.
        let asks = await queue.asks
        // The last ask, while N5 and N6 travel, finds nothing: the delegate is not asked again.
        #expect(asks.map(\.handedOut) == [["N1", "N2"], ["N3", "N4"], ["N5", "N6"], []])
        #expect(asks[1].skipped.isSuperset(of: ["N1", "N2"]) && asks[2].skipped.isSuperset(of: ["N3", "N4"]))
    }

    /// A request that fails as a whole ends the send: the batch prepared meanwhile is not sent,
    /// stays pending, and goes out (once) with the next send.
    @Test func send_aFailedRequestLeavesThePreparedBatchUnsentAndPending() async throws {
        let log = Log()
        let queueReference = Mutex<Queue?>(nil)
        let failing = Mutex(true)
        let database = Self.server({ queueReference.withLock { $0 } }, log: log) { index, request in
            if index == 2 && failing.withLock({ $0 }) { throw CloudError(.network, message: "the connection was reset") }
            return SyncEngineMechanicsTests.acceptAll(request)
        }
        let queue = Queue(log: log)
        queueReference.withLock { $0 = queue }
        let engine = Self.engine(database, queue)
        await queue.add(["N1", "N2", "N3", "N4", "N5", "N6"], to: engine)

        await #expect(throws: CloudError.self) { try await engine.sendChanges() }

        #expect(log.requests == [#"request ["N1", "N2"]"#, #"request ["N3", "N4"]"#])
        #expect(await queue.asks.last?.handedOut == ["N5", "N6"], "the batch after the failed one was prepared")
        #expect(await queue.sentEvents == [["N1", "N2"]])
        #expect(await queue.pending.keys.sorted() == ["N3", "N4", "N5", "N6"])

        failing.withLock { $0 = false }
        log.clear()
        try await engine.sendChanges()
        #expect(log.requests == [#"request ["N3", "N4"]"#, #"request ["N5", "N6"]"#])
        #expect(await queue.sentEvents == [["N1", "N2"], ["N3", "N4"], ["N5", "N6"]])
        #expect(await queue.pending.isEmpty)
    }

    /// A batch whose zone is missing: the batch prepared meanwhile (from before the delegate made
    /// the zone again) is dropped; the zone goes first, then the delegate is asked again.
    @Test func send_aMissingZoneDropsThePreparedBatchAndAsksAgainAfterTheZoneIsMade() async throws {
        let log = Log()
        let queueReference = Mutex<Queue?>(nil)
        let database = Self.server({ queueReference.withLock { $0 } }, log: log) { index, request in
            guard index == 1 else { return SyncEngineMechanicsTests.acceptAll(request) }
            return RecordsResponse(
                records: request.operations.map {
                    .error(ServerError(.zoneNotFound, reason: "zone Notes does not exist", recordName: $0.record.recordName))
                })
        }
        let queue = Queue(log: log, recreatesMissingZone: true)
        queueReference.withLock { $0 = queue }
        let engine = Self.engine(database, queue)
        await queue.add(["N1", "N2", "N3", "N4"], to: engine)

        try await engine.sendChanges()

        let entries = log.all
        #expect(
            entries.filter { $0.hasPrefix("request") || $0 == "zones/modify" } == [
                #"request ["N1", "N2"]"#, "zones/modify", #"request ["N1", "N2"]"#, #"request ["N3", "N4"]"#,
            ], "\(entries)")
        #expect(await queue.asks[1].handedOut == ["N3", "N4"], "a batch was prepared while the first was in flight")
        #expect(await queue.sentEvents == [["N1", "N2"], ["N1", "N2"], ["N3", "N4"]])
        #expect(await queue.pending.isEmpty)
        #expect(await queue.overlappingCalls == 0)
    }

    /// A send cancelled while the batch that went out early is in flight still hands that batch's
    /// answer to the delegate (its records are not left in flight), and sends nothing more.
    @Test func send_cancelledWhileABatchSentEarlyIsInFlight_stillAnswersIt() async throws {
        let log = Log()
        let gate = Mutex<CheckedContinuation<Void, Never>?>(nil)
        let database = ScriptedDatabase { script in
            script.modifyRecords = { request in
                let names = request.operations.map(\.record.recordName)
                guard names == ["N3", "N4"] else {
                    log.append("request \(names)")
                    return SyncEngineMechanicsTests.acceptAll(request)
                }
                // Held until the test opens the gate; logged once the gate can be opened.
                await withCheckedContinuation { continuation in
                    gate.withLock { $0 = continuation }
                    log.append("request \(names)")
                }
                return SyncEngineMechanicsTests.acceptAll(request)
            }
        }
        let queue = Queue(log: log)
        let engine = Self.engine(database, queue)
        await queue.add(["N1", "N2", "N3", "N4", "N5", "N6"], to: engine)

        let send = Task { try await engine.sendChanges() }
        #expect(await log.waitForRequests(2))
        send.cancel()
        gate.withLock { $0?.resume() }
        await #expect(throws: (any Error).self) { try await send.value }

        #expect(log.requests == [#"request ["N1", "N2"]"#, #"request ["N3", "N4"]"#])
        #expect(await queue.sentEvents == [["N1", "N2"], ["N3", "N4"]])
        #expect(await queue.pending.keys.sorted() == ["N5", "N6"])
    }
}
