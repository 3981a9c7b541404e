import CloudStoreWire
import Foundation
import Logging

extension SyncEngine {
    /// The records of a fetched page with a `fileURL` on each asset that has a `downloadURL`, and
    /// the files the engine downloaded for them (to delete once the page was delivered). Does
    /// nothing without ``Configuration/assetDirectory``.
    ///
    /// Each asset comes from the delegate's ``SyncEngineDelegate/existingFile(for:syncEngine:)``,
    /// or is downloaded once per page into `<hex>.partial`, resuming a partial file left by an
    /// interrupted fetch, checked (size and SHA-256; once more from zero when that fails) and
    /// renamed `<hex>.asset`. Throws a ``CloudError``: the download's own, or `invalidResponse`
    /// for bytes that do not match their checksum; the page is then not delivered.
    func fetchAssets(of records: [Record], in zoneID: ZoneID) async throws -> (records: [Record], downloaded: [URL]) {
        guard let directory = configuration.assetDirectory else { return (records, []) }
        var files: [String: URL] = [:]
        var downloaded: [URL] = []
        for record in records {
            for (field, asset) in record.assetFields where files[asset.fileChecksum] == nil {
                guard let downloadURL = asset.downloadURL else { continue }
                if let existing = await existingFile(for: asset) {
                    logger.debug("Asset already on file; not downloaded", metadata: assetMetadata(record, field, asset))
                    files[asset.fileChecksum] = existing
                    continue
                }
                let what = "asset \(field) of record \(record.recordName) in zone \(zoneID)"
                let file = try await download(asset, from: downloadURL, into: directory, what: what) { message, offset in
                    var metadata = assetMetadata(record, field, asset)
                    metadata["offset"] = "\(offset)"
                    logger.info(message, metadata: metadata)
                }
                files[asset.fileChecksum] = file
                downloaded.append(file)
            }
        }
        guard !files.isEmpty else { return (records, []) }
        let delivered = records.map { record in
            var record = record
            record.mapAssets { _, asset in
                var asset = asset
                asset.fileURL = files[asset.fileChecksum] ?? asset.fileURL
                return asset
            }
            return record
        }
        return (delivered, downloaded)
    }

    /// The delegate's file of an asset's bytes, once the events queued before were delivered
    /// (a page delivered earlier may have brought the same bytes).
    private func existingFile(for asset: Asset) async -> URL? {
        await deliverEvents()
        guard let delegate else { return nil }
        delegateCalls.record()
        return await delegate.existingFile(for: asset, syncEngine: self)
    }

    /// Downloads one asset into `<hex>.asset` in `directory` and returns that file.
    private func download(
        _ asset: Asset, from url: String, into directory: URL, what: String,
        log: (Logger.Message, Int64) -> Void
    ) async throws -> URL {
        guard let name = AssetChecksum.fileName(of: asset.fileChecksum) else {
            throw CloudError(
                .invalidResponse,
                message: "\(what) has the checksum \(asset.fileChecksum), which is not the base64 of a SHA-256; "
                    + "the fetch stops before its page and retries it later")
        }
        let manager = FileManager.default
        try manager.createDirectory(at: directory, withIntermediateDirectories: true)
        let partial = directory.appendingPathComponent("\(name).partial")
        let file = directory.appendingPathComponent("\(name).asset")
        var received = (fileChecksum: "none", size: Int64(0))
        for attempt in 1...2 {
            if (Self.size(of: partial) ?? 0) > asset.size { try? manager.removeItem(at: partial) }
            let offset = Self.size(of: partial)
            if offset.map({ $0 < asset.size }) ?? true {
                log((offset ?? 0) > 0 ? "Resuming asset download" : "Downloading asset", offset ?? 0)
                try await database.downloadAsset(from: url, to: partial, resumingAt: offset ?? 0)
            }
            received = (try? AssetChecksum.ofFile(at: partial)) ?? received
            if received.fileChecksum == asset.fileChecksum && received.size == asset.size {
                try? manager.removeItem(at: file)
                try manager.moveItem(at: partial, to: file)
                log("Downloaded asset", asset.size)
                return file
            }
            try? manager.removeItem(at: partial)
            if attempt == 1 {
                logger.warning(
                    "Downloaded asset does not match its checksum; downloading it again",
                    metadata: ["asset": "\(what)", "checksum": "\(received.fileChecksum)", "expected": "\(asset.fileChecksum)"])
            }
        }
        throw CloudError(
            .invalidResponse,
            message: "\(what): the download has checksum \(received.fileChecksum) (\(received.size) bytes), twice, "
                + "but the record says \(asset.fileChecksum) (\(asset.size) bytes); the fetch stops before its page "
                + "and retries it later")
    }

    /// Deletes the engine's own downloads of a delivered page that the delegate did not move.
    func removeDownloadedAssets(_ files: [URL]) {
        for file in files where FileManager.default.fileExists(atPath: file.path) {
            do {
                try FileManager.default.removeItem(at: file)
            } catch {
                logger.warning("Could not delete a downloaded asset", metadata: ["file": "\(file.path)", "error": "\(error)"])
            }
        }
    }

    /// Deletes the `.asset` files a previous engine left in `directory` (keeping `.partial` ones,
    /// which resume), and creates the directory when it is missing.
    static func removeLeftoverAssets(in directory: URL, logger: Logger) {
        let manager = FileManager.default
        do {
            try manager.createDirectory(at: directory, withIntermediateDirectories: true)
            for file in try manager.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
            where file.pathExtension == "asset" {
                try manager.removeItem(at: file)
            }
        } catch {
            logger.warning(
                "Could not clean up the asset directory", metadata: ["directory": "\(directory.path)", "error": "\(error)"])
        }
    }

    private static func size(of file: URL) -> Int64? {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: file.path) else { return nil }
        return (attributes[.size] as? NSNumber)?.int64Value
    }
}
