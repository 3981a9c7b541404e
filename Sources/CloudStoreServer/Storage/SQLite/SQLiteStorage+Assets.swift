import CloudStoreWire
import Foundation
import GRDB
import NIOCore

/// Assets on SQLite: the bytes as files under `<data>/assets/<container>/<id prefix>/<id>`, written
/// to `<id>.partial` beside them, fsynced and renamed; upload URLs, receipts and states in the
/// container's database (`cloudstore_asset_upload`, `cloudstore_asset`).
extension SQLiteStorage {
    static let assetBindingColumnsSQL = """
        environment TEXT NOT NULL, scope TEXT NOT NULL, owner TEXT NOT NULL, zone TEXT NOT NULL,
        record TEXT NOT NULL, field TEXT NOT NULL, caller TEXT NOT NULL
        """
    static let assetBindingColumns = "environment, scope, owner, zone, record, field, caller"

    func assetDirectory(_ container: String) -> URL {
        directory.appendingPathComponent("assets", isDirectory: true).appendingPathComponent(container, isDirectory: true)
    }

    func assetFile(_ container: String, _ id: String) -> URL {
        assetDirectory(container).appendingPathComponent(String(id.prefix(2)), isDirectory: true)
            .appendingPathComponent(id)
    }

    func partialAssetFile(_ container: String, _ id: String) -> URL {
        assetDirectory(container).appendingPathComponent("\(id).partial")
    }

    /// The zone, record and field of an asset row's binding columns.
    static func binding(_ row: Row, container: String) throws -> (zone: ZoneAddress, record: String, field: String, caller: String) {
        guard let environment = CloudEnvironment(rawValue: row["environment"]),
            let scope = DatabaseScope(rawValue: row["scope"])
        else { throw DatabaseError(message: "an asset row has an unknown environment or database") }
        let partition = DatabasePartition(container: container, environment: environment, scope: scope, owner: row["owner"])
        return (partition.zone(row["zone"]), row["record"], row["field"], row["caller"])
    }

    static func bindingArguments(_ zone: ZoneAddress, record: String, field: String, caller: String) -> StatementArguments {
        [
            zone.partition.environment.rawValue, zone.partition.scope.rawValue, zone.partition.owner, zone.zoneName, record,
            field, caller,
        ]
    }

    func addAssetUploads(_ uploads: [AssetUpload]) async throws {
        guard let container = uploads.first?.zone.partition.container else { return }
        try await pool(container).write { db in
            for upload in uploads {
                try db.execute(
                    sql: "INSERT INTO cloudstore_asset_upload (id, \(Self.assetBindingColumns), expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    arguments: [upload.id]
                        + Self.bindingArguments(upload.zone, record: upload.recordName, field: upload.fieldName, caller: upload.caller)
                        + [upload.expiresAt.millisecondsSince1970])
            }
        }
    }

    func assetUpload(_ id: String, container: String) async throws -> AssetUpload? {
        try await pool(container).read { db in
            guard
                let row = try Row.fetchOne(
                    db, sql: "SELECT \(Self.assetBindingColumns), expires_at FROM cloudstore_asset_upload WHERE id = ?",
                    arguments: [id])
            else { return nil }
            let binding = try Self.binding(row, container: container)
            return AssetUpload(
                id: id, zone: binding.zone, recordName: binding.record, fieldName: binding.field, caller: binding.caller,
                expiresAt: Date(millisecondsSince1970: row["expires_at"]))
        }
    }

