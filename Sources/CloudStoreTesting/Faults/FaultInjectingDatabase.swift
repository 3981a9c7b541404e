import Foundation
import CloudStoreSync
import CloudStoreWire
import Synchronization

/// Wraps a `CloudDatabase` and makes chosen requests fail the way real networks and servers do,
/// so sync code can be tested against the failures it must survive.
///
/// ```swift
/// let database = FaultInjectingDatabase(HTTPCloudDatabase(...))
/// database.inject(.serverError(.throttled, retryAfter: 30), into: .recordsModify)
/// database.inject(.responseLost, into: .recordsModify)      // applied on the server, answer lost
/// database.inject(.networkFailure, times: 3)               // the next three requests of any kind
/// database.inject(.recordError(.quotaExceeded), into: .recordsModify)  // each record of it fails
/// database.stripsServerRecordFromConflicts = true          // behave like real CloudKit
/// #expect(database.requestCount(.recordsModify) == 2)
/// ```
///
/// Faults are used in the order they were injected, each for its number of `times`.
public final class FaultInjectingDatabase: CloudDatabase {
    public enum Fault: Sendable, Hashable {
        /// The connection fails before the request reaches the server.
        case networkFailure
        /// No answer within the timeout; the request does not reach the server.
        case timeout
        /// The server answers with this error instead of performing the request.
        case serverError(ServerErrorCode, retryAfter: Double? = nil)
        /// The server performs the request, then the connection drops before the answer arrives.
        case responseLost
        /// The server answers a `records/modify` without performing it, with this error for each
        /// of its records (a per-record `THROTTLED` or `QUOTA_EXCEEDED`, say); any other request
        /// fails with it as a whole, as ``serverError(_:retryAfter:)`` does.
        case recordError(ServerErrorCode, retryAfter: Double? = nil)
    }

    private struct Rule {
        var fault: Fault
        var operation: DatabaseOperation?
        var remaining: Int
    }

    private struct Storage {
        var rules: [Rule] = []
        var log: [DatabaseOperation] = []
        var fetchedRecordNames: [String] = []
        var stripsServerRecord = false
        var failingDownloads = 0
        var downloads = 0
        var waiters: [(operation: DatabaseOperation, count: Int, continuation: CheckedContinuation<Void, Never>)] = []
        var observer: (@Sendable (DatabaseOperation) -> Void)?

        mutating func record(_ operation: DatabaseOperation) -> [CheckedContinuation<Void, Never>] {
            log.append(operation)
            let ready = waiters.filter { waiter in log.count(where: { $0 == waiter.operation }) >= waiter.count }
            waiters.removeAll { waiter in log.count(where: { $0 == waiter.operation }) >= waiter.count }
            return ready.map(\.continuation)
        }
    }

    /// Where a test finds the database a container's engine was configured with: the engine is
    /// made inside the container, so the test hands ``configureEngine`` to its options.
    ///
    /// ```swift
    /// let faults = FaultInjectingDatabase.Box()
    /// options.configureEngine = faults.configureEngine
    /// // … once the container has started:
    /// faults.database?.inject(.recordError(.throttled, retryAfter: 30), into: .recordsModify)
    /// ```
    public final class Box: Sendable {
        private let storage = Mutex<FaultInjectingDatabase?>(nil)

        public init() {}

        /// The database the private database's engine was configured with; nil until then.
        public var database: FaultInjectingDatabase? {
            get { storage.withLock { $0 } }
            set { storage.withLock { $0 = newValue } }
        }

        /// Makes the engine of the private database go through a new `FaultInjectingDatabase`,
        /// kept in ``database`` (the shared database's engine is left as it is).
        public var configureEngine: @Sendable (inout SyncEngine.Configuration) -> Void {
            { [self] configuration in
                guard configuration.database.scope == .private else { return }
                let database = FaultInjectingDatabase(configuration.database)
                self.database = database
                configuration.database = database
            }
        }
    }

    public let base: any CloudDatabase
    private let storage = Mutex(Storage())

    public init(_ base: any CloudDatabase) {
        self.base = base
    }

    public var scope: DatabaseScope { base.scope }

    /// Makes the next `times` requests of `operation` (of any operation when nil) fail with `fault`.
    public func inject(_ fault: Fault, into operation: DatabaseOperation? = nil, times: Int = 1) {
        storage.withLock { $0.rules.append(Rule(fault: fault, operation: operation, remaining: times)) }
    }

