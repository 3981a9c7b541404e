import CloudStoreSync
import CloudStoreWire
import Foundation
import Synchronization

/// A ``CloudDatabase`` that answers with what a test scripts, for engine mechanics that need
/// exact server answers (paging shapes, token errors). Unscripted calls fail the test.
final class ScriptedDatabase: CloudDatabase {
    struct Script: Sendable {
        var caller: @Sendable () throws -> CallerResponse = { CallerResponse(userRecordName: "_u1") }
        var modifyZones: @Sendable (ZonesModifyRequest) throws -> ZonesResponse = { _ in throw unscripted("zones/modify") }
        var modifyRecords: @Sendable (RecordsModifyRequest) async throws -> RecordsResponse = { _ in throw unscripted("records/modify") }
        var lookupRecords: @Sendable (RecordsLookupRequest) throws -> RecordsResponse = { _ in throw unscripted("records/lookup") }
        var databaseChanges: @Sendable (DatabaseChangesRequest) throws -> DatabaseChangesResponse = { _ in
            throw unscripted("changes/database")
        }
        var zoneChanges: @Sendable (ZoneChangesRequest) throws -> ZoneChangesResponse = { _ in throw unscripted("changes/zone") }
    }

    let scope = DatabaseScope.private
    private let script: Mutex<Script>

    init(_ configure: (inout Script) -> Void = { _ in }) {
        var script = Script()
        configure(&script)
        self.script = Mutex(script)
    }

    func update(_ configure: (inout Script) -> Void) {
        script.withLock { configure(&$0) }
    }

    private var current: Script { script.withLock { $0 } }

    func modifyZones(_ request: ZonesModifyRequest) async throws -> ZonesResponse { try current.modifyZones(request) }
    func listZones() async throws -> ZonesResponse { throw unscripted("zones/list") }
    func lookupZones(_ request: ZonesLookupRequest) async throws -> ZonesResponse { throw unscripted("zones/lookup") }
    func modifyRecords(_ request: RecordsModifyRequest) async throws -> RecordsResponse {
        try await current.modifyRecords(request)
    }
    func lookupRecords(_ request: RecordsLookupRequest) async throws -> RecordsResponse { try current.lookupRecords(request) }
    func queryRecords(_ request: RecordsQueryRequest) async throws -> RecordsQueryResponse { throw unscripted("records/query") }
    func fetchDatabaseChanges(_ request: DatabaseChangesRequest) async throws -> DatabaseChangesResponse {
        try current.databaseChanges(request)
    }
    func fetchZoneChanges(_ request: ZoneChangesRequest) async throws -> ZoneChangesResponse {
        try current.zoneChanges(request)
    }
    func waitForChanges(since syncToken: String?, timeout: Duration) async throws -> NotificationsResponse {
        throw unscripted("notifications")
    }
    func caller() async throws -> CallerResponse { try current.caller() }
    func modifySchema(_ schema: CloudSchema) async throws -> CloudSchema { throw unscripted("schema/modify") }
    func fetchSchema() async throws -> CloudSchema { throw unscripted("schema") }
    func acceptShares(_ request: ShareAcceptRequest) async throws -> ShareAcceptResponse { throw unscripted("records/accept") }
    func resolveShares(_ request: ShareAcceptRequest) async throws -> ShareAcceptResponse { throw unscripted("records/resolve") }
    func requestAssetUploads(_ request: AssetUploadRequest) async throws -> AssetUploadResponse {
        throw unscripted("assets/upload")
    }
    func uploadAsset(from file: URL, to url: String) async throws -> AssetUploadResult { throw unscripted("asset upload") }
    func downloadAsset(from url: String, to file: URL, resumingAt offset: Int64) async throws {
        throw unscripted("asset download")
    }
}

private func unscripted(_ operation: String) -> CloudError {
    CloudError(.invalidResponse, message: "the test did not script \(operation)")
}

/// Waits until the task is cancelled, then throws as a cancelled HTTP request does.
func waitUntilCancelled() async throws -> Never {
    let never = Mutex<CheckedContinuation<Void, Never>?>(nil)
    await withTaskCancellationHandler {
        await withCheckedContinuation { continuation in
            never.withLock { $0 = continuation }
            if Task.isCancelled { never.withLock { $0.take() }?.resume() }
        }
    } onCancel: {
        never.withLock { $0.take() }?.resume()
    }
    throw CloudError(.cancelled, message: "the request was cancelled")
}
