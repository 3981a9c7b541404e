import CloudStoreLogging
import CloudStoreWire
import Logging

extension SyncEngine {
    /// How often one record may be sent within one send: enough for a conflict or a missing zone
    /// to be resolved by the delegate and sent again, not enough to loop.
    static let maxAttemptsPerPass = 3

    /// How a send ended.
    enum SendPassEnd: Sendable {
        /// Nothing in scope is pending, or the delegate had nothing more to send.
        case done
        /// Changes are still pending that need a later retry (transient errors, or records that
        /// failed again after the delegate resolved them).
        case stalled(retryAfter: Double?)
    }

    /// One send operation: account check, `willSendChanges`, zone changes, record batches until
    /// the delegate is done, `didSendChanges`. The caller holds the operation turn.
    func send(_ context: SendChangesContext) async throws {
        do {
            try checkCanOperate()
            try await checkAccount()
            let start = clock.now
            let pendingAtStart = state.withStorage { $0.recordChanges.count + $0.databaseChanges.count }
            logger.notice("Sending changes", metadata: ["reason": "\(context.reason)", "count": "\(pendingAtStart)"])
            await emit(.willSendChanges(Event.WillSendChanges(context: context)))
            let end: SendPassEnd
            do {
                end = try await sendPass(context)
            } catch {
                await emit(.didSendChanges(Event.DidSendChanges(context: context)))
                throw error
            }
            await emit(.didSendChanges(Event.DidSendChanges(context: context)))
            await emitStateUpdateIfNeeded()
            let pendingAfter = state.withStorage { $0.recordChanges.count + $0.databaseChanges.count }
            logger.notice(
                "Sent changes",
                metadata: ["pending": "\(pendingAfter)", "duration": "\(LogFormat.duration(clock.now - start))", "end": "\(end)"])
            switch end {
            case .done:
                scheduler.succeeded(.send, at: clock.now)
            case .stalled(let retryAfter):
                scheduler.failed(
                    .send, at: clock.now, cause: .server, retryAfter: retryAfter.map { .seconds($0) },
                    jitter: configuration.jitter())
            }
        } catch {
            throw await settle(error, of: .send)
        }
    }

    private func sendPass(_ context: SendChangesContext) async throws -> SendPassEnd {
        let scope = context.options.scope
        var attempts: [RecordID: Int] = [:]
        var retryLater: [RecordID: ServerError] = [:]
        while true {
            if Task.isCancelled { throw SyncEngineError.cancelled }
            try await sendDatabaseChanges(in: scope)

            let capped = Set(attempts.filter { $0.value >= Self.maxAttemptsPerPass }.keys)
            let excluded = capped.union(retryLater.keys)
            let (pending, revisions, untracked) = state.withStorage { storage in
                (
                    storage.recordChanges.changes.filter { scope.contains($0) },
                    storage.recordChanges.revisionsByKey, storage.hasPendingUntrackedChanges
                )
            }
            let sendable = pending.filter { !excluded.contains(normalized($0.recordID)) }
            // Changes the delegate tracks itself that wait for a retry are as stuck as tracked ones.
            let stuck = !pending.filter { excluded.contains(normalized($0.recordID)) }.isEmpty || (untracked && !excluded.isEmpty)
            func end() -> SendPassEnd {
                guard stuck else { return .done }
                return .stalled(retryAfter: retryLater.values.compactMap(\.retryAfter).max())
            }
            guard !sendable.isEmpty || untracked else { return end() }
            guard let delegate else { throw SyncEngineError.delegateReleased }

            let limits = BatchLimits(
                maxCount: configuration.maxBatchCount, maxBytes: configuration.maxBatchBytes, excludedRecordIDs: excluded)
            var batchContext = context
            batchContext.recordIDsToSkip = excluded
            batchContext.maxRecordCount = configuration.maxBatchCount
            let proposed = await BatchLimits.$current.withValue(limits) {
                await delegate.nextRecordZoneChangeBatch(batchContext, syncEngine: self)
            }
            guard var batch = proposed else { return end() }
            batch.recordsToSave = batch.recordsToSave.map(normalized).filter { !excluded.contains($0.recordID) }
            batch.recordIDsToDelete = batch.recordIDsToDelete.map(normalized).filter { !excluded.contains($0) }
            batch.recordChangeTagsToDelete = Dictionary(batch.recordChangeTagsToDelete.map { (normalized($0.key), $0.value) }) { first, _ in first }
            guard !batch.isEmpty else { return end() }
            for recordID in batch.recordsToSave.map(\.recordID) + batch.recordIDsToDelete {
                attempts[recordID, default: 0] += 1
            }

            let outcome = try await sendBatch(batch, revisions: revisions)
            for (recordID, error) in outcome.retained where error.code != .atomicError {
                retryLater[recordID] = error
            }
        }
    }

    /// Sends one batch (its new assets uploaded first, then one or more requests), looks up server
    /// copies for conflicts that came without one, removes what was settled from the pending
    /// changes and reports it. On a
    /// request failure, what was settled before it is still removed and reported, then it throws.
    private func sendBatch(_ batch: RecordZoneChangeBatch, revisions: [RecordID: UInt64]) async throws
        -> RecordSendOutcome
    {
        var outcome = RecordSendOutcome()
        var batch = batch
        batch.recordsToSave = try await prepareAssets(of: batch.recordsToSave, into: &outcome)
        let plan = RecordBatchPlan(batch, maxCount: configuration.maxBatchCount, maxBytes: configuration.maxBatchBytes)
        var failure: (any Error)?
        for request in plan.requests {
            do {
                try await send(request, into: &outcome)
            } catch {
                failure = error
                break
            }
        }
        do {
            if failure == nil { try await lookUpServerRecords(for: &outcome) }
        } catch {
            failure = error
        }
        for conflict in outcome.conflictsAwaitingServerRecord { outcome.resolveConflict(conflict, lookup: nil) }
        outcome.conflictsAwaitingServerRecord = []
        await apply(outcome, revisions: revisions)
        assetReceipts.remove(
            outcome.savedRecords.map(\.recordID)
                + outcome.failedRecordSaves.filter { $0.error.code == .badRequest }.map(\.record.recordID))
        if let failure { throw failure }
        return outcome
    }

