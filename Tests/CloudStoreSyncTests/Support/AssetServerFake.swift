import CloudStoreSync
import CloudStoreWire
import Foundation
import Synchronization

/// A ``CloudDatabase`` that keeps one user's records and asset bytes in memory and enforces the
/// rules of WireProtocol.md §7, for the engine's asset transfers:
///
/// - upload URLs are bound to a zone, record and field; an upload answers a receipt for its bytes;
/// - a saved asset needs a receipt issued for that zone, record and field, with its checksum and
///   size, or, without one, the stored field must already hold that checksum (an unchanged asset);
/// - assets are read with a `downloadURL`, served from an offset (`Range`).
///
/// Requests travel through JSON, so what the engine keeps client-side (`fileURL`) never arrives.
/// Faults are queued: transient failures of each step, a download cut after some bytes or with a
/// byte flipped, and an asset size limit (413 `LIMIT_EXCEEDED`).
final class AssetServerFake: CloudDatabase {
    enum DownloadFault: Sendable {
        /// Writes this many bytes, then the connection drops.
        case cut(after: Int)
        /// Serves the bytes with one of them changed.
        case corrupt
    }

    private struct Binding: Hashable {
        var zoneName: String
        var recordName: String
        var fieldName: String
    }

    private struct Receipt {
        var binding: Binding
        var fileChecksum: String
        var size: Int64
    }

    private struct Storage {
        var records: [String: [String: Record]] = [:]
        var versions: [String: [String: Int]] = [:]
        var version = 0
        var bytes: [String: Data] = [:]
        var uploadURLs: [String: Binding] = [:]
        var receipts: [String: Receipt] = [:]
        var uploadCount = 0
        var tokenRequests: [AssetUploadRequest] = []
        var downloads: [(url: String, offset: Int64)] = []
        var savedFields: [[String: FieldValue]] = []
        var uploadRequestFaults: [CloudError] = []
        var uploadFaults: [CloudError] = []
        var downloadFaults: [DownloadFault] = []
    }

    let scope = DatabaseScope.private
    /// The largest asset an upload accepts.
    let maxAssetSize: Int64
    private let storage = Mutex(Storage())

    init(maxAssetSize: Int64 = 1 << 20) {
        self.maxAssetSize = maxAssetSize
    }

    // MARK: Test controls

    /// Assets uploaded so far.
    var uploadCount: Int { storage.withLock { $0.uploadCount } }
    /// `assets/upload` requests so far.
    var tokenRequests: [AssetUploadRequest] { storage.withLock { $0.tokenRequests } }
    /// Each download asked: its URL and the offset it resumed at.
    var downloads: [(url: String, offset: Int64)] { storage.withLock { $0.downloads } }
    /// The fields of each record saved, as they arrived.
    var savedFields: [[String: FieldValue]] { storage.withLock { $0.savedFields } }

    func record(_ name: String, in zoneName: String) -> Record? {
        storage.withLock { $0.records[zoneName]?[name] }.map(Self.readable)
    }

    /// Makes the next `assets/upload` request fail as a whole.
    func failNextUploadRequest(with error: CloudError) { storage.withLock { $0.uploadRequestFaults.append(error) } }
    /// Makes the next upload fail as a whole.
    func failNextUpload(with error: CloudError) { storage.withLock { $0.uploadFaults.append(error) } }
    func failNextDownload(_ fault: DownloadFault) { storage.withLock { $0.downloadFaults.append(fault) } }

    /// Stores a record as another device would have saved it, its assets' bytes included.
    func store(_ record: Record, in zoneName: String, assetBytes: [Data]) {
        storage.withLock { storage in
            for data in assetBytes {
                var checksum = AssetChecksum()
                checksum.update(data)
                storage.bytes[checksum.base64] = data
            }
            var record = record
            record.mapFields { $0.map { Asset(fileChecksum: $0.fileChecksum, size: $0.size) } }
            Self.put(record, in: zoneName, &storage)
        }
    }

    // MARK: Assets

    func requestAssetUploads(_ request: AssetUploadRequest) async throws -> AssetUploadResponse {
        try storage.withLock { storage in
            storage.tokenRequests.append(request)
            if !storage.uploadRequestFaults.isEmpty { throw storage.uploadRequestFaults.removeFirst() }
            return AssetUploadResponse(
                tokens: request.tokens.map { token in
                    let url = "/upload/\(storage.uploadURLs.count + 1)"
                    storage.uploadURLs[url] = Binding(
                        zoneName: request.zoneID.zoneName, recordName: token.recordName, fieldName: token.fieldName)
                    return AssetUploadResponse.Token(recordName: token.recordName, fieldName: token.fieldName, url: url)
                })
        }
    }

