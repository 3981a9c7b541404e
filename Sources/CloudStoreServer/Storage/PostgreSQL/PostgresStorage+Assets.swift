import CloudStoreWire
import Foundation
import NIOCore
import PostgresNIO

/// Assets on PostgreSQL: the bytes in PostgreSQL itself, in rows of ``AssetStorageChunk/bytes``
/// (`cloudstore_asset_chunk`), so every server instance serves every asset; upload URLs, receipts
/// and states in `cloudstore_asset_upload` and `cloudstore_asset`. Each chunk is written and read
/// with its own statement, so a transfer holds no pool connection between chunks.
extension PostgresStorage {
    private static let bindingColumns = "container, environment, scope, owner, zone, record, field, caller"

    private typealias BindingRow = (String, String, String, String, String, String, String, String)

    private static func binding(_ row: BindingRow) throws -> (zone: ZoneAddress, record: String, field: String, caller: String) {
        guard let environment = CloudEnvironment(rawValue: row.1), let scope = DatabaseScope(rawValue: row.2) else {
            throw PostgresStorageError("an asset row has an unknown environment or database")
        }
        let partition = DatabasePartition(container: row.0, environment: environment, scope: scope, owner: row.3)
        return (partition.zone(row.4), row.5, row.6, row.7)
    }

    func addAssetUploads(_ uploads: [AssetUpload]) async throws {
        guard !uploads.isEmpty else { return }
        try await transaction { connection in
            for upload in uploads {
                let partition = upload.zone.partition
                try await self.run(
                    """
                    INSERT INTO \(unescaped: self.table("asset_upload")) (id, \(unescaped: Self.bindingColumns), expires_at)
                    VALUES (\(upload.id), \(partition.container), \(partition.environment.rawValue), \(partition.scope.rawValue),
                        \(partition.owner), \(upload.zone.zoneName), \(upload.recordName), \(upload.fieldName), \(upload.caller),
                        \(upload.expiresAt.millisecondsSince1970))
                    """, on: connection)
            }
        }
    }

    func assetUpload(_ id: String, container: String) async throws -> AssetUpload? {
        try await client.withConnection { connection in
            let rows = try await self.run(
                """
                SELECT \(unescaped: Self.bindingColumns), expires_at FROM \(unescaped: self.table("asset_upload"))
                WHERE id = \(id) AND container = \(container)
                """, on: connection)
            for try await row in rows.decode((String, String, String, String, String, String, String, String, Int64).self) {
                let binding = try Self.binding((row.0, row.1, row.2, row.3, row.4, row.5, row.6, row.7))
                return AssetUpload(
                    id: id, zone: binding.zone, recordName: binding.record, fieldName: binding.field, caller: binding.caller,
                    expiresAt: Date(millisecondsSince1970: row.8))
            }
            return nil
        }
    }

    func receiveAsset(_ assetID: String, for upload: AssetUpload) async throws -> any AssetSink {
        let partition = upload.zone.partition
        let removableAt = assetLifetime.removableAt(after: .receiving(urlExpiresAt: upload.expiresAt))?.millisecondsSince1970
        _ = try await client.withConnection { connection in
            try await self.run(
                """
                INSERT INTO \(unescaped: self.table("asset")) (id, \(unescaped: Self.bindingColumns), state, expires_at, removable_at)
                VALUES (\(assetID), \(partition.container), \(partition.environment.rawValue), \(partition.scope.rawValue),
                    \(partition.owner), \(upload.zone.zoneName), \(upload.recordName), \(upload.fieldName), \(upload.caller),
                    \(AssetState.receiving.rawValue), \(upload.expiresAt.millisecondsSince1970), \(removableAt))
                """, on: connection)
        }
        return PostgresAssetSink(storage: self, upload: upload, assetID: assetID)
    }