    func receiveAsset(_ assetID: String, for upload: AssetUpload) async throws -> any AssetSink {
        let container = upload.zone.partition.container
        let partial = partialAssetFile(container, assetID)
        try FileManager.default.createDirectory(at: assetDirectory(container), withIntermediateDirectories: true)
        try await pool(container).write { db in
            try db.execute(
                sql: """
                    INSERT INTO cloudstore_asset (id, \(Self.assetBindingColumns), state, expires_at, removable_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [assetID]
                    + Self.bindingArguments(upload.zone, record: upload.recordName, field: upload.fieldName, caller: upload.caller)
                    + [
                        AssetState.receiving.rawValue, upload.expiresAt.millisecondsSince1970,
                        self.assetLifetime.removableAt(after: .receiving(urlExpiresAt: upload.expiresAt))?.millisecondsSince1970,
                    ])
        }
        let descriptor = open(partial.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            let error = POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
            try? await pool(container).write { db in
                try db.execute(sql: "DELETE FROM cloudstore_asset WHERE id = ?", arguments: [assetID])
            }
            throw error
        }
        return SQLiteAssetSink(storage: self, upload: upload, assetID: assetID, descriptor: descriptor)
    }

    func asset(_ id: String, container: String) async throws -> StoredAsset? {
        try await pool(container).read { db in
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: """
                        SELECT \(Self.assetBindingColumns), checksum, size FROM cloudstore_asset
                        WHERE id = ? AND state IN ('saved', 'released')
                        """,
                    arguments: [id])
            else { return nil }
            let binding = try Self.binding(row, container: container)
            return StoredAsset(
                id: id, zone: binding.zone, recordName: binding.record, fieldName: binding.field,
                fileChecksum: row["checksum"], size: row["size"])
        }
    }

    func readAsset(_ asset: StoredAsset, range: Range<Int64>, _ body: (ByteBuffer) async throws -> Void) async throws {
        let descriptor = open(assetFile(asset.zone.partition.container, asset.id).path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(descriptor) }
        var offset = range.lowerBound
        while offset < range.upperBound {
            let count = Int(min(Int64(AssetStorageChunk.bytes), range.upperBound - offset))
            var buffer = ByteBufferAllocator().buffer(capacity: count)
            let read = try buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { pointer in
                let read = pread(descriptor, pointer.baseAddress, count, off_t(offset))
                guard read >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
                return read
            }
            guard read > 0 else { throw POSIXError(.EIO) }
            offset += Int64(read)
            try await body(buffer)
        }
    }

    /// The receipts of a records/modify request that this container knows.
    func assetReceipts(_ db: Database, _ receipts: [String], container: String) throws -> [String: AssetReceipt] {
        guard !receipts.isEmpty else { return [:] }
        var found: [String: AssetReceipt] = [:]
        for row in try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT id, \(Self.assetBindingColumns), receipt, checksum, size, state, expires_at FROM cloudstore_asset
                    WHERE receipt IN (SELECT value FROM json_each(?))
                    """),
            arguments: [Self.jsonList(receipts)])
        {
            let binding = try Self.binding(row, container: container)
            let state: String = row["state"]
            let receipt = AssetReceipt(
                receipt: row["receipt"], assetID: row["id"], zone: binding.zone, recordName: binding.record,
                fieldName: binding.field, caller: binding.caller, fileChecksum: row["checksum"], size: row["size"],
                expiresAt: Date(millisecondsSince1970: row["expires_at"]), isConsumed: state != AssetState.uploaded.rawValue)
            found[receipt.receipt] = receipt
        }
        return found
    }

    /// Marks the saved assets of records in a zone (every record when `records` is nil), except
    /// `keeping`, released: removable at `removableAt` (``AssetLifetime``).
    func releaseAssets(
        _ db: Database, of zone: ZoneAddress, records: [String]?, keeping: Set<String>, removableAt: Date?
    ) throws {
        var sql = """
            UPDATE cloudstore_asset SET state = 'released', removable_at = ?
            WHERE environment = ? AND scope = ? AND owner = ? AND zone = ? AND state = 'saved'
            """
        var arguments: StatementArguments = [
            removableAt?.millisecondsSince1970, zone.partition.environment.rawValue,
            zone.partition.scope.rawValue, zone.partition.owner, zone.zoneName,
        ]
        if let records {
            sql += " AND record IN (SELECT value FROM json_each(?))"
            arguments += [Self.jsonList(records)]
        }
        if !keeping.isEmpty {
            sql += " AND id NOT IN (SELECT value FROM json_each(?))"
            arguments += [Self.jsonList(keeping)]
        }
        try db.cachedStatement(sql: sql).execute(arguments: arguments)
    }

    /// Marks assets a record now references saved: never removable while it does.
    func saveAssets(_ db: Database, _ ids: Set<String>, of zone: ZoneAddress, record: String) throws {
        guard !ids.isEmpty else { return }
        try db.cachedStatement(
            sql: """
                UPDATE cloudstore_asset SET state = 'saved', removable_at = NULL
                WHERE environment = ? AND scope = ? AND owner = ? AND zone = ? AND record = ?
                    AND id IN (SELECT value FROM json_each(?))
                """
        ).execute(
            arguments: [
                zone.partition.environment.rawValue, zone.partition.scope.rawValue, zone.partition.owner, zone.zoneName,
                record, Self.jsonList(ids),
            ])
    }