    func uploadAsset(from file: URL, to url: String) async throws -> AssetUploadResult {
        let data = try Data(contentsOf: file)
        return try storage.withLock { storage in
            if !storage.uploadFaults.isEmpty { throw storage.uploadFaults.removeFirst() }
            guard let binding = storage.uploadURLs[url] else {
                throw Self.error(.badRequest, "unknown upload URL \(url)")
            }
            guard data.count <= maxAssetSize else {
                throw Self.error(.limitExceeded, "an asset may hold at most \(maxAssetSize) bytes")
            }
            var checksum = AssetChecksum()
            checksum.update(data)
            storage.bytes[checksum.base64] = data
            storage.uploadCount += 1
            let receipt = "receipt-\(storage.receipts.count + 1)"
            storage.receipts[receipt] = Receipt(binding: binding, fileChecksum: checksum.base64, size: checksum.size)
            return AssetUploadResult(
                singleFile: .init(fileChecksum: checksum.base64, size: checksum.size, receipt: receipt))
        }
    }

    func downloadAsset(from url: String, to file: URL, resumingAt offset: Int64) async throws {
        let (data, fault) = try storage.withLock { storage in
            storage.downloads.append((url, offset))
            guard let checksum = storage.bytes.keys.first(where: { Self.downloadURL(of: $0) == url }),
                let data = storage.bytes[checksum]
            else { throw Self.error(.notFound, "no asset at \(url)") }
            return (data, storage.downloadFaults.isEmpty ? nil : storage.downloadFaults.removeFirst())
        }
        var served = Data(data[min(Int(offset), data.count)...])
        if case .cut(let count)? = fault { served = served.prefix(count) }
        if case .corrupt? = fault, !served.isEmpty { served[served.startIndex] ^= 0xFF }
        if offset == 0 {
            try served.write(to: file)
        } else {
            let handle = try FileHandle(forWritingTo: file)
            try handle.seekToEnd()
            try handle.write(contentsOf: served)
            try handle.close()
        }
        if case .cut? = fault { throw CloudError(.network, message: "injected connection drop during a download") }
    }

    private static func downloadURL(of fileChecksum: String) -> String {
        "/assets/\(AssetChecksum.fileName(of: fileChecksum) ?? "invalid")"
    }

    // MARK: Records

    func modifyRecords(_ request: RecordsModifyRequest) async throws -> RecordsResponse {
        let request = try WireCoding.makeDecoder().decode(RecordsModifyRequest.self, from: WireCoding.encode(request))
        return storage.withLock { storage in
            RecordsResponse(records: request.operations.map { Self.perform($0, in: request.zoneID?.zoneName ?? "_defaultZone", &storage) })
        }
    }

    private static func perform(
        _ operation: RecordsModifyRequest.Operation, in zoneName: String, _ storage: inout Storage
    ) -> RecordResult {
        var record = operation.record
        let name = record.recordName
        if operation.operationType.isDelete {
            storage.records[zoneName]?[name] = nil
            return .value(Record(recordName: name, deleted: true))
        }
        let stored = storage.records[zoneName]?[name]
        if operation.operationType == .create, stored != nil { return .error(ServerError(.exists, recordName: name)) }
        if operation.operationType == .update, stored?.recordChangeTag != record.recordChangeTag {
            return .error(ServerError(.conflict, recordName: name, serverRecord: stored))
        }
        storage.savedFields.append(record.fields)
        for (fieldName, value) in record.fields {
            for asset in value.assets {
                if let problem = problem(with: asset, in: fieldName, of: name, zoneName, stored, storage) {
                    return .error(ServerError(.badRequest, reason: problem, recordName: name))
                }
            }
        }
        record.mapFields { $0.map { Asset(fileChecksum: $0.fileChecksum, size: $0.size) } }
        if let stored { record.fields = stored.fields.merging(record.fields) { $1 } }
        record.recordType = record.recordType ?? stored?.recordType
        put(record, in: zoneName, &storage)
        return .value(readable(storage.records[zoneName]![name]!))
    }

    /// Why the server refuses an asset sent in a field, or nil.
    private static func problem(
        with asset: Asset, in fieldName: String, of recordName: String, _ zoneName: String, _ stored: Record?,
        _ storage: Storage
    ) -> String? {
        if asset.downloadURL != nil { return "an asset to save carries a downloadURL" }
        guard let receipt = asset.receipt else {
            let held = stored?.fields[fieldName]?.assets.map(\.fileChecksum) ?? []
            return held.contains(asset.fileChecksum) ? nil : "asset \(fieldName) has no receipt and is not the field's"
        }
        guard let issued = storage.receipts[receipt],
            issued.binding == Binding(zoneName: zoneName, recordName: recordName, fieldName: fieldName)
        else { return "receipt \(receipt) was not issued for \(recordName).\(fieldName)" }
        guard issued.fileChecksum == asset.fileChecksum, issued.size == asset.size else {
            return "receipt \(receipt) is for other bytes"
        }
        return nil
    }

