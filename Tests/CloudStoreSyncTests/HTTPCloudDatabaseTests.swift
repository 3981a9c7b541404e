import CloudStoreSync
import CloudStoreTesting
import CloudStoreWire
import Foundation
import Logging
import NIOHTTP1
import Testing

/// The HTTP transport against a real server on a loopback port.
@Suite(.timeLimit(.minutes(ReliabilityRun.hangLimitMinutes))) struct HTTPCloudDatabaseTests {
    let notes = ZoneID(zoneName: "Notes")

    @Test func records_carryTheDeviceHeaderAsTheirModifiedDevice() async throws {
        try await TestServer.with { server in
            let database = server.database(device: "ipad-7")
            _ = try await database.modifyZones(ZonesModifyRequest(operations: [.init(.create, notes)]))
            let response = try await database.modifyRecords(
                RecordsModifyRequest(
                    zoneID: notes,
                    operations: [.init(.create, Record(recordType: "Note", recordID: RecordID(recordName: "N1", zoneID: notes)))]))
            let saved = try #require(response.records.first?.value)
            #expect(saved.modified?.deviceID == "ipad-7")
            #expect(saved.recordChangeTag != nil)
            #expect(try await database.caller().userRecordName == "_alice")
        }
    }

    /// A request that only reads whose connection closes before the answer (a pooled connection a
    /// proxy or a restarted server was closing) goes once more: it changes nothing. A GET, and a
    /// POST that fetches changes.
    @Test(arguments: [DatabaseOperation.usersCaller, .changesDatabase])
    func aReadWhoseConnectionClosesBeforeTheAnswer_isSentOnceMore(_ operation: DatabaseOperation) async throws {
        try await TestServer.with { server in
            let serverURL = server.baseURL
            let proxy = try await FaultProxy.start { serverURL }
            let database = HTTPCloudDatabase(
                baseURL: proxy.baseURL, container: TestDevice.containerIdentifier, token: "alice-token", deviceID: "A")
            proxy.inject(.dropResponse, into: operation)
            let answered: Bool
            switch operation {
            case .usersCaller: answered = (try? await database.caller())?.userRecordName == "_alice"
            default: answered = (try? await database.fetchDatabaseChanges(DatabaseChangesRequest())) != nil
            }
            await proxy.shutdown()
            #expect(answered)
        }
    }

    /// Only requests that change nothing go twice: a save whose answer was lost is the sync
    /// engine's to send again (it knows what the save carried), not the transport's.
    @Test func onlyRequestsThatOnlyRead_areSentAgain() {
        let route = DatabaseRoute(container: "iCloud.example", environment: .development)
        #expect(HTTPCloudDatabase.onlyReads(.POST, route.path(.private, .changesZone)))
        #expect(HTTPCloudDatabase.onlyReads(.POST, route.path(.private, .recordsLookup)))
        #expect(HTTPCloudDatabase.onlyReads(.POST, route.path(.private, .zonesChanges)))
        #expect(HTTPCloudDatabase.onlyReads(.GET, "/anything"))
        #expect(!HTTPCloudDatabase.onlyReads(.POST, route.path(.private, .recordsModify)))
        #expect(!HTTPCloudDatabase.onlyReads(.POST, route.path(.public, .recordsAccept)))
        #expect(!HTTPCloudDatabase.onlyReads(.POST, route.assetUploadPath(.private, uploadID: "u1")))
        #expect(!HTTPCloudDatabase.onlyReads(.POST, route.schemaModifyPath))
    }

    @Test func atomicFailure_comesBackAsPerRecordResultsNotAsAThrow() async throws {
        try await TestServer.with { server in
            let database = server.database(device: "A")
            _ = try await database.modifyZones(ZonesModifyRequest(operations: [.init(.create, notes)]))
            let stale = Record(
                recordName: "N2", recordType: "Note", recordChangeTag: "no-such-tag", zoneID: notes, fields: ["t": "x"])
            let response = try await database.modifyRecords(
                RecordsModifyRequest(
                    zoneID: notes, atomic: true,
                    operations: [
                        .init(.create, Record(recordType: "Note", recordID: RecordID(recordName: "N1", zoneID: notes))),
                        .init(.update, stale),
                    ]))
            #expect(response.records.compactMap(\.error?.code) == [.atomicError, .notFound])
        }
    }

    @Test func serverErrors_throwWithTheirCodeAndStatus() async throws {
        try await TestServer.with { server in
            let stranger = HTTPCloudDatabase(
                baseURL: server.baseURL, container: SyncEngineMultiDeviceTests.container, token: "nobody", deviceID: "A")
            let error = await #expect(throws: CloudError.self) { try await stranger.listZones() }
            #expect(error?.code == .authenticationFailed)
            #expect(error?.httpStatus == 401)
            #expect(error?.description.contains("nobody") == false, "the token never appears in errors")

            let missing = await #expect(throws: CloudError.self) {
                try await server.database(device: "A").lookupRecords(
                    RecordsLookupRequest(zoneID: ZoneID(zoneName: "Nowhere"), recordNames: ["x"]))
            }
            #expect(missing?.code == .zoneNotFound)
        }
    }

    @Test func refusedConnection_isANetworkError() async throws {
        let server = try await TestServer.start()
        let baseURL = server.baseURL
        try await server.shutdown()
        let database = HTTPCloudDatabase(
            baseURL: baseURL, container: "iCloud.test", token: "alice-token", deviceID: "A", requestTimeout: .seconds(1))
        let error = await #expect(throws: CloudError.self) { try await database.listZones() }
        #expect(error?.kind == .network)
        #expect(error?.isTransient == true)
    }

    @Test func longPoll_answersWhenAnotherDeviceWrites() async throws {
        try await TestServer.with { server in
            let writer = server.database(device: "A")
            let listener = server.database(device: "B")
            let start = try await listener.fetchDatabaseChanges(DatabaseChangesRequest())
            let poll = Task { try await listener.waitForChanges(since: start.syncToken, timeout: .seconds(30)) }
            _ = try await writer.modifyZones(ZonesModifyRequest(operations: [.init(.create, notes)]))
            let answer = try await poll.value
            #expect(answer.changed)
            #expect(answer.syncToken != start.syncToken)
        }
    }

    @Test func logs_nameEveryRequestAndNeverTheToken() async throws {
        let recorder = LogRecorder()
        try await TestServer.with { server in
            let logger = recorder.logger(label: "test.http", level: .trace)
            let database = HTTPCloudDatabase(
                baseURL: server.baseURL, container: SyncEngineMultiDeviceTests.container, token: "alice-token",
                deviceID: "A", logger: logger)
            _ = try await database.modifyZones(ZonesModifyRequest(operations: [.init(.create, notes)]))
            _ = try await database.listZones()
        }
        let logged = recorder.messages
        #expect(logged.contains { $0.hasPrefix("info HTTP request") && $0.contains("zones/modify") && $0.contains("status=200") })
        #expect(logged.contains { $0.hasPrefix("trace Request body") })
        #expect(!logged.contains { $0.contains("alice-token") })
    }
}
