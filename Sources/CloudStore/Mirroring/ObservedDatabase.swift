import CloudStoreSync
import Foundation

/// A database that tells mirroring about every request that failed, so the container's status
/// and events can say why sync is not moving (throttling, a refused token, no network) instead of
/// leaving it to a log.
struct ObservedDatabase: EncodedRecordsModifying {
    let base: any CloudDatabase
    let failed: @Sendable (CloudError) -> Void

    var scope: DatabaseScope { base.scope }

    private func observe<T>(_ request: () async throws -> T) async throws -> T {
        do {
            return try await request()
        } catch let error as CloudError {
            if error.kind != .cancelled { failed(error) }
            throw error
        }
    }

    func modifyZones(_ request: ZonesModifyRequest) async throws -> ZonesResponse {
        try await observe { try await base.modifyZones(request) }
    }
    func listZones() async throws -> ZonesResponse { try await observe { try await base.listZones() } }
    func lookupZones(_ request: ZonesLookupRequest) async throws -> ZonesResponse {
        try await observe { try await base.lookupZones(request) }
    }
    func modifyRecords(_ request: RecordsModifyRequest) async throws -> RecordsResponse {
        try await observe { try await base.modifyRecords(request) }
    }
    func modifyRecords(_ request: RecordsModifyRequest, encoded body: Data) async throws -> RecordsResponse {
        try await observe { try await base.modifyRecords(request, encodedAs: body) }
    }
    func lookupRecords(_ request: RecordsLookupRequest) async throws -> RecordsResponse {
        try await observe { try await base.lookupRecords(request) }
    }
    func queryRecords(_ request: RecordsQueryRequest) async throws -> RecordsQueryResponse {
        try await observe { try await base.queryRecords(request) }
    }
    func fetchDatabaseChanges(_ request: DatabaseChangesRequest) async throws -> DatabaseChangesResponse {
        try await observe { try await base.fetchDatabaseChanges(request) }
    }
    func fetchZoneChanges(_ request: ZoneChangesRequest) async throws -> ZoneChangesResponse {
        try await observe { try await base.fetchZoneChanges(request) }
    }
    func waitForChanges(since syncToken: String?, timeout: Duration) async throws -> NotificationsResponse {
        // A failed long poll is routine (push is a hint); it is not a sync failure.
        try await base.waitForChanges(since: syncToken, timeout: timeout)
    }
    func caller() async throws -> CallerResponse { try await observe { try await base.caller() } }
    func modifySchema(_ schema: CloudSchema) async throws -> CloudSchema {
        try await observe { try await base.modifySchema(schema) }
    }
    func fetchSchema() async throws -> CloudSchema { try await observe { try await base.fetchSchema() } }
    func acceptShares(_ request: ShareAcceptRequest) async throws -> ShareAcceptResponse {
        try await observe { try await base.acceptShares(request) }
    }
    func resolveShares(_ request: ShareAcceptRequest) async throws -> ShareAcceptResponse {
        try await observe { try await base.resolveShares(request) }
    }
    func modifySubscriptions(_ request: SubscriptionsModifyRequest) async throws -> SubscriptionsResponse {
        try await observe { try await base.modifySubscriptions(request) }
    }
    func requestAssetUploads(_ request: AssetUploadRequest) async throws -> AssetUploadResponse {
        try await observe { try await base.requestAssetUploads(request) }
    }
    func uploadAsset(from file: URL, to url: String) async throws -> AssetUploadResult {
        try await observe { try await base.uploadAsset(from: file, to: url) }
    }
    func downloadAsset(from url: String, to file: URL, resumingAt offset: Int64) async throws {
        try await observe { try await base.downloadAsset(from: url, to: file, resumingAt: offset) }
    }
}