    func asset(_ id: String, container: String) async throws -> StoredAsset? {
        try await client.withConnection { connection in
            let rows = try await self.run(
                """
                SELECT \(unescaped: Self.bindingColumns), checksum, size FROM \(unescaped: self.table("asset"))
                WHERE id = \(id) AND container = \(container) AND state IN ('saved', 'released')
                """, on: connection)
            for try await row in rows.decode(
                (String, String, String, String, String, String, String, String, String, Int64).self)
            {
                let binding = try Self.binding((row.0, row.1, row.2, row.3, row.4, row.5, row.6, row.7))
                return StoredAsset(
                    id: id, zone: binding.zone, recordName: binding.record, fieldName: binding.field, fileChecksum: row.8,
                    size: row.9)
            }
            return nil
        }
    }

    func readAsset(_ asset: StoredAsset, range: Range<Int64>, _ body: (ByteBuffer) async throws -> Void) async throws {
        guard !range.isEmpty else { return }
        let chunk = Int64(AssetStorageChunk.bytes)
        for seq in (range.lowerBound / chunk)...((range.upperBound - 1) / chunk) {
            let bytes = try await client.withConnection { connection -> ByteBuffer? in
                let rows = try await self.run(
                    """
                    SELECT bytes FROM \(unescaped: self.table("asset_chunk")) WHERE asset_id = \(asset.id) AND seq = \(Int32(seq))
                    """, on: connection)
                for try await bytes in rows.decode(ByteBuffer.self) { return bytes }
                return nil
            }
            guard var bytes else { throw PostgresStorageError("chunk \(seq) of asset \(asset.id) is missing") }
            let start = seq * chunk
            let from = Int(max(range.lowerBound, start) - start)
            let to = Int(min(range.upperBound, start + Int64(bytes.readableBytes)) - start)
            guard from < to, let slice = bytes.getSlice(at: bytes.readerIndex + from, length: to - from) else {
                throw PostgresStorageError("chunk \(seq) of asset \(asset.id) is shorter than its size says")
            }
            bytes = slice
            try await body(bytes)
        }
    }

    /// The receipts of a records/modify request, locked until the transaction ends (a sweep cannot
    /// remove an asset a save is about to reference).
    func assetReceipts(_ connection: PostgresConnection, _ receipts: [String]) async throws -> [String: AssetReceipt] {
        guard !receipts.isEmpty else { return [:] }
        let rows = try await self.run(
            """
            SELECT id, \(unescaped: Self.bindingColumns), receipt, checksum, size, state, expires_at
            FROM \(unescaped: table("asset")) WHERE receipt = ANY(\(receipts)) FOR UPDATE
            """, on: connection)
        var found: [String: AssetReceipt] = [:]
        for try await row in rows.decode(
            (String, String, String, String, String, String, String, String, String, String, String, Int64, String, Int64).self)
        {
            let binding = try Self.binding((row.1, row.2, row.3, row.4, row.5, row.6, row.7, row.8))
            found[row.9] = AssetReceipt(
                receipt: row.9, assetID: row.0, zone: binding.zone, recordName: binding.record, fieldName: binding.field,
                caller: binding.caller, fileChecksum: row.10, size: row.11,
                expiresAt: Date(millisecondsSince1970: row.13), isConsumed: row.12 != AssetState.uploaded.rawValue)
        }
        return found
    }


    /// Releases every saved asset of a zone (the zone is deleted).
    func releaseAssets(_ connection: PostgresConnection, of zone: ZoneAddress, at removableAt: Date?) async throws {
        let partition = zone.partition
        try await self.run(
            """
            UPDATE \(unescaped: table("asset")) SET state = 'released', removable_at = \(removableAt?.millisecondsSince1970)
            WHERE container = \(partition.container) AND environment = \(partition.environment.rawValue)
                AND scope = \(partition.scope.rawValue) AND owner = \(partition.owner) AND zone = \(zone.zoneName)
                AND state = 'saved'
            """, on: connection)
    }