    /// Sends one `records/modify` request. `LIMIT_EXCEEDED` or `BAD_REQUEST` for the whole request
    /// splits it in half and sends both halves, down to single records, which then fail on their own.
    private func send(_ request: RecordBatchPlan.Request, into outcome: inout RecordSendOutcome) async throws {
        logger.info(
            "Sending record changes",
            metadata: ["zone": "\(request.zoneID)", "count": "\(request.operations.count)", "atomic": "\(request.atomic)"])
        let response: RecordsResponse
        do {
            response = try await database.modifyRecords(request.wireRequest, encodedAs: request.body)
        } catch let error as CloudError {
            guard let serverError = error.serverError, !error.isAuthenticationFailure,
                !RecordSendOutcome.keepsPending(serverError.code)
            else { throw error }
            let splits = serverError.code == .limitExceeded || serverError.code == .badRequest
            if splits && request.operations.count > 1 {
                logger.info(
                    "Splitting a batch the server refused",
                    metadata: ["zone": "\(request.zoneID)", "count": "\(request.operations.count)", "error": "\(serverError.code)"])
                let (first, second) = request.halves()
                try await send(first, into: &outcome)
                try await send(second, into: &outcome)
            } else {
                outcome.absorb(requestError: serverError, for: request)
            }
            return
        }
        try outcome.absorb(response, for: request)
        for (operation, result) in zip(request.operations, response.records) {
            logger.debug(
                "Record change sent",
                metadata: [
                    "record": "\(operation.record.recordName)", "zone": "\(request.zoneID)",
                    "operation": "\(operation.operationType.rawValue)",
                    "keys": "\(operation.record.fields.keys.sorted())",
                    "result": "\(result.error.map { $0.code.rawValue } ?? "ok")",
                ])
        }
    }

    /// Looks up the server's copy of records whose `CONFLICT` or `EXISTS` came without one (real
    /// CloudKit never sends it).
    private func lookUpServerRecords(for outcome: inout RecordSendOutcome) async throws {
        var unresolved = outcome.conflictsAwaitingServerRecord
        outcome.conflictsAwaitingServerRecord = []
        defer { outcome.conflictsAwaitingServerRecord = unresolved }
        let zoneIDs = unresolved.map(\.record.recordID.zoneID).reduce(into: [ZoneID]()) { zones, zone in
            if !zones.contains(zone) { zones.append(zone) }
        }
        for zoneID in zoneIDs {
            let conflicts = unresolved.filter { $0.record.recordID.zoneID == zoneID }
            for start in stride(from: 0, to: conflicts.count, by: configuration.maxBatchCount) {
                let chunk = Array(conflicts[start..<min(start + configuration.maxBatchCount, conflicts.count)])
                logger.info("Looking up server records for conflicts", metadata: ["zone": "\(zoneID)", "count": "\(chunk.count)"])
                let response = try await database.lookupRecords(
                    RecordsLookupRequest(zoneID: zoneID, recordNames: chunk.map(\.record.recordName)))
                for conflict in chunk {
                    let name = conflict.record.recordName
                    let result = response.records.first { ($0.record?.recordName ?? $0.error?.recordName) == name }
                    outcome.resolveConflict(conflict, lookup: result ?? .error(ServerError(.notFound, recordName: name)))
                    unresolved.removeAll { $0.record.recordID == conflict.record.recordID }
                }
            }
        }
    }

    /// Removes the settled record changes (unless the app added them again meanwhile) and reports them.
    private func apply(_ outcome: RecordSendOutcome, revisions: [RecordID: UInt64]) async {
        let settled: [PendingRecordZoneChange] =
            outcome.savedRecords.map { .saveRecord($0.recordID) }
            + outcome.failedRecordSaves.map { .saveRecord($0.record.recordID) }
            + outcome.deletedRecordIDs.map { .deleteRecord($0) } + outcome.failedRecordDeletes.keys.map { .deleteRecord($0) }
        state.withStorage { storage in
            let pending = Dictionary(
                storage.recordChanges.changes.map { (normalized($0), $0) }, uniquingKeysWith: { first, _ in first })
            if storage.recordChanges.removeAcknowledged(settled.compactMap { pending[$0] }, revisions: revisions) {
                storage.version += 1
            }
        }
        logger.info(
            "Record changes settled",
            metadata: [
                "saved": "\(outcome.savedRecords.count)", "failedSaves": "\(outcome.failedRecordSaves.count)",
                "deleted": "\(outcome.deletedRecordIDs.count)", "failedDeletes": "\(outcome.failedRecordDeletes.count)",
                "retained": "\(outcome.retained.count)",
            ])
        for failure in outcome.failedRecordSaves {
            logger.debug(
                "Record save failed",
                metadata: ["record": "\(failure.record.recordID)", "error": "\(failure.error.code)"])
        }
        guard outcome.isSettled else { return }
        await emit(
            .sentRecordZoneChanges(
                Event.SentRecordZoneChanges(
                    savedRecords: outcome.savedRecords, failedRecordSaves: outcome.failedRecordSaves,
                    deletedRecordIDs: outcome.deletedRecordIDs, failedRecordDeletes: outcome.failedRecordDeletes,
                    stateSerialization: state.serialization)))
        await emitStateUpdateIfNeeded()
    }
}