    /// Drops every fault not used yet.
    public func removeFaults() {
        storage.withLock {
            $0.rules.removeAll()
            $0.failingDownloads = 0
        }
    }

    /// Makes the next `times` asset downloads fail with a network error (a download goes to the
    /// asset's URL, not to an operation of the database).
    public func failAssetDownloads(times: Int = 1) {
        storage.withLock { $0.failingDownloads += times }
    }

    /// How many asset downloads were started, failed ones included.
    public var assetDownloadCount: Int { storage.withLock { $0.downloads } }

    /// When true, `CONFLICT` and `EXISTS` results lose their `serverRecord`, as real CloudKit sends none.
    public var stripsServerRecordFromConflicts: Bool {
        get { storage.withLock { $0.stripsServerRecord } }
        set { storage.withLock { $0.stripsServerRecord = newValue } }
    }

    /// Calls `observer` as each request starts, before it is sent (schema requests excepted),
    /// from the task that makes it: what the sync engine had done by then.
    ///
    /// ```swift
    /// database.observeRequests { operation in
    ///     if operation == .recordsModify { callsBeforeUpload.withLock { $0 = engine.delegateCalls.value } }
    /// }
    /// ```
    public func observeRequests(_ observer: @escaping @Sendable (DatabaseOperation) -> Void) {
        storage.withLock { $0.observer = observer }
    }

    /// Every request made through this database, in order (schema requests excepted).
    public var requests: [DatabaseOperation] { storage.withLock { $0.log } }

    public func requestCount(_ operation: DatabaseOperation) -> Int {
        storage.withLock { $0.log.count(where: { $0 == operation }) }
    }