    private static func put(_ record: Record, in zoneName: String, _ storage: inout Storage) {
        var record = record
        storage.version += 1
        record.recordChangeTag = "tag-\(storage.version)"
        record.zoneID = nil
        storage.records[zoneName, default: [:]][record.recordName] = record
        storage.versions[zoneName, default: [:]][record.recordName] = storage.version
    }

    /// A stored record as reads answer it: each asset with its download URL.
    private static func readable(_ record: Record) -> Record {
        var record = record
        record.mapFields { value in
            value.map { Asset(fileChecksum: $0.fileChecksum, size: $0.size, downloadURL: downloadURL(of: $0.fileChecksum)) }
        }
        return record
    }

    // MARK: Changes

    func fetchDatabaseChanges(_ request: DatabaseChangesRequest) async throws -> DatabaseChangesResponse {
        storage.withLock { storage in
            DatabaseChangesResponse(
                syncToken: "db-\(storage.version)", moreComing: false,
                zones: storage.records.keys.sorted().map { Zone(zoneID: ZoneID(zoneName: $0), syncToken: "z") })
        }
    }

    func fetchZoneChanges(_ request: ZoneChangesRequest) async throws -> ZoneChangesResponse {
        let zone = request.zones[0]
        let since = zone.syncToken.flatMap { Int($0.dropFirst(2)) } ?? 0
        return storage.withLock { storage in
            let versions = storage.versions[zone.zoneID.zoneName] ?? [:]
            let records = versions.filter { $0.value > since }.sorted { $0.value < $1.value }.compactMap {
                storage.records[zone.zoneID.zoneName]?[$0.key].map(Self.readable)
            }
            return ZoneChangesResponse(zones: [
                .value(ZoneChanges(zoneID: zone.zoneID, syncToken: "v-\(storage.version)", moreComing: false, records: records))
            ])
        }
    }

    // MARK: Not used by these tests

    func caller() async throws -> CallerResponse { CallerResponse(userRecordName: "_u1") }
    func modifyZones(_ request: ZonesModifyRequest) async throws -> ZonesResponse { throw Self.unused("zones/modify") }
    func listZones() async throws -> ZonesResponse { throw Self.unused("zones/list") }
    func lookupZones(_ request: ZonesLookupRequest) async throws -> ZonesResponse { throw Self.unused("zones/lookup") }
    func lookupRecords(_ request: RecordsLookupRequest) async throws -> RecordsResponse { throw Self.unused("records/lookup") }
    func queryRecords(_ request: RecordsQueryRequest) async throws -> RecordsQueryResponse { throw Self.unused("records/query") }
    func waitForChanges(since syncToken: String?, timeout: Duration) async throws -> NotificationsResponse {
        throw Self.unused("notifications")
    }
    func modifySchema(_ schema: CloudSchema) async throws -> CloudSchema { throw Self.unused("schema/modify") }
    func fetchSchema() async throws -> CloudSchema { throw Self.unused("schema") }
    func acceptShares(_ request: ShareAcceptRequest) async throws -> ShareAcceptResponse { throw Self.unused("records/accept") }
    func resolveShares(_ request: ShareAcceptRequest) async throws -> ShareAcceptResponse { throw Self.unused("records/resolve") }

    private static func unused(_ operation: String) -> CloudError {
        CloudError(.invalidResponse, message: "AssetServerFake does not answer \(operation)")
    }

    private static func error(_ code: ServerErrorCode, _ reason: String) -> CloudError {
        CloudError.server(ServerError(code, reason: reason), httpStatus: code.httpStatus)
    }
}

extension FieldValue {
    /// The assets the value holds, also inside a list.
    var assets: [Asset] {
        switch self {
        case .asset(let asset): [asset]
        case .list(let elements): elements.flatMap(\.assets)
        default: []
        }
    }

    func map(_ transform: (Asset) -> Asset) -> FieldValue {
        switch self {
        case .asset(let asset): .asset(transform(asset))
        case .list(let elements): .list(elements.map { $0.map(transform) })
        default: self
        }
    }
}

extension Record {
    mutating func mapFields(_ transform: (FieldValue) -> FieldValue) {
        fields = fields.mapValues(transform)
    }
}