    func sweepAssets(containers: Set<String>, now: Date) async throws -> AssetSweep {
        var sweep = AssetSweep()
        for container in containers.sorted()
        where FileManager.default.fileExists(atPath: directory.appendingPathComponent("\(container).sqlite").path) {
            let removed = try await pool(container).write { db -> [(String, Int64)] in
                try db.execute(
                    sql: "DELETE FROM cloudstore_asset_upload WHERE expires_at <= ?",
                    arguments: [now.millisecondsSince1970])
                let rows = try Row.fetchAll(
                    db, sql: "SELECT id, size FROM cloudstore_asset WHERE removable_at <= ?",
                    arguments: [now.millisecondsSince1970])
                try db.execute(
                    sql: "DELETE FROM cloudstore_asset WHERE removable_at <= ?", arguments: [now.millisecondsSince1970])
                return rows.map { ($0["id"], $0["size"]) }
            }
            for (id, size) in removed {
                try? FileManager.default.removeItem(at: assetFile(container, id))
                try? FileManager.default.removeItem(at: partialAssetFile(container, id))
                logger.debug("asset removed", metadata: ["container": "\(container)", "asset": "\(id)", "size": "\(size)"])
                sweep.assets += 1
                sweep.bytes += size
            }
        }
        return sweep
    }
}

/// The bytes of one upload on their way to a file.
private final class SQLiteAssetSink: AssetSink, @unchecked Sendable {
    // @unchecked: one upload's request task uses it, one call at a time.
    let storage: SQLiteStorage
    let upload: AssetUpload
    let assetID: String
    private var descriptor: Int32

    init(storage: SQLiteStorage, upload: AssetUpload, assetID: String, descriptor: Int32) {
        self.storage = storage
        self.upload = upload
        self.assetID = assetID
        self.descriptor = descriptor
    }

    private var container: String { upload.zone.partition.container }

    func write(_ bytes: ByteBuffer) async throws {
        try bytes.withUnsafeReadableBytes { try writeAll(descriptor, $0) }
    }

    func commit(fileChecksum: String, size: Int64, receipt: String) async throws {
        let (descriptor, partial, file) = (descriptor, storage.partialAssetFile(container, assetID), storage.assetFile(container, assetID))
        self.descriptor = -1
        // fsync can take long on a busy disk: off the cooperative threads the server's requests share.
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            DispatchQueue.global().async {
                continuation.resume(with: Result { try Self.persist(descriptor, from: partial, to: file) })
            }
        }
        let removableAt = storage.assetLifetime.removableAt(after: .uploaded(receiptExpiresAt: upload.expiresAt))
        try await storage.pool(container).write { db in
            try db.execute(
                sql: """
                    UPDATE cloudstore_asset SET state = 'uploaded', receipt = ?, checksum = ?, size = ?, removable_at = ?
                    WHERE id = ?
                    """,
                arguments: [receipt, fileChecksum, size, removableAt?.millisecondsSince1970, self.assetID])
        }
    }

    /// Flushes the bytes to disk, closes the file and renames it into place, durably.
    private static func persist(_ descriptor: Int32, from partial: URL, to file: URL) throws {
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        let directory = file.deletingLastPathComponent()
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        guard rename(partial.path, file.path) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        let directoryDescriptor = open(directory.path, O_RDONLY | O_CLOEXEC)
        if directoryDescriptor >= 0 {
            fsync(directoryDescriptor)
            close(directoryDescriptor)
        }
    }

    func discard() async {
        if descriptor >= 0 {
            close(descriptor)
            descriptor = -1
        }
        try? FileManager.default.removeItem(at: storage.partialAssetFile(container, assetID))
        try? await storage.pool(container).write { db in
            try db.execute(sql: "DELETE FROM cloudstore_asset WHERE id = ?", arguments: [self.assetID])
        }
    }
}

/// Writes every byte to a file descriptor.
private func writeAll(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) throws {
    var written = 0
    while written < bytes.count {
        let count = write(descriptor, bytes.baseAddress! + written, bytes.count - written)
        guard count > 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        written += count
    }
}