    func sweepAssets(containers: Set<String>, now: Date) async throws -> AssetSweep {
        let cutoff = now.millisecondsSince1970
        let containers = Array(containers)
        let removed = try await transaction { connection -> [(String, Int64)] in
            try await self.run(
                """
                DELETE FROM \(unescaped: self.table("asset_upload")) WHERE expires_at <= \(cutoff) AND container = ANY(\(containers))
                """, on: connection)
            let rows = try await self.run(
                """
                DELETE FROM \(unescaped: self.table("asset")) WHERE removable_at <= \(cutoff) AND container = ANY(\(containers))
                RETURNING id, size
                """, on: connection)
            var removed: [(String, Int64)] = []
            for try await row in rows.decode((String, Int64).self) { removed.append(row) }
            if !removed.isEmpty {
                try await self.run(
                    "DELETE FROM \(unescaped: self.table("asset_chunk")) WHERE asset_id = ANY(\(removed.map(\.0)))", on: connection)
            }
            return removed
        }
        var sweep = AssetSweep()
        for (id, size) in removed {
            logger.debug("asset removed", metadata: ["asset": "\(id)", "size": "\(size)"])
            sweep.assets += 1
            sweep.bytes += size
        }
        return sweep
    }

    /// Writes one chunk of an asset.
    fileprivate func writeChunk(_ assetID: String, seq: Int32, _ bytes: ByteBuffer) async throws {
        _ = try await client.withConnection { connection in
            try await self.run(
                """
                INSERT INTO \(unescaped: self.table("asset_chunk")) (asset_id, seq, bytes) VALUES (\(assetID), \(seq), \(bytes))
                """, on: connection)
        }
    }
}

/// The bytes of one upload on their way into chunk rows: at most one chunk is buffered.
private final class PostgresAssetSink: AssetSink, @unchecked Sendable {
    // @unchecked: one upload's request task uses it, one call at a time.
    let storage: PostgresStorage
    let upload: AssetUpload
    let assetID: String
    private var pending = ByteBuffer()
    private var seq: Int32 = 0

    init(storage: PostgresStorage, upload: AssetUpload, assetID: String) {
        self.storage = storage
        self.upload = upload
        self.assetID = assetID
    }

    func write(_ bytes: ByteBuffer) async throws {
        var bytes = bytes
        while bytes.readableBytes > 0 {
            let room = AssetStorageChunk.bytes - pending.readableBytes
            var piece = bytes.readSlice(length: min(room, bytes.readableBytes))!
            pending.writeBuffer(&piece)
            if pending.readableBytes == AssetStorageChunk.bytes { try await flush() }
        }
    }

    private func flush() async throws {
        try await storage.writeChunk(assetID, seq: seq, pending)
        seq += 1
        pending = ByteBuffer()
    }

    func commit(fileChecksum: String, size: Int64, receipt: String) async throws {
        if pending.readableBytes > 0 { try await flush() }
        let removableAt = storage.assetLifetime.removableAt(after: .uploaded(receiptExpiresAt: upload.expiresAt))
        _ = try await storage.client.withConnection { connection in
            try await self.storage.run(
                """
                UPDATE \(unescaped: self.storage.table("asset")) SET state = 'uploaded', receipt = \(receipt),
                    checksum = \(fileChecksum), size = \(size), removable_at = \(removableAt?.millisecondsSince1970)
                WHERE id = \(self.assetID)
                """, on: connection)
        }
    }

    func discard() async {
        pending = ByteBuffer()
        _ = try? await storage.transaction { connection in
            try await self.storage.run(
                "DELETE FROM \(unescaped: self.storage.table("asset_chunk")) WHERE asset_id = \(self.assetID)", on: connection)
            try await self.storage.run(
                "DELETE FROM \(unescaped: self.storage.table("asset")) WHERE id = \(self.assetID)", on: connection)
        }
    }
}