    /// Returns once `count` requests of `operation` were started; no real time passes.
    public func waitForRequests(_ operation: DatabaseOperation, count: Int) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = storage.withLock { storage -> Bool in
                if storage.log.count(where: { $0 == operation }) >= count { return true }
                storage.waiters.append((operation, count, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    // MARK: CloudDatabase

    public func modifyZones(_ request: ZonesModifyRequest) async throws -> ZonesResponse {
        try await perform(.zonesModify) { try await base.modifyZones(request) }
    }

    public func listZones() async throws -> ZonesResponse {
        try await perform(.zonesList) { try await base.listZones() }
    }

    public func lookupZones(_ request: ZonesLookupRequest) async throws -> ZonesResponse {
        try await perform(.zonesLookup) { try await base.lookupZones(request) }
    }

    public func modifyRecords(_ request: RecordsModifyRequest) async throws -> RecordsResponse {
        let recordErrors = { (error: ServerError) in
            RecordsResponse(
                records: request.operations.map { operation in
                    var recordError = error
                    recordError.recordName = operation.record.recordName
                    return .error(recordError)
                })
        }
        var response = try await perform(.recordsModify, answering: recordErrors) { try await base.modifyRecords(request) }
        if stripsServerRecordFromConflicts {
            response.records = response.records.map { result in
                guard case .error(var error) = result, error.code == .conflict || error.code == .exists else { return result }
                error.serverRecord = nil
                return .error(error)
            }
        }
        return response
    }

    public func lookupRecords(_ request: RecordsLookupRequest) async throws -> RecordsResponse {
        try await perform(.recordsLookup) { try await base.lookupRecords(request) }
    }

    public func queryRecords(_ request: RecordsQueryRequest) async throws -> RecordsQueryResponse {
        try await perform(.recordsQuery) { try await base.queryRecords(request) }
    }

    public func fetchDatabaseChanges(_ request: DatabaseChangesRequest) async throws -> DatabaseChangesResponse {
        try await perform(.changesDatabase) { try await base.fetchDatabaseChanges(request) }
    }

    public func fetchZoneChanges(_ request: ZoneChangesRequest) async throws -> ZoneChangesResponse {
        let response = try await perform(.changesZone) { try await base.fetchZoneChanges(request) }
        let names = response.zones.flatMap { result -> [String] in
            guard case .value(let page) = result else { return [] }
            return page.records.map(\.recordName)
        }
        storage.withLock { $0.fetchedRecordNames += names }
        return response
    }

    /// The names of every record and tombstone `changes/zone` answers brought, in order.
    public var fetchedRecordNames: [String] { storage.withLock { $0.fetchedRecordNames } }

    public func waitForChanges(since syncToken: String?, timeout: Duration) async throws -> NotificationsResponse {
        try await perform(.notifications) { try await base.waitForChanges(since: syncToken, timeout: timeout) }
    }

    public func waitForChanges(since syncToken: String?, zoneTokens: [String], timeout: Duration) async throws
        -> NotificationsResponse
    {
        try await perform(.notifications) {
            try await base.waitForChanges(since: syncToken, zoneTokens: zoneTokens, timeout: timeout)
        }
    }

    public func caller() async throws -> CallerResponse {
        try await perform(.usersCaller) { try await base.caller() }
    }

    public func modifySchema(_ schema: CloudSchema) async throws -> CloudSchema {
        try await base.modifySchema(schema)
    }

    public func fetchSchema() async throws -> CloudSchema {
        try await base.fetchSchema()
    }

    public func acceptShares(_ request: ShareAcceptRequest) async throws -> ShareAcceptResponse {
        try await perform(.recordsAccept) { try await base.acceptShares(request) }
    }

    public func resolveShares(_ request: ShareAcceptRequest) async throws -> ShareAcceptResponse {
        try await perform(.recordsResolve) { try await base.resolveShares(request) }
    }

    public func modifySubscriptions(_ request: SubscriptionsModifyRequest) async throws -> SubscriptionsResponse {
        try await perform(.subscriptionsModify) { try await base.modifySubscriptions(request) }
    }

    public func requestAssetUploads(_ request: AssetUploadRequest) async throws -> AssetUploadResponse {
        try await perform(.assetsUpload) { try await base.requestAssetUploads(request) }
    }

    public func uploadAsset(from file: URL, to url: String) async throws -> AssetUploadResult {
        try await base.uploadAsset(from: file, to: url)
    }

    public func downloadAsset(from url: String, to file: URL, resumingAt offset: Int64) async throws {
        let fails = storage.withLock { storage in
            storage.downloads += 1
            guard storage.failingDownloads > 0 else { return false }
            storage.failingDownloads -= 1
            return true
        }
        if fails { throw CloudError(.network, message: "injected network failure before an asset download") }
        try await base.downloadAsset(from: url, to: file, resumingAt: offset)
    }

    // MARK: Faults

    /// Performs a request, or fails it with the next fault injected for `operation`. `recordErrors`
    /// answers a ``Fault/recordError(_:retryAfter:)`` with that error for each record.
    private func perform<Response>(
        _ operation: DatabaseOperation, answering recordErrors: ((ServerError) -> Response)? = nil,
        _ request: () async throws -> Response
    ) async throws -> Response {
        let (fault, waiters, observer) = storage.withLock { storage -> (Fault?, [CheckedContinuation<Void, Never>], (@Sendable (DatabaseOperation) -> Void)?) in
            let waiters = storage.record(operation)
            guard let index = storage.rules.firstIndex(where: { $0.operation == nil || $0.operation == operation })
            else { return (nil, waiters, storage.observer) }
            let fault = storage.rules[index].fault
            storage.rules[index].remaining -= 1
            if storage.rules[index].remaining <= 0 { storage.rules.remove(at: index) }
            return (fault, waiters, storage.observer)
        }
        observer?(operation)
        for waiter in waiters { waiter.resume() }
        switch fault {
        case nil:
            return try await request()
        case .networkFailure?:
            throw CloudError(.network, message: "injected network failure before \(operation.rawValue)")
        case .timeout?:
            throw CloudError(.timeout, message: "injected timeout of \(operation.rawValue)")
        case .serverError(let code, let retryAfter)?:
            throw CloudError.server(
                ServerError(code, reason: "injected \(code) for \(operation.rawValue)", retryAfter: retryAfter),
                httpStatus: code.httpStatus)
        case .responseLost?:
            _ = try await request()
            throw CloudError(.network, message: "injected connection drop after \(operation.rawValue) reached the server")
        case .recordError(let code, let retryAfter)?:
            let error = ServerError(code, reason: "injected \(code) for each record of \(operation.rawValue)", retryAfter: retryAfter)
            guard let recordErrors else { throw CloudError.server(error, httpStatus: code.httpStatus) }
            return recordErrors(error)
        }
    }
}
