import CloudStoreSync
import CloudStoreWire
import Foundation
import GRDB

extension MirrorWrite {
    /// A fetched record with its encrypted fields opened (``RecordSealing/open(_:of:)``), or nil
    /// when it does not open: then it waits in `cloudstore_mirror_awaiting_decryption`, for its key
    /// (applied again once the key reaches this device, ``applyAwaitingDecryption()``) or refused
    /// (a field failed authentication: nothing of it is applied, an event and an error line name
    /// the record and field, and the record's next version replaces it). Sync goes on either way.
    func opened(_ record: Record, of entity: EntityDescription, in zone: MirrorZone.Key, _ effects: inout MirrorEffects) throws -> Record? {
        guard RecordSealing.needsKey(entity) else { return record }
        let failure: RecordSealing.Failure
        switch Result(catching: { () throws(RecordSealing.Failure) in
            (try sealing.open(record, of: entity), try sealing.sealedAssets(of: record, entity))
        }) {
        case .success(let (openedFields, assets)):
            var opened = openedFields
            var plain: [(field: String, sealed: Asset, plain: Asset, known: Bool)] = []
            do throws(RecordSealing.Failure) {
                for (field, asset) in assets {
                    let (opened, known) = try openAsset(asset, field: field, of: record, in: zone)
                    plain.append((field, asset, opened, known))
                }
            } catch {
                failure = error
                break
            }
            for asset in plain {
                opened.fields[asset.field] = .asset(asset.plain)
                guard !asset.known else { continue }
                try db.setSealedAsset(
                    asset.sealed, field: asset.field, record: record.recordName, in: zone,
                    plain: ExternalData(checksum: asset.plain.fileChecksum, size: asset.plain.size))
            }
            // A version that opens replaces one that waited or was refused (whose kept files
            // the mirror then removes, ``removeUnneededWaitingFiles()``).
            if try db.awaitsDecryption() {
                effects.sweepWaitingFiles = true
                try db.cachedStatement(sql: "DELETE FROM cloudstore_mirror_awaiting_decryption WHERE record_name = ?")
                    .execute(arguments: [record.recordName])
            }
            return opened
        case .failure(let error):
            failure = error
        }
        if case .missingKey = failure { keepAssetFiles(of: record, entity, &effects) }
        let refused: Bool
        switch failure {
        case .missingKey:
            refused = false
            logger.info(
                "a fetched record waits for its encryption key",
                metadata: ["record": "\(record.recordName)", "entity": "\(entity.name)", "reason": "\(failure.problem)"])
        case .refused(let field, let reason):
            refused = true
            logger.error(
                "a fetched record is refused: an encrypted field does not open",
                metadata: [
                    "record": "\(record.recordName)", "entity": "\(entity.name)", "field": "\(field)",
                    "reason": "\(reason.code.rawValue): \(reason.message)",
                ])
            effects.decryptionRefusals.append(
                PersistentCloudContainer.DecryptionRefusal(
                    entityName: entity.name, recordName: record.recordName, field: field, reason: reason.message))
        }
        let zoneID = zoneID(zone)
        try db.execute(
                sql: """
                    INSERT OR REPLACE INTO cloudstore_mirror_awaiting_decryption
                        (record_name, zone_name, zone_owner, record, refused, problem) VALUES (?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    record.recordName, zoneID.zoneName, zoneID.ownerRecordName ?? "", try MirrorTables.encode(record), refused,
                    failure.problem,
                ])
        return nil
    }

    /// The extension of an encrypted asset's downloaded file kept while its record waits for a key.
    static let waitingFileExtension = "waiting"

    /// The bytes of an encrypted asset of a fetched record, opened from the file the sync engine
    /// downloaded (its size and checksum checked), stored among the store's files: the asset of
    /// the plain bytes, which the import adopts as any other (``ExternalData``), and whether this
    /// device knew them already in this place (nothing opened, nothing to remember).
    ///
    /// - Throws: a ``RecordSealing/Failure``: the key is missing, the bytes do not authenticate,
    ///   or (refused) the file is missing or cannot be stored.
    private func openAsset(
        _ asset: Asset, field: String, of record: Record, in zone: MirrorZone.Key
    ) throws(RecordSealing.Failure) -> (asset: Asset, known: Bool) {
        // Sealed or opened here before, in this place: its bytes are in the store already (the
        // file the engine was given for it is then those bytes, not the sealed file).
        if let files = context.layout.externalData, let plain = try? db.plainBytes(of: asset, field: field, record: record.recordName, in: zone),
            files.contains(plain)
        {
            return (Asset(fileChecksum: plain.checksum, size: plain.size), true)
        }
        guard let files = context.layout.externalData, let file = asset.fileURL ?? waitingFile(of: asset),
            FileManager.default.isReadableFile(atPath: file.path)
        else {
            throw .refused(
                field: field,
                EncryptionError(.malformed, "the encrypted asset of \(asset.size) bytes was not downloaded; its next version replaces it"))
        }
        // Opened under a temporary name among the store's files (which a crash leaves for the
        // store's sweep of files no row names), then renamed to its checksum's.
        let opened = files.directory.appendingPathComponent(".\(UUID().uuidString).tmp")
        defer { try? FileManager.default.removeItem(at: opened) }
        let plain = try sealing.openAsset(from: file, to: opened, field: field, of: record)
        do {
            try files.adopt(opened, as: ExternalData(checksum: plain.fileChecksum, size: plain.size))
        } catch {
            throw .refused(field: field, EncryptionError(.malformed, "the opened asset could not be stored: \(error)"))
        }
        return (Asset(fileChecksum: plain.fileChecksum, size: plain.size), false)
    }

    /// Whether an encrypted asset of `record` has no file here to open: neither downloaded with
    /// it nor kept from a version that waited (a conflict's server copy, downloaded best effort).
    func lacksEncryptedAssetFiles(_ record: Record, _ entity: EntityDescription) -> Bool {
        guard let assets = try? sealing.sealedAssets(of: record, entity) else { return false }
        return assets.contains { $0.asset.fileURL == nil && waitingFile(of: $0.asset) == nil }
    }

    /// Keeps the downloaded files of a record's encrypted assets while it waits for its key:
    /// renamed `<checksum hex>.waiting` beside the engine's downloads (which it deletes once the
    /// page is applied), found there when the record opens (``waitingFile(of:)``), and removed
    /// once no waiting record names them (``removeUnneededWaitingFiles()``).
    private func keepAssetFiles(of record: Record, _ entity: EntityDescription, _ effects: inout MirrorEffects) {
        guard let transfers = context.layout.externalData?.transfers, let assets = try? sealing.sealedAssets(of: record, entity)
        else { return }
        // A version that waited before may be replaced, its file unneeded.
        effects.sweepWaitingFiles = true
        for (_, asset) in assets {
            // Only a file the engine downloaded there: one it was given from the store's own
            // files (``CloudMirror/existingFile(for:syncEngine:)``) stays where it is.
            guard let file = asset.fileURL, file.deletingLastPathComponent().standardizedFileURL == transfers.standardizedFileURL,
                let name = Self.waitingFileName(of: asset)
            else { continue }
            let kept = transfers.appendingPathComponent(name)
            try? FileManager.default.removeItem(at: kept)
            try? FileManager.default.moveItem(at: file, to: kept)
        }
    }

    /// The kept file of an encrypted asset whose record waited for its key (``keepAssetFiles(of:_:)``), if any.
    private func waitingFile(of asset: Asset) -> URL? {
        guard let transfers = context.layout.externalData?.transfers, let name = Self.waitingFileName(of: asset) else { return nil }
        let kept = transfers.appendingPathComponent(name)
        return ExternalDataFiles.size(of: kept) == asset.size ? kept : nil
    }

    /// The name of an encrypted asset's kept file: `<checksum hex>.waiting`.
    static func waitingFileName(of asset: Asset) -> String? {
        AssetChecksum.fileName(of: asset.fileChecksum).map { "\($0).\(waitingFileExtension)" }
    }

    /// Keeps a zone key record fetched from a zone (``ZoneKeyRecord``), and learns the key it holds
    /// for this user when this device has the account key (else it is learned when the account
    /// key arrives, ``CloudMirror/loadKeyring()``). Answers whether a key was learned. A record
    /// that does not decode, or whose grant does not open, is logged and skipped: records sealed
    /// with its key wait.
    func applyZoneKeyRecord(_ record: Record, in zoneID: ZoneID) throws -> Bool {
        let key: ZoneKeyRecord
        do {
            key = try ZoneKeyRecord(record)
        } catch {
            logger.error("a zone key record is malformed; skipped", metadata: ["record": "\(record.recordName)", "reason": "\(error)"])
            return false
        }
        try db.saveZoneKeyRecord(record, in: zoneID)
        guard let keyring = sealing.keyring, keyring.learn(key, in: zoneID, logger: logger) else { return false }
        logger.info("learned a zone key", metadata: ["zone": "\(zoneID)", "key": "\(key.keyID)", "generation": "\(key.generation)"])
        return true
    }

    /// Applies the records that waited for their key again, now that this device may have it:
    /// each one that opens is applied as if fetched; the rest wait on. Refused ones stay refused.
    func applyAwaitingDecryption(_ effects: inout MirrorEffects) throws {
        // The records that open were read from their kept files, unneeded from now on.
        effects.sweepWaitingFiles = true
        try applySetAside(from: "cloudstore_mirror_awaiting_decryption", where: "refused = 0", &effects)
    }

    /// Forgets the fetched records set aside in a zone (for a unique key, or awaiting decryption),
    /// or only the one named `recordName`; in every zone when `zoneID` is nil.
    func forgetSetAsideRecords(in zoneID: ZoneID?, named recordName: String? = nil, _ effects: inout MirrorEffects) throws {
        effects.sweepWaitingFiles = true
        for table in ["cloudstore_mirror_kept_aside", "cloudstore_mirror_awaiting_decryption"] {
            guard let zoneID else {
                try db.execute(sql: "DELETE FROM \(table)")
                continue
            }
            var arguments: StatementArguments = [zoneID.zoneName, zoneID.ownerRecordName ?? ""]
            if let recordName { arguments += [recordName] }
            try db.execute(
                sql: "DELETE FROM \(table) WHERE zone_name = ? AND zone_owner = ?" + (recordName == nil ? "" : " AND record_name = ?"),
                arguments: arguments)
        }
    }
}

extension ReadContext {
    /// Removes the kept files of encrypted assets (``MirrorWrite/keepAssetFiles(of:_:_:)``) no
    /// waiting record names any more: opened since, or of a version replaced. Run in a read after
    /// the transaction that may have left them, so it reads only what committed (a rolled-back
    /// apply keeps its files).
    func removeUnneededWaitingFiles() throws {
        guard let transfers = layout.externalData?.transfers else { return }
        var needed: Set<String> = []
        for encoded in try Data.fetchAll(db, sql: "SELECT record FROM cloudstore_mirror_awaiting_decryption WHERE refused = 0") {
            let record = try MirrorTables.decode(Record.self, encoded)
            for case .asset(let asset) in record.fields.values {
                if let name = MirrorWrite.waitingFileName(of: asset) { needed.insert(name) }
            }
        }
        for name in (try? FileManager.default.contentsOfDirectory(atPath: transfers.path)) ?? []
        where name.hasSuffix(".\(MirrorWrite.waitingFileExtension)") && !needed.contains(name) {
            try? FileManager.default.removeItem(at: transfers.appendingPathComponent(name))
        }
    }
}

extension Database {
    /// Whether a fetched record waits for decryption, or was refused (``MirrorWrite/opened(_:of:in:)``).
    func awaitsDecryption() throws -> Bool {
        try Bool.fetchOne(self, sql: "SELECT 1 FROM cloudstore_mirror_awaiting_decryption LIMIT 1") ?? false
    }
}

// MARK: - The plain bytes of sealed assets (`cloudstore_mirror_sealed_asset`)

extension Database {
    /// Remembers that this device holds `plain`, the bytes of `sealed`, the sealed file of the
    /// encrypted asset `field` of record `recordName` in `zone` (sealed here for upload, or opened
    /// here).
    func setSealedAsset(_ sealed: Asset, field: String, record recordName: String, in zone: MirrorZone.Key, plain: ExternalData) throws {
        try cachedStatement(
            sql: """
                INSERT OR REPLACE INTO cloudstore_mirror_sealed_asset
                    (zone_name, zone_owner, record_name, field, sealed_checksum, sealed_size, checksum, size) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """
        ).execute(arguments: [zone.name ?? "", zone.owner ?? "", recordName, field, sealed.fileChecksum, sealed.size, plain.checksum, plain.size])
    }

    /// The plain bytes this device holds of `sealed` as the asset `field` of record `recordName`
    /// in `zone`: only in that place (the place the file authenticated in when it was sealed or
    /// opened here).
    func plainBytes(of sealed: Asset, field: String, record recordName: String, in zone: MirrorZone.Key) throws -> ExternalData? {
        try Row.fetchOne(
            cachedStatement(
                sql: """
                    SELECT checksum, size FROM cloudstore_mirror_sealed_asset
                    WHERE record_name = ? AND field = ? AND zone_name = ? AND zone_owner = ? AND sealed_checksum = ? AND sealed_size = ?
                    """),
            arguments: [recordName, field, zone.name ?? "", zone.owner ?? "", sealed.fileChecksum, sealed.size]
        ).map { ExternalData(checksum: $0[0], size: $0[1]) }
    }

    /// The plain bytes this device holds of `sealed` in any place: what spares the engine its
    /// download (the record's place is checked when the record opens, ``plainBytes(of:field:record:in:)``).
    func plainBytes(of sealed: Asset) throws -> ExternalData? {
        try Row.fetchOne(
            cachedStatement(sql: "SELECT checksum, size FROM cloudstore_mirror_sealed_asset WHERE sealed_checksum = ? AND sealed_size = ? LIMIT 1"),
            arguments: [sealed.fileChecksum, sealed.size]
        ).map { ExternalData(checksum: $0[0], size: $0[1]) }
    }

    /// Forgets the sealed assets of record `recordName` (in every zone: the record is forgotten).
    func deleteSealedAssets(of recordName: String) throws {
        try cachedStatement(sql: "DELETE FROM cloudstore_mirror_sealed_asset WHERE record_name = ?").execute(arguments: [recordName])
    }

    /// Forgets the sealed assets of the records of `zone` (of every zone when nil), with its
    /// records' metadata.
    func deleteSealedAssets(in zone: MirrorZone.Key?) throws {
        guard let zone else { return try execute(sql: "DELETE FROM cloudstore_mirror_sealed_asset") }
        try execute(
            sql: "DELETE FROM cloudstore_mirror_sealed_asset WHERE zone_name = ? AND zone_owner = ?", arguments: [zone.name ?? "", zone.owner ?? ""])
    }
}
