import CloudStoreSync
import Foundation

/// The engines' questions about uploads: the next batch, and the store's own file of a fetched
/// asset's bytes.
extension CloudMirror {
    func nextRecordZoneChangeBatch(
        _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.RecordZoneChangeBatch? {
        await nextBatch(context, for: syncEngine)
    }

    /// The next pending uploads through the engine's database from the ledger, in upload order,
    /// without the records the engine skips in this pass, in one transaction that marks each
    /// record it hands out as possibly on the server; the batch says whether more are pending
    /// after it (``SyncEngine/RecordZoneChangeBatch/hasMorePendingChanges``). Uploads into zones
    /// a decision of the app holds wait, and so do creates handed out before and never answered,
    /// until a fetch covers them (``UnheardCreates``).
    func nextBatch(_ context: SyncEngine.SendChangesContext, for engine: any MirrorEngine) async -> SyncEngine.RecordZoneChangeBatch? {
        let scope = engine.scope
        // An engine stopped for a decision about local data sends nothing more.
        guard let session = engines[scope], session.engine === engine else { return nil }
        // Creates in flight are skipped anyway (the engine prepares the next batch while one is in
        // flight); only those handed out and never answered wait for a fetch.
        let inFlightNames = Set(context.recordIDsToSkip.map(\.recordName))
        let held = session.unheardCreates.waiting.subtracting(inFlightNames)
        if !held.isEmpty { requestFetch(scope) }
        // The server enforces unique keys it was given before the first record that has one.
        if !uniquenessDeclared, await !declareUniquenessConstraints(engine) {
            // Asked again after the engine's back-off.
            engine.state.hasPendingUntrackedChanges = true
            return nil
        }
        let (limit, skipping) = (context.maxRecordCount, context.recordIDsToSkip)
        // Uploads handed out before and not answered go again: their sealed assets serve again.
        let sealedBefore = session.inFlight.compactMapValues { $0.sealedFiles.isEmpty ? nil : $0.sealed }
        let confirms = !session.accountUnconfirmed
        let prepared: PreparedUploads
        do {
            prepared = try await perform { write, effects in
                let holding = try write.ledger.heldZones(confirmsAccountDecision: confirms)
                return try write.prepareUploads(
                    scope: scope, limit: limit, skipping: skipping, holding: held, holdingZones: holding, sealedBefore: sealedBefore,
                    &effects)
            }
        } catch {
            logger.error("reading the pending uploads failed", metadata: ["error": "\(error)"])
            engine.state.hasPendingUntrackedChanges = true
            return nil
        }
        let uploads = prepared.uploads.filter { context.options.scope.contains($0.change) }
        guard !uploads.isEmpty else { return nil }
        let records = Dictionary(uploads.compactMap { upload in upload.record.map { ($0.recordID, $0) } }) { first, _ in first }
        var batch = await SyncEngine.RecordZoneChangeBatch(pendingChanges: uploads.map(\.change), context: context) { recordID in
            records[recordID]
        }
        // Uploads the batch left out (it stops at the engine's size limit) are still to send.
        let handedOutCount = (batch?.recordsToSave.count ?? 0) + (batch?.recordIDsToDelete.count ?? 0)
        batch?.hasMorePendingChanges = prepared.hasMore || handedOutCount < uploads.count
        // A delete of a version this device has goes for that version only: another device's edit
        // since comes back as a conflict instead of being deleted unseen.
        for upload in uploads {
            if let tag = upload.deleteChangeTag { batch?.recordChangeTagsToDelete[upload.change.recordID] = tag }
        }
        handOut(uploads, in: batch, scope: scope)
        logger.info(
            "uploads handed out", metadata: ["database": "\(scope.rawValue)", "count": "\(handedOutCount)"])
        return batch
    }

    /// Notes what the batch holds (it stops at the engine's size limit) as in flight, until the
    /// server answers; removes the files sealed for the uploads it left out, and those of a record
    /// handed out again that it replaces.
    private func handOut(_ uploads: [PreparedUpload], in batch: SyncEngine.RecordZoneChangeBatch?, scope: DatabaseScope) {
        guard var session = engines[scope] else { return }
        let sent = Dictionary(uploads.map { ($0.change.recordID, $0.sent) }) { first, _ in first }
        let handedOut = Set((batch?.recordsToSave ?? []).map(\.recordID))
        Self.removeSealedFiles(uploads.filter { !handedOut.contains($0.change.recordID) }.flatMap(\.sent.sealedFiles))
        for record in batch?.recordsToSave ?? [] {
            if let previous = session.inFlight[record.recordID]?.sealedFiles, previous != sent[record.recordID]?.sealedFiles {
                Self.removeSealedFiles(previous)
            }
            session.inFlight[record.recordID] = sent[record.recordID]
            if record.recordChangeTag == nil, !ShareMetadata.isShareType(record.recordType) {
                session.unheardCreates.handedOut(record.recordName, in: record.recordID.zoneID)
            }
        }
        for recordID in batch?.recordIDsToDelete ?? [] { session.inFlight[recordID] = sent[recordID] }
        engines[scope] = session
    }

    /// The store's own file of an asset, when it holds those bytes already: the engine does not
    /// download them again. For a sealed asset (an encrypted attribute's) this device sealed or
    /// opened before, the file of its plain bytes: the import takes them as they are when the
    /// record's field names that sealed file (``Database/plainBytes(of:field:record:in:)``), and
    /// fails to open them as sealed anywhere else.
    nonisolated func existingFile(for asset: Asset, syncEngine: SyncEngine) async -> URL? {
        if let file = store.externalDataURL(for: ExternalData(checksum: asset.fileChecksum, size: asset.size)) { return file }
        guard setup.schema.entities.contains(where: { $0.attributes.contains(where: RecordSealing.sealsFile) }),
            let plain = try? await store.read({ try $0.db.plainBytes(of: asset) })
        else { return nil }
        return store.externalDataURL(for: plain)
    }
}
