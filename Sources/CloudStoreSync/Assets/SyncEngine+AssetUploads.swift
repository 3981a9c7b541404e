import CloudStoreWire
import Foundation
import Logging

extension SyncEngine {
    /// At most this many tokens per `assets/upload` request.
    static let maxAssetUploadTokens = 200

    /// The records whose assets could not be uploaded, each with its first error, in order.
    private struct AssetFailures {
        private var recordIDs = Set<RecordID>()
        private(set) var failures: [(record: Record, error: ServerError)] = []

        mutating func add(_ record: Record, _ error: ServerError) {
            guard recordIDs.insert(record.recordID).inserted else { return }
            var error = error
            error.recordName = record.recordName
            failures.append((record, error))
        }

        func contains(_ recordID: RecordID) -> Bool { recordIDs.contains(recordID) }
    }

    /// One asset to upload before its record is saved.
    private struct AssetUpload {
        var record: Record
        var field: AssetField
        var asset: Asset
        var fileURL: URL

        var receiptKey: AssetReceiptCache.Key {
            AssetReceiptCache.Key(
                recordID: record.recordID, fieldName: field.fieldName, fileChecksum: asset.fileChecksum, size: asset.size)
        }
    }

    /// The records of a batch as they are sent, their new assets uploaded (WireProtocol.md §7).
    ///
    /// An asset with a receipt is sent with it; one with a `fileURL` and no receipt (nor a
    /// `downloadURL`: that one the server holds already) is uploaded and sent with the receipt
    /// the upload answered; any other is sent unchanged (checksum and size). A record whose asset
    /// cannot be uploaded (unreadable file, other bytes than the asset says, refused by the
    /// server) is not sent: it goes into `outcome` as a failed save, or stays pending when the
    /// server's error keeps it (`QUOTA_EXCEEDED`). Throws when a request fails as a whole
    /// (network, timeout, 429, 503, 500): nothing was settled then.
    func prepareAssets(of records: [Record], into outcome: inout RecordSendOutcome) async throws -> [Record] {
        var failed = AssetFailures()
        var sent: [Record] = []
        var uploads: [AssetUpload] = []
        for record in records {
            var prepared = record
            prepared.mapAssets { field, asset in
                if let receipt = asset.receipt {
                    return Asset(fileChecksum: asset.fileChecksum, size: asset.size, receipt: receipt)
                }
                guard asset.downloadURL == nil, let fileURL = asset.fileURL else {
                    logger.debug("Asset unchanged; not uploaded", metadata: assetMetadata(record, field, asset))
                    return asset.unchanged
                }
                let upload = AssetUpload(record: record, field: field, asset: asset, fileURL: fileURL)
                if let uploaded = assetReceipts.asset(for: upload.receiptKey, now: clock.now) {
                    logger.debug("Asset uploaded recently; reusing its receipt", metadata: assetMetadata(record, field, asset))
                    return uploaded
                }
                if FileManager.default.isReadableFile(atPath: fileURL.path) {
                    uploads.append(upload)
                } else {
                    failed.add(record, Self.unavailableFile(upload, reason: "does not exist or cannot be read"))
                }
                return asset
            }
            sent.append(prepared)
        }
        uploads.removeAll { failed.contains($0.record.recordID) }

        var uploaded: [RecordID: [AssetField: Asset]] = [:]
        let zoneIDs = uploads.map(\.record.recordID.zoneID).reduce(into: [ZoneID]()) { zones, zone in
            if !zones.contains(zone) { zones.append(zone) }
        }
        for zoneID in zoneIDs {
            let inZone = uploads.filter { $0.record.recordID.zoneID == zoneID }
            for start in stride(from: 0, to: inZone.count, by: Self.maxAssetUploadTokens) {
                let chunk = inZone[start..<min(start + Self.maxAssetUploadTokens, inZone.count)]
                    .filter { !failed.contains($0.record.recordID) }
                guard !chunk.isEmpty else { continue }
                let urls: [String]
                do {
                    urls = try await requestUploadURLs(for: chunk, in: zoneID)
                } catch let error as CloudError {
                    guard let serverError = error.serverError, !error.isTransient, !error.isAuthenticationFailure
                    else { throw error }
                    for upload in chunk { failed.add(upload.record, serverError) }
                    continue
                }
                for (upload, url) in zip(chunk, urls) where !failed.contains(upload.record.recordID) {
                    do {
                        let asset = try await self.upload(upload, to: url)
                        uploaded[upload.record.recordID, default: [:]][upload.field] = asset
                    } catch let error as ServerError {
                        failed.add(upload.record, error)
                    }
                }
            }
        }

        for (record, error) in failed.failures {
            outcome.absorb(.error(error), for: RecordBatchPlan.operation(saving: record), in: record.recordID.zoneID)
        }
        return sent.filter { !failed.contains($0.recordID) }.map { record in
            guard let assets = uploaded[record.recordID] else { return record }
            var record = record
            record.mapAssets { field, asset in assets[field] ?? asset }
            return record
        }
    }

