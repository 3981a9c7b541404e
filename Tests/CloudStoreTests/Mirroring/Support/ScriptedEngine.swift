@testable import CloudStore
@testable import CloudStoreSync
import CloudStoreTesting
import Foundation
import Synchronization
import Testing

/// A sync engine a test scripts (``MirrorEngine``): it sends and fetches nothing by itself, records
/// what the mirror asks of it, and keeps a real ``SyncEngine/State`` where the mirror announces its
/// uploads. The test hands the mirror the engine's events and questions itself
/// (``CloudMirror/handle(_:from:)``, ``CloudMirror/nextBatch(_:for:)``), one by one.
final class ScriptedEngine: MirrorEngine {
    let database: any CloudDatabase
    let state: SyncEngine.State
    private let calls = Mutex<[String]>([])

    init(_ configuration: SyncEngine.Configuration) {
        database = configuration.database
        state = SyncEngine.State(configuration.stateSerialization)
    }

    /// What the mirror asked of the engine, in order: `send`, `fetch`, `cancel`.
    var requests: [String] { calls.withLock { $0 } }

    func sendChanges(_ options: SyncEngine.SendChangesOptions) async throws { calls.withLock { $0.append("send") } }
    func fetchChanges(_ options: SyncEngine.FetchChangesOptions) async throws { calls.withLock { $0.append("fetch") } }
    func cancelOperations() async { calls.withLock { $0.append("cancel") } }
}

/// A database no request reaches (the scripted engine makes none), but the schema the mirror
/// declares its uniqueness constraints in before its first batch.
final class OfflineDatabase: CloudDatabase {
    let scope: DatabaseScope
    private let schema = Mutex(CloudSchema(recordTypes: [], version: 0))

    init(_ scope: DatabaseScope) { self.scope = scope }

    private func unreachable<T>() throws -> T { throw CloudError(.network, message: "a mirror unit test reaches no server") }

    func fetchSchema() async throws -> CloudSchema { schema.withLock { $0 } }
    func modifySchema(_ schema: CloudSchema) async throws -> CloudSchema {
        self.schema.withLock { $0 = schema }
        return schema
    }
    func modifyZones(_ request: ZonesModifyRequest) async throws -> ZonesResponse { try unreachable() }
    func listZones() async throws -> ZonesResponse { try unreachable() }
    func lookupZones(_ request: ZonesLookupRequest) async throws -> ZonesResponse { try unreachable() }
    func modifyRecords(_ request: RecordsModifyRequest) async throws -> RecordsResponse { try unreachable() }
    func lookupRecords(_ request: RecordsLookupRequest) async throws -> RecordsResponse { try unreachable() }
    func queryRecords(_ request: RecordsQueryRequest) async throws -> RecordsQueryResponse { try unreachable() }
    func fetchDatabaseChanges(_ request: DatabaseChangesRequest) async throws -> DatabaseChangesResponse { try unreachable() }
    func fetchZoneChanges(_ request: ZoneChangesRequest) async throws -> ZoneChangesResponse { try unreachable() }
    func waitForChanges(since syncToken: String?, timeout: Duration) async throws -> NotificationsResponse { try unreachable() }
    func caller() async throws -> CallerResponse { try unreachable() }
    func acceptShares(_ request: ShareAcceptRequest) async throws -> ShareAcceptResponse { try unreachable() }
    func resolveShares(_ request: ShareAcceptRequest) async throws -> ShareAcceptResponse { try unreachable() }
    func modifySubscriptions(_ request: SubscriptionsModifyRequest) async throws -> SubscriptionsResponse { try unreachable() }
    func requestAssetUploads(_ request: AssetUploadRequest) async throws -> AssetUploadResponse { try unreachable() }
    func uploadAsset(from file: URL, to url: String) async throws -> AssetUploadResult { try unreachable() }
    func downloadAsset(from url: String, to file: URL, resumingAt offset: Int64) async throws {
        throw CloudError(.network, message: "a mirror unit test reaches no server")
    }
}

/// A mirror on a real store file with scripted engines for the private and shared databases: the
/// test plays the engines, event by event, and reads what the mirror kept, asked and announced.
struct MirrorHarness {
    static let zoneID = ZoneID(zoneName: "Notes")

    let directory: TemporaryDirectory
    let store: PersistentStore
    let mirror: CloudMirror
    /// The app's events, as the container's subscribers get them.
    let events: AsyncStream<PersistentCloudContainer.Event>

    static func make(
        schema: Schema? = nil, deviceID: String = "A", directory: TemporaryDirectory? = nil,
        configure: (inout PersistentCloudContainer.Options) -> Void = { _ in }
    ) async throws -> MirrorHarness {
        let directory = try directory ?? TemporaryDirectory()
        let schema = try schema ?? Schema.notes()
        let store = try openStore(directory.file("A.sqlite"), schema)
        try MirrorTables.migrate(store)
        var options = PersistentCloudContainer.Options()
        options.automaticallySync = false
        configure(&options)
        let hub = EventHub()
        let events = hub.subscribe()
        let setup = MirrorSetup(
            schema: schema, zoneID: zoneID, publicEntities: .none, policy: options.conflictPolicy, deviceID: deviceID, logger: .quiet)
        let mirror = CloudMirror(
            store: store, setup: setup, options: options, events: hub,
            databases: [.private: OfflineDatabase(.private), .shared: OfflineDatabase(.shared)], makeEngine: { ScriptedEngine($0) })
        try await mirror.start()
        return MirrorHarness(directory: directory, store: store, mirror: mirror, events: events)
    }

    /// The scripted engine of a database.
    func engine(_ scope: DatabaseScope = .private) async throws -> ScriptedEngine {
        try #require(await mirror.engines[scope]?.engine as? ScriptedEngine)
    }

    /// Hands events to the mirror as the engine of `scope` delivers them, in one call.
    func deliver(_ events: SyncEngine.Event..., from scope: DatabaseScope = .private) async throws {
        await mirror.handle(events, from: try await engine(scope))
    }

    /// Asks the mirror for the next batch as the engine of `scope` does.
    func nextBatch(
        from scope: DatabaseScope = .private, limit: Int = 400, skipping: Set<RecordID> = []
    ) async throws -> SyncEngine.RecordZoneChangeBatch? {
        var context = SyncEngine.SendChangesContext(reason: .scheduled, options: SyncEngine.SendChangesOptions())
        context.limits = SyncEngine.BatchLimits(maxCount: limit, maxBytes: SyncEngine.Configuration.defaultMaxBatchBytes, excludedRecordIDs: skipping)
        return await mirror.nextBatch(context, for: try await engine(scope))
    }

    /// Saves in a unit of work of the app.
    func write(_ block: @escaping @Sendable (WriteContext) throws -> Void) async throws {
        try await store.write(author: "app", block)
    }

    /// Reads the ledger.
    func ledger<T: Sendable>(_ body: @escaping @Sendable (Ledger) throws -> T) async throws -> T {
        try await store.read { try body(Ledger($0.db)) }
    }

    /// The units of work the store committed so far.
    var writes: Int { store.committedUnitsOfWork.load(ordering: .relaxed) }

    func close() async {
        await mirror.stop()
        try? store.close()
    }
}
