import CloudStoreSync
import CloudStoreTesting
import CloudStoreWire
import Synchronization
import Testing

@testable import CloudStoreSync

/// Engine mechanics that need exact server answers, against a scripted database. The same
/// behaviours end to end, against a real server, are in `SyncEngineMultiDeviceTests`.
@Suite(.timeLimit(.minutes(ReliabilityRun.hangLimitMinutes))) struct SyncEngineMechanicsTests {
    let notes = ZoneID(zoneName: "Notes")
    var notesOnServer: ZoneID { ZoneID(zoneName: "Notes", ownerRecordName: "_u1") }

    func note(_ name: String, _ title: String = "t", tag: String? = nil) -> Record {
        Record(recordName: name, recordType: "Note", recordChangeTag: tag, zoneID: notes, fields: ["title": .string(title)])
    }

    /// Echoes saves with a tag, as a server would.
    static func acceptAll(_ request: RecordsModifyRequest) -> RecordsResponse {
        RecordsResponse(
            records: request.operations.map { operation in
                var record = operation.record
                if operation.operationType.isDelete { return .value(Record(recordName: record.recordName, deleted: true)) }
                record.recordChangeTag = "tag-\(record.recordName)"
                return .value(record)
            })
    }

    @Test func fetch_deliversEventsInOrderAndPagesThroughAnEmptyPage() async throws {
        let server = notesOnServer
        let database = ScriptedDatabase { script in
            script.databaseChanges = { _ in
                DatabaseChangesResponse(
                    syncToken: "db1", moreComing: false,
                    zones: [Zone(zoneID: server, syncToken: "x"), Zone(zoneID: ZoneID(zoneName: "Old"), deleted: true, reason: .purged)])
            }
            script.zoneChanges = { request in
                let page: ZoneChanges =
                    switch request.zones[0].syncToken {
                    case nil: ZoneChanges(zoneID: server, syncToken: "z1", moreComing: true, records: [Record(recordName: "N1", recordType: "Note", recordChangeTag: "a")])
                    case "z1": ZoneChanges(zoneID: server, syncToken: "z2", moreComing: true, records: [])
                    default: ZoneChanges(zoneID: server, syncToken: "z3", moreComing: false, records: [Record(recordName: "N0", recordType: "Note", deleted: true)])
                    }
                return ZoneChangesResponse(zones: [.value(page)])
            }
        }
        let device = await EngineDevice("A", database: database)
        try await device.engine.fetchChanges()

        let names = await device.eventNames().filter { $0 != "stateUpdate" }
        #expect(
            names == [
                "accountChange", "willFetchChanges", "fetchedDatabaseChanges", "willFetchRecordZoneChanges",
                "fetchedRecordZoneChanges", "fetchedRecordZoneChanges", "didFetchRecordZoneChanges", "didFetchChanges",
            ])
        let events = await device.events
        let pages = events.compactMap { event -> SyncEngine.Event.FetchedRecordZoneChanges? in
            if case .fetchedRecordZoneChanges(let page) = event { return page }
            return nil
        }
        #expect(pages[0].zoneID == notes, "zones the user owns are named without an owner")
        #expect(pages[0].modifications.map(\.recordID) == [RecordID(recordName: "N1", zoneID: notes)])
        #expect(pages[0].stateSerialization.zoneTokens.first?.syncToken == "z1", "the page's state holds the page's token")
        #expect(pages[1].deletions == [.init(recordID: RecordID(recordName: "N0", zoneID: notes), recordType: "Note")])
        guard case .fetchedDatabaseChanges(let databaseChanges)? = events.first(where: { $0.name == "fetchedDatabaseChanges" })
        else { return }
        #expect(databaseChanges.modifications == [notes])
        #expect(databaseChanges.deletions.map(\.reason) == [.purged])
        #expect(device.engine.state.zoneIDsWithUnfetchedServerChanges.isEmpty)
        let saved = try #require(await device.savedState)
        #expect(saved.databaseToken == "db1")
        #expect(saved.zoneTokens.first?.syncToken == "z3")
    }

    /// A long poll's answer carries the `changes/database` page for the token it was asked from,
    /// and first zone pages for the zone tokens it named: a scheduled fetch applies them instead of
    /// asking; a zone listed at the token the state already holds (the device's own writes) is not
    /// fetched; a page asked from a token the state no longer holds, or a fetch the app asked
    /// for, asks the server.
    @Test func fetch_appliesThePagesTheLongPollCarried() async throws {
        let server = notesOnServer
        let requests = Mutex<[String]>([])
        let zoneToken = Mutex("z1")
        let database = ScriptedDatabase { script in
            script.databaseChanges = { request in
                requests.withLock { $0.append("changes/database from \(request.syncToken ?? "none")") }
                return DatabaseChangesResponse(syncToken: "db1", moreComing: false, zones: [Zone(zoneID: server, syncToken: "z1")])
            }
            script.zoneChanges = { request in
                requests.withLock { $0.append("changes/zone from \(request.zones[0].syncToken ?? "none")") }
                let page = ZoneChanges(zoneID: server, syncToken: zoneToken.withLock { $0 }, moreComing: false, records: [])
                return ZoneChangesResponse(zones: [.value(page)])
            }
        }
        let device = await EngineDevice("A", database: database)
        let engine = device.engine
        try await engine.fetchChanges()
        #expect(requests.withLock { $0 } == ["changes/database from none", "changes/zone from none"])
        let scheduled = SyncEngine.FetchChangesContext(reason: .scheduled, options: SyncEngine.FetchChangesOptions())
        func answer(_ since: String, database token: String, zone: String, page: ZoneChanges? = nil) async {
            let response = NotificationsResponse(
                changed: true, syncToken: token, zones: [],
                databaseChanges: DatabaseChangesResponse(syncToken: token, moreComing: false, zones: [Zone(zoneID: server, syncToken: zone)]),
                zoneChanges: page.map { [$0] })
            await engine.pushAnswered(changed: true, response: response, since: since, zoneTokens: [notes: "z1"])
        }

        // Another device wrote the zone: only the zone is asked for.
        requests.withLock { $0 = [] }
        zoneToken.withLock { $0 = "z2" }
        await answer("db1", database: "db2", zone: "z2")
        try await engine.fetch(scheduled)
        #expect(requests.withLock { $0 } == ["changes/zone from z1"])
        #expect(engine.state.withStorage { ($0.databaseToken, $0.zoneTokens[notes]) } == ("db2", "z2"))

        // The zone is at the token the state holds: nothing to ask.
        requests.withLock { $0 = [] }
        await answer("db2", database: "db3", zone: "z2")
        try await engine.fetch(scheduled)
        #expect(requests.withLock { $0 }.isEmpty)
        #expect(engine.state.withStorage { $0.databaseToken } == "db3")
        #expect(engine.state.zoneIDsWithUnfetchedServerChanges.isEmpty)

        // The answer carries the zone's page, asked from a token the state no longer holds ("z1"):
        // the zone is asked for; then one asked from the token it holds: applied, nothing asked.
        let note = Record(recordName: "N1", recordType: "Note", recordChangeTag: "a", zoneID: server, fields: ["title": .string("t")])
        await answer("db3", database: "db4", zone: "z3", page: ZoneChanges(zoneID: server, syncToken: "z3", moreComing: false, records: [note]))
        zoneToken.withLock { $0 = "z3" }
        try await engine.fetch(scheduled)
        #expect(requests.withLock { $0 } == ["changes/zone from z2"])
        requests.withLock { $0 = [] }
        let response = NotificationsResponse(
            changed: true, syncToken: "db5", zones: [],
            databaseChanges: DatabaseChangesResponse(syncToken: "db5", moreComing: false, zones: [Zone(zoneID: server, syncToken: "z4")]),
            zoneChanges: [ZoneChanges(zoneID: server, syncToken: "z4", moreComing: false, records: [note])])
        await engine.pushAnswered(changed: true, response: response, since: "db4", zoneTokens: [notes: "z3"])
        try await engine.fetch(scheduled)
        #expect(requests.withLock { $0 }.isEmpty)
        #expect(engine.state.withStorage { ($0.databaseToken, $0.zoneTokens[notes]) } == ("db5", "z4"))

        // A page asked from a database token the state no longer holds is not applied.
        await answer("db1", database: "db9", zone: "z9")
        try await engine.fetch(scheduled)
        #expect(requests.withLock { $0 }.first == "changes/database from db5")

        // A fetch the app asks for asks the server, whatever the poll carried.
        requests.withLock { $0 = [] }
        await answer("db1", database: "db9", zone: "z9")
        try await engine.fetchChanges()
        #expect(requests.withLock { $0 }.first == "changes/database from db1")
        #expect(await device.records[RecordID(recordName: "N1", zoneID: notes)] != nil, "the pushed page's record was delivered")
    }

    /// The next page is asked for while a page is applied; when it fails, the zone's token stays
    /// at the last page delivered, never past it.
    @Test func fetch_aFailedNextPageLeavesTheTokenAtTheLastPageDelivered() async throws {
        let server = notesOnServer
        let requestedTokens = Mutex<[String?]>([])
        let database = ScriptedDatabase { script in
            script.databaseChanges = { _ in
                DatabaseChangesResponse(syncToken: "db1", moreComing: false, zones: [Zone(zoneID: server, syncToken: "x")])
            }
            script.zoneChanges = { request in
                let token = request.zones[0].syncToken
                requestedTokens.withLock { $0.append(token) }
                guard token == nil else { throw CloudError.server(ServerError(.tryAgainLater, reason: "busy"), httpStatus: 503) }
                return ZoneChangesResponse(zones: [
                    .value(ZoneChanges(zoneID: server, syncToken: "z1", moreComing: true, records: [Record(recordName: "N1", recordType: "Note", recordChangeTag: "a")]))
                ])
            }
        }
        let device = await EngineDevice("A", database: database)
        await #expect(throws: CloudError.self) { try await device.engine.fetchChanges() }

        #expect(requestedTokens.withLock { $0 } == [nil, "z1"])
        let pages = await device.events.compactMap { event -> SyncEngine.Event.FetchedRecordZoneChanges? in
            if case .fetchedRecordZoneChanges(let page) = event { return page }
            return nil
        }
        #expect(pages.map { $0.modifications.map(\.recordName) } == [["N1"]])
        #expect(pages.first?.stateSerialization.zoneTokens.first?.syncToken == "z1")
        #expect(device.engine.state.zoneIDsWithUnfetchedServerChanges == [notes])
        #expect(await device.savedState?.zoneTokens.first?.syncToken == "z1")
    }

    @Test func fetch_expiredZoneTokenRefetchesTheZoneFromScratch() async throws {
        let server = notesOnServer
        let requestedTokens = Mutex<[String?]>([])
        let database = ScriptedDatabase { script in
            script.databaseChanges = { _ in DatabaseChangesResponse(syncToken: "db1", moreComing: false, zones: []) }
            script.zoneChanges = { request in
                let token = request.zones[0].syncToken
                requestedTokens.withLock { $0.append(token) }
                if token == "old" {
                    throw CloudError.server(ServerError(.changeTokenExpired, reason: "too old"), httpStatus: 410)
                }
                return ZoneChangesResponse(zones: [
                    .value(ZoneChanges(zoneID: server, syncToken: "z1", moreComing: false, records: [Record(recordName: "N1", recordType: "Note")]))
                ])
            }
        }
        let saved = SyncEngine.State.Serialization(
            userRecordName: "_u1", databaseToken: "db0", zoneTokens: [.init(zoneID: notes, syncToken: "old")],
            zonesWithUnfetchedChanges: [notes])
        let device = await EngineDevice("A", database: database, state: saved)
        try await device.engine.fetchChanges()

        #expect(requestedTokens.withLock { $0 } == ["old", nil])
        let zoneEvents = await device.events.compactMap { event -> String? in
            switch event {
            case .willFetchRecordZoneChanges(let will): "will(fromScratch: \(will.fromScratch))"
            case .didFetchRecordZoneChanges(let did): "did(\(did.error?.code?.rawValue ?? "ok"))"
            case .fetchedRecordZoneChanges(let page): "page(\(page.modifications.count))"
            default: nil
            }
        }
        #expect(
            zoneEvents == [
                "will(fromScratch: false)", "did(CHANGE_TOKEN_EXPIRED)", "will(fromScratch: true)", "page(1)", "did(ok)",
            ])
    }

    /// A database token refused, and the listing from scratch lacks a zone the engine had fetched
    /// (the server lost it): that zone is fetched from scratch and its `ZONE_NOT_FOUND` reaches the
    /// delegate; a zone still listed goes on from its token.
    @Test func fetch_aZoneTheServerNoLongerListsIsFetchedFromScratch() async throws {
        let lists = ZoneID(zoneName: "Lists")
        let requested = Mutex<[String]>([])
        let database = ScriptedDatabase { script in
            script.databaseChanges = { request in
                if request.syncToken != nil {
                    throw CloudError.server(ServerError(.changeTokenExpired, reason: "ahead of the server's data"), httpStatus: 410)
                }
                return DatabaseChangesResponse(syncToken: "db1", moreComing: false, zones: [Zone(zoneID: self.notesOnServer, syncToken: "x")])
            }
            script.zoneChanges = { request in
                let zone = request.zones[0]
                requested.withLock { $0.append("\(zone.zoneID.zoneName):\(zone.syncToken ?? "none")") }
                guard zone.zoneID.zoneName == "Notes" else {
                    throw CloudError.server(ServerError(.zoneNotFound, reason: "no such zone"), httpStatus: 404)
                }
                return ZoneChangesResponse(zones: [
                    .value(ZoneChanges(zoneID: self.notesOnServer, syncToken: "n6", moreComing: false, records: []))
                ])
            }
        }
        let saved = SyncEngine.State.Serialization(
            userRecordName: "_u1", databaseToken: "db0",
            zoneTokens: [.init(zoneID: notes, syncToken: "n5"), .init(zoneID: lists, syncToken: "l3")])
        let device = await EngineDevice("A", database: database, state: saved)
        try await device.engine.fetchChanges()

        #expect(requested.withLock { $0 }.sorted() == ["Lists:none", "Notes:n5"])
        let listsEvents = await device.events.compactMap { event -> String? in
            switch event {
            case .willFetchRecordZoneChanges(let will) where will.zoneID == lists: "will(fromScratch: \(will.fromScratch))"
            case .didFetchRecordZoneChanges(let did) where did.zoneID == lists: "did(\(did.error?.code?.rawValue ?? "ok"))"
            default: nil
            }
        }
        #expect(listsEvents == ["will(fromScratch: true)", "did(ZONE_NOT_FOUND)"])
        #expect(await device.savedState?.zoneTokens.map(\.zoneID) == [notes], "the lost zone's token is gone")
    }

    @Test func fetch_malformedDatabaseTokenRefetchesEveryZone() async throws {
        let tokens = Mutex<[String?]>([])
        let database = ScriptedDatabase { script in
            script.databaseChanges = { request in
                tokens.withLock { $0.append(request.syncToken) }
                if request.syncToken != nil { throw CloudError.server(ServerError(.badRequest, reason: "bad token"), httpStatus: 400) }
                return DatabaseChangesResponse(syncToken: "db1", moreComing: false, zones: [])
            }
        }
        let device = await EngineDevice(
            "A", database: database, state: SyncEngine.State.Serialization(userRecordName: "_u1", databaseToken: "garbage"))
        try await device.engine.fetchChanges()
        #expect(tokens.withLock { $0 } == ["garbage", nil])
        #expect(await device.savedState?.databaseToken == "db1")
    }

    @Test func account_switchDropsTheOldUsersTokensAndPendingChanges() async throws {
        let database = ScriptedDatabase { script in
            script.databaseChanges = { _ in DatabaseChangesResponse(syncToken: "db1", moreComing: false, zones: []) }
        }
        let old = SyncEngine.State.Serialization(
            userRecordName: "_old", databaseToken: "db-old",
            pendingRecordZoneChanges: [.saveRecord(RecordID(recordName: "N1", zoneID: notes))])
        let device = await EngineDevice("A", database: database, state: old)
        try await device.engine.fetchChanges()

        let change = await device.waitForEvent { $0.name == "accountChange" }
        guard case .accountChange(let accountChange) = change else { return }
        #expect(accountChange.changeType == .switchAccounts(previousUser: "_old", currentUser: "_u1"))
        #expect(device.engine.state.pendingRecordZoneChanges.isEmpty)
        #expect(await device.savedState?.userRecordName == "_u1")
    }

    @Test func authenticationFailure_reportsSignOutAndStopsTheEngine() async throws {
        let database = ScriptedDatabase { script in
            script.databaseChanges = { _ in
                throw CloudError.server(ServerError(.authenticationFailed, reason: "bad token"), httpStatus: 401)
            }
        }
        let device = await EngineDevice("A", database: database)
        let error = await #expect(throws: SyncEngineError.self) { try await device.engine.fetchChanges() }
        #expect(error?.code == .stopped)
        let signOut = await device.waitForEvent { $0.description.hasPrefix("accountChange(signOut") }
        #expect(signOut.description == "accountChange(signOut(_u1))")
        let again = await #expect(throws: SyncEngineError.self) { try await device.engine.sendChanges() }
        #expect(again?.code == .stopped)
        #expect(again?.message.contains("create a new SyncEngine") == true)
    }

    @Test func send_savesZonesBeforeRecords() async throws {
        let calls = Mutex<[String]>([])
        let database = ScriptedDatabase { script in
            script.modifyZones = { request in
                calls.withLock { $0.append("zones") }
                return ZonesResponse(zones: request.operations.map { .value(Zone(zoneID: $0.zone.zoneID, syncToken: "t")) })
            }
            script.modifyRecords = { request in
                calls.withLock { $0.append("records") }
                return Self.acceptAll(request)
            }
        }
        let device = await EngineDevice("A", database: database)
        await device.save(note("N1"))
        device.engine.state.add(pendingDatabaseChanges: [.saveZone(notes)])
        try await device.engine.sendChanges()

        #expect(calls.withLock { $0 } == ["zones", "records"])
        #expect(device.engine.state.pendingDatabaseChanges.isEmpty)
        #expect(device.engine.state.pendingRecordZoneChanges.isEmpty)
        let names = await device.eventNames().filter { $0 != "stateUpdate" }
        #expect(names == ["accountChange", "willSendChanges", "sentDatabaseChanges", "sentRecordZoneChanges", "didSendChanges"])
        let sent = await device.waitForEvent { $0.name == "sentRecordZoneChanges" }
        guard case .sentRecordZoneChanges(let sentRecords) = sent else { return }
        #expect(sentRecords.savedRecords.map(\.recordChangeTag) == ["tag-N1"])
        #expect(
            sentRecords.stateSerialization.pendingRecordZoneChanges.isEmpty,
            "the event's state no longer holds the acknowledged change, so both persist together")
    }

    @Test func send_limitExceededSplitsTheBatchInHalvesUntilItFits() async throws {
        let sizes = Mutex<[Int]>([])
        let database = ScriptedDatabase { script in
            script.modifyRecords = { request in
                sizes.withLock { $0.append(request.operations.count) }
                if request.operations.count > 2 || request.operations.contains(where: { $0.record.recordName == "huge" }) {
                    throw CloudError.server(ServerError(.limitExceeded, reason: "body too large"), httpStatus: 413)
                }
                return Self.acceptAll(request)
            }
        }
        let device = await EngineDevice("A", database: database)
        for index in 0..<5 { await device.save(note("N\(index)")) }
        try await device.engine.sendChanges()
        #expect(sizes.withLock { $0 } == [5, 2, 3, 1, 2])
        #expect(device.engine.state.pendingRecordZoneChanges.isEmpty)

        await device.save(note("huge"))
        try await device.engine.sendChanges()
        let failed = await device.waitForEvent { event in
            if case .sentRecordZoneChanges(let sent) = event { return !sent.failedRecordSaves.isEmpty }
            return false
        }
        guard case .sentRecordZoneChanges(let sent) = failed else { return }
        #expect(sent.failedRecordSaves.map(\.error.code) == [.limitExceeded])
        #expect(device.engine.state.pendingRecordZoneChanges.isEmpty, "a record too large alone is a failed save")
    }

    @Test func send_conflictWithoutServerRecordLooksItUp() async throws {
        let database = ScriptedDatabase { script in
            script.modifyRecords = { request in
                RecordsResponse(records: request.operations.map { .error(ServerError(.conflict, recordName: $0.record.recordName)) })
            }
            script.lookupRecords = { request in
                RecordsResponse(records: request.records.map {
                    .value(Record(recordName: $0.recordName, recordType: "Note", recordChangeTag: "s9", fields: ["title": "server"]))
                })
            }
        }
        let device = await EngineDevice("A", database: database)
        await device.save(note("N1", "mine", tag: "s1"))
        try await device.engine.sendChanges()

        let event = await device.waitForEvent { $0.name == "sentRecordZoneChanges" }
        guard case .sentRecordZoneChanges(let sent) = event else { return }
        let failure = try #require(sent.failedRecordSaves.first)
        #expect(failure.error.code == .conflict)
        #expect(failure.error.serverRecord?.recordChangeTag == "s9")
        #expect(await device.record(RecordID(recordName: "N1", zoneID: notes))?.fields["title"] == "server")
    }

    /// The server takes N1, answers N2 with its own `THROTTLED` twice, and N3 with an
    /// `ATOMIC_ERROR` once (it went down with N2): the event reports N2 as retrying with the
    /// server's error, never N3 (sent again in the same send and saved). A send in which nothing
    /// was settled still reports N2, and the send that gets it through reports nothing retrying.
    @Test func send_reportsTheChangesTheServerDidNotTakeAndKeepsThemPending() async throws {
        let attempts = Mutex<[String: Int]>([:])
        let database = ScriptedDatabase { script in
            script.modifyRecords = { request in
                let accepted = Self.acceptAll(request)
                return RecordsResponse(
                    records: zip(request.operations, accepted.records).map { operation, result in
                        let name = operation.record.recordName
                        let attempt = attempts.withLock { attempts in
                            attempts[name, default: 0] += 1
                            return attempts[name]!
                        }
                        switch (name, attempt) {
                        case ("N2", 1...2): return .error(ServerError(.throttled, reason: "slow down", retryAfter: 30, recordName: name))
                        case ("N3", 1): return .error(ServerError(.atomicError, recordName: name))
                        default: return result
                        }
                    })
            }
        }
        let device = await EngineDevice("A", database: database)
        for name in ["N1", "N2", "N3"] { await device.save(note(name)) }
        func sent(from index: Int) async -> [SyncEngine.Event.SentRecordZoneChanges] {
            await device.events[index...].compactMap { event in
                if case .sentRecordZoneChanges(let sent) = event { return sent }
                return nil
            }
        }
        let n2 = RecordID(recordName: "N2", zoneID: notes)

        try await device.engine.sendChanges()
        let first = await sent(from: 0)
        #expect(first.flatMap(\.savedRecords).map(\.recordName).sorted() == ["N1", "N3"])
        #expect(first.flatMap(\.retryingRecordChanges.keys) == [n2], "N3's ATOMIC_ERROR is not reported")
        let error = try #require(first.first?.retryingRecordChanges[n2])
        #expect(error.code == .throttled && error.reason == "slow down" && error.retryAfter == 30)
        #expect(device.engine.state.pendingRecordZoneChanges == [.saveRecord(n2)], "N2 stays pending")

        var seen = await device.events.count
        try await device.engine.sendChanges()
        let second = await sent(from: seen)
        #expect(second.count == 1, "a batch in which nothing was settled is reported too")
        #expect(second.first?.savedRecords.isEmpty == true && second.first?.retryingRecordChanges.keys.first == n2)
        #expect(device.engine.state.pendingRecordZoneChanges == [.saveRecord(n2)])

        seen = await device.events.count
        try await device.engine.sendChanges()
        let third = await sent(from: seen)
        #expect(third.map { $0.savedRecords.map(\.recordName) } == [["N2"]])
        #expect(third.allSatisfy { $0.retryingRecordChanges.isEmpty })
        #expect(device.engine.state.pendingRecordZoneChanges.isEmpty)
    }

    @Test func send_keepsChangesPendingAndThrowsWhenTheRequestFails() async throws {
        let database = FaultInjectingDatabase(ScriptedDatabase { $0.modifyRecords = Self.acceptAll })
        database.inject(.networkFailure, into: .recordsModify)
        let device = await EngineDevice("A", database: database)
        await device.save(note("N1"))
        let error = await #expect(throws: CloudError.self) { try await device.engine.sendChanges() }
        #expect(error?.kind == .network)
        #expect(device.engine.state.pendingRecordZoneChanges.count == 1)
        try await device.engine.sendChanges()
        #expect(device.engine.state.pendingRecordZoneChanges.isEmpty)
    }

    @Test func automatic_honoursRetryAfterOnTheInjectedClock() async throws {
        let clock = TestClock()
        let database = FaultInjectingDatabase(ScriptedDatabase { script in
            script.databaseChanges = { _ in DatabaseChangesResponse(syncToken: "db1", moreComing: false, zones: []) }
            script.modifyRecords = Self.acceptAll
        })
        database.inject(.serverError(.throttled, retryAfter: 30), into: .recordsModify)
        let device = await EngineDevice("A", database: database, automaticallySync: true) { configuration in
            configuration.clock = clock
            configuration.listensForPush = false
            configuration.pollInterval = nil
            configuration.sendDebounce = .seconds(1)
        }
        await device.waitForEvent { $0.name == "didFetchChanges" }
        await device.save(note("N1"))

        await clock.waitForSleepers()
        #expect(clock.nextDeadline == clock.now.advanced(by: .seconds(1)), "the send waits for the debounce")
        clock.advance(by: .seconds(1))
        await clock.waitForSleepers()
        #expect(database.requestCount(.recordsModify) == 1)
        #expect(clock.nextDeadline == clock.now.advanced(by: .seconds(30)), "the 429's retryAfter")

        clock.advance(by: .seconds(29))
        #expect(clock.sleeperCount == 1)
        #expect(database.requestCount(.recordsModify) == 1)
        clock.advance(by: .seconds(1))
        await device.waitForEvent { $0.name == "sentRecordZoneChanges" }
        #expect(database.requestCount(.recordsModify) == 2)
        #expect(device.engine.state.pendingRecordZoneChanges.isEmpty)
    }

    @Test func cancelOperations_endsASendInFlightAndKeepsItsChangesPending() async throws {
        let database = FaultInjectingDatabase(ScriptedDatabase { script in
            script.modifyRecords = { _ in try await waitUntilCancelled() }
        })
        let device = await EngineDevice("A", database: database)
        await device.save(note("N1"))
        let send = Task { try await device.engine.sendChanges() }
        await database.waitForRequests(.recordsModify, count: 1)
        await device.engine.cancelOperations()
        let result = await send.result
        #expect(throws: SyncEngineError.cancelled) { try result.get() }
        #expect(device.engine.state.pendingRecordZoneChanges == [.saveRecord(RecordID(recordName: "N1", zoneID: notes))])
        // The scheduling loop's state update for the save may come before or after the send.
        #expect(await device.eventNames().filter { $0 != "stateUpdate" }.last == "didSendChanges")
    }

    @Test func cancelOperations_duringAScheduledSendRetriesAfterABackoff() async throws {
        let clock = TestClock()
        let calls = Mutex(0)
        let database = FaultInjectingDatabase(ScriptedDatabase { script in
            script.databaseChanges = { _ in DatabaseChangesResponse(syncToken: "db1", moreComing: false, zones: []) }
            script.modifyRecords = { request in
                if calls.withLock({ calls in
                    calls += 1
                    return calls
                }) == 1 {
                    try await waitUntilCancelled()
                }
                return Self.acceptAll(request)
            }
        })
        let device = await EngineDevice("A", database: database, automaticallySync: true) { configuration in
            configuration.clock = clock
            configuration.listensForPush = false
            configuration.pollInterval = nil
            configuration.jitter = { 0 }
        }
        await device.waitForEvent { $0.name == "didFetchChanges" }
        await device.save(note("N1"))
        await clock.waitForSleepers()
        clock.advance(by: .seconds(1))
        await database.waitForRequests(.recordsModify, count: 1)
        await device.engine.cancelOperations()

        await clock.waitForSleepers()
        #expect(clock.nextDeadline == clock.now.advanced(by: .milliseconds(500)), "1 s base, jitter 0: half")
        #expect(device.engine.state.pendingRecordZoneChanges.count == 1)
        clock.advance(by: .milliseconds(500))
        await device.waitForEvent { $0.name == "sentRecordZoneChanges" }
        #expect(device.engine.state.pendingRecordZoneChanges.isEmpty)
    }

    @Test func stateUpdate_followsChangesTheAppAddsWithoutSyncing() async throws {
        let device = await EngineDevice("A", database: ScriptedDatabase())
        await device.save(note("N1"))
        let update = await device.waitForEvent { $0.name == "stateUpdate" }
        guard case .stateUpdate(let stateUpdate) = update else { return }
        #expect(stateUpdate.stateSerialization.pendingRecordZoneChanges == [.saveRecord(RecordID(recordName: "N1", zoneID: notes))])
    }
}