    /// One `assets/upload` request: an upload URL per asset, in order.
    private func requestUploadURLs(for uploads: [AssetUpload], in zoneID: ZoneID) async throws -> [String] {
        logger.info("Requesting asset uploads", metadata: ["zone": "\(zoneID)", "count": "\(uploads.count)"])
        let request = AssetUploadRequest(
            zoneID: zoneID,
            tokens: uploads.map {
                AssetUploadRequest.Token(
                    recordName: $0.record.recordName, recordType: $0.record.recordType, fieldName: $0.field.fieldName)
            })
        let response = try await database.requestAssetUploads(request)
        let matches =
            response.tokens.count == uploads.count
            && zip(response.tokens, uploads).allSatisfy {
                $0.recordName == $1.record.recordName && $0.fieldName == $1.field.fieldName
            }
        guard matches else {
            throw CloudError(
                .invalidResponse,
                message: "assets/upload for zone \(zoneID) answered \(response.tokens.count) tokens for \(uploads.count) "
                    + "assets, or in another order")
        }
        return response.tokens.map(\.url)
    }

    /// Uploads one asset's file and checks what the server received. Throws a ``ServerError`` for
    /// its record alone (the file, the checksum, the server's refusal), a ``CloudError`` when the
    /// send must stop (transient, authentication).
    private func upload(_ upload: AssetUpload, to url: String) async throws -> Asset {
        let metadata = assetMetadata(upload.record, upload.field, upload.asset)
        logger.info("Uploading asset", metadata: metadata)
        let result: AssetUploadResult
        do {
            result = try await database.uploadAsset(from: upload.fileURL, to: url)
        } catch let error as CloudError {
            guard var serverError = error.serverError, !error.isTransient, !error.isAuthenticationFailure
            else { throw error }
            let what = "asset \(upload.field) of record \(upload.record.recordName)"
            if serverError.code == .limitExceeded {
                serverError.reason =
                    "\(what) is \(Self.formatted(upload.asset.size)), more than the server accepts for one asset "
                    + "(\(serverError.reason ?? "no reason given")); save a smaller file"
            } else {
                serverError.reason = "\(what) could not be uploaded: \(serverError.reason ?? serverError.code.rawValue)"
            }
            throw serverError
        } catch {
            throw Self.unavailableFile(upload, reason: "could not be read (\(error))")
        }
        let received = result.singleFile
        guard received.fileChecksum == upload.asset.fileChecksum, received.size == upload.asset.size else {
            throw ServerError(
                .assetFileChanged,
                reason: "asset \(upload.field) of record \(upload.record.recordName): the file \(upload.fileURL.path) "
                    + "uploaded with checksum \(received.fileChecksum) (\(received.size) bytes), but the asset says "
                    + "\(upload.asset.fileChecksum) (\(upload.asset.size) bytes); the file changed or is corrupt: "
                    + "make the asset again with Asset(contentsOf:)")
        }
        let asset = result.asset
        assetReceipts.insert(asset, for: upload.receiptKey, now: clock.now)
        logger.info("Uploaded asset", metadata: metadata)
        return asset
    }

    private static func unavailableFile(_ upload: AssetUpload, reason: String) -> ServerError {
        ServerError(
            .assetFileUnavailable,
            reason: "asset \(upload.field) of record \(upload.record.recordName): its file \(upload.fileURL.path) "
                + "\(reason); restore the file or save the record without it")
    }

    func assetMetadata(_ record: Record, _ field: AssetField, _ asset: Asset) -> Logger.Metadata {
        ["record": "\(record.recordID)", "field": "\(field)", "size": "\(asset.size)"]
    }

    /// A size for people: bytes, KiB or MiB.
    static func formatted(_ size: Int64) -> String {
        switch size {
        case ..<1024: "\(size) bytes"
        case ..<(1 << 20): "\(size / 1024) KiB"
        default: "\(size >> 20) MiB"
        }
    }
}
