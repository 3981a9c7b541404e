import CloudStoreLogging
import CloudStoreWire
import Foundation
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
        } catch {
            throw await settle(error, of: .send)
        }
        do {
            try await checkAccount()
            let start = clock.now
            tokensToSend = [:]
            let pendingAtStart = state.withStorage { $0.recordChanges.count + $0.databaseChanges.count }
            logger.notice("Sending changes", metadata: ["reason": "\(context.reason)", "count": "\(pendingAtStart)"])
            emit(.willSendChanges(Event.WillSendChanges(context: context)))
            let end = try await sendPass(context)
            emit(.didSendChanges(Event.DidSendChanges(context: context)))
            emitStateUpdateIfNeeded()
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
            let settled = await settle(error, of: .send)
            emit(.didSendChanges(Event.DidSendChanges(context: context, error: error)))
            throw settled
        }
    }

    /// A batch the delegate handed out, ready to send.
    struct PreparedBatch: Sendable {
        var batch: RecordZoneChangeBatch
        /// The pending changes' revisions when the batch was asked for: a change the app adds
        /// again after that stays pending once this one is acknowledged.
        var revisions: [RecordID: UInt64]
        /// The batch's requests, encoded as it was prepared; nil when it has assets to upload
        /// first (the records then carry the uploads' receipts).
        var plan: RecordBatchPlan?
        /// Whether the delegate was asked for changes it tracks itself
        /// (``State/hasPendingUntrackedChanges``): if the batch does not settle, they stay its to send.
        var holdsUntrackedChanges = false

        var recordIDs: Set<RecordID> { Set(batch.recordsToSave.map(\.recordID) + batch.recordIDsToDelete) }
    }

    /// Sends batches until the delegate has none or nothing in scope is pending. While a batch's
    /// requests are in flight, the next batch is asked for and encoded (unless the delegate said
    /// the batch in flight was all it had), the records in flight skipped
    /// (``SendChangesContext/recordIDsToSkip``), and once the server answered a batch, the next
    /// one goes out while that answer is handed to the delegate: at most two batches are between
    /// the delegate and the server, never one record in both. The delegate is never called while
    /// it handles an event, and each batch's ``Event/sentRecordZoneChanges(_:)`` reaches it before
    /// it is asked for another batch (the last batch's answer comes with ``Event/didSendChanges(_:)``).
    /// A prepared batch is not sent, and the delegate is asked again, when the batch in flight
    /// failed or found its zone missing or zone changes wait to go first; a batch that went out is
    /// always answered to the delegate, also when the send then stops on an error or a
    /// cancellation.
    ///
    /// The delegate's own changes (``State/hasPendingUntrackedChanges``) are asked for while the
    /// flag is set: it is cleared before each question, set again when the answer says more is
    /// pending (``RecordZoneChangeBatch/hasMorePendingChanges``), and set again, without
    /// scheduling anything, when a batch handed out does not settle (a retry, a failure, a batch
    /// prepared and not sent): its changes are still the delegate's to send in a later pass.
    private func sendPass(_ context: SendChangesContext) async throws -> SendPassEnd {
        let scope = context.options.scope
        var attempts: [RecordID: Int] = [:]
        var retryLater: [RecordID: ServerError] = [:]
        var prepared: PreparedBatch?
        /// The records of batches of the delegate's own changes handed out in this send.
        var untrackedRecordIDs: Set<RecordID> = []
        /// The batch that went out while the previous batch's answer was handed to the delegate.
        var sentEarly: (batch: PreparedBatch, sending: Task<(RecordSendOutcome?, (any Error)?), Never>)?
        while true {
            let current: PreparedBatch
            let sending: Task<(RecordSendOutcome?, (any Error)?), Never>
            if let early = sentEarly {
                (current, sending) = early
                sentEarly = nil
            } else {
                if Task.isCancelled { throw SyncEngineError.cancelled }
                if let dropped = prepared, zoneChangesWait(in: scope) {
                    prepared = nil
                    keepUntrackedChangesPending(of: dropped)
                }
                try await sendDatabaseChanges(in: scope)

                let excluded = Self.excluded(attempts, retryLater)
                let (pending, untracked) = state.withStorage { storage in
                    (storage.recordChanges.changes.filter { scope.contains($0) }, storage.hasPendingUntrackedChanges)
                }
                // Changes the delegate tracks itself that wait for a retry are as stuck as tracked
                // ones, and stay its to send when the engine retries.
                let untrackedStuck = !excluded.isDisjoint(with: untrackedRecordIDs)
                let stuck = pending.contains { excluded.contains(normalized($0.recordID)) } || untrackedStuck
                func end() -> SendPassEnd {
                    guard stuck else { return .done }
                    if untrackedStuck { state.withStorage { $0.hasPendingUntrackedChanges = true } }
                    return .stalled(retryAfter: retryLater.values.compactMap(\.retryAfter).max())
                }
                if let next = prepared {
                    current = next
                    prepared = nil
                } else {
                    let sendable = pending.contains { !excluded.contains(normalized($0.recordID)) }
                    guard sendable || untracked else { return end() }
                    guard let delegate else { throw SyncEngineError.delegateReleased }
                    guard let next = await prepareBatch(context, delegate: delegate, excluding: excluded) else {
                        // Zone changes the delegate asked for while it answered go first.
                        if zoneChangesWait(in: scope) { continue }
                        return end()
                    }
                    if zoneChangesWait(in: scope) {
                        prepared = next
                        continue
                    }
                    current = next
                }
                if current.holdsUntrackedChanges { untrackedRecordIDs.formUnion(current.recordIDs) }
                sending = startSending(current, attempts: &attempts)
            }

            var next: PreparedBatch?
            if !Task.isCancelled {
                let skipping = Self.excluded(attempts, retryLater).union(current.recordIDs)
                let (untrackedNow, sendableNow) = state.withStorage { storage in
                    (
                        storage.hasPendingUntrackedChanges,
                        storage.recordChanges.changes.contains { scope.contains($0) && !skipping.contains(normalized($0.recordID)) }
                    )
                }
                if (sendableNow || untrackedNow), let delegate {
                    next = await prepareBatch(context, delegate: delegate, excluding: skipping)
                }
            }
            let (outcome, failure) = await withTaskCancellationHandler {
                await sending.value
            } onCancel: {
                sending.cancel()
            }
            let zoneMissing = outcome?.failedRecordSaves.contains(where: { $0.error.code == .zoneNotFound }) == true
            if zoneMissing, let dropped = next {
                // The delegate may make the zone again and queue its records anew.
                next = nil
                keepUntrackedChangesPending(of: dropped)
            }
            if let batch = next, failure == nil, !Task.isCancelled, !zoneChangesWait(in: scope) {
                if batch.holdsUntrackedChanges { untrackedRecordIDs.formUnion(batch.recordIDs) }
                sentEarly = (batch, startSending(batch, attempts: &attempts))
                next = nil
            }
            if let outcome {
                // The answer goes to the delegate at once while a batch travels (both overlap),
                // or when it has failures the delegate may resolve and send again in this send;
                // otherwise it waits for the send's next events.
                let failed = !outcome.failedRecordSaves.isEmpty || !outcome.failedRecordDeletes.isEmpty
                await apply(outcome, revisions: current.revisions, deliverNow: sentEarly != nil || failed)
                // The delegate may keep a change it tracks itself pending after its failure (a
                // merge to send, a retry): it is asked again, within this send's attempts.
                if failed { keepUntrackedChangesPending(of: current) }
                assetReceipts.remove(
                    outcome.savedRecords.map(\.recordID)
                        + outcome.failedRecordSaves.filter { $0.error.code == .badRequest }.map(\.record.recordID))
            }
            if let failure {
                keepUntrackedChangesPending(of: current)
                if let dropped = next { keepUntrackedChangesPending(of: dropped) }
                throw failure
            }
            retryLater.merge(outcome?.retrying ?? [:]) { _, new in new }
            prepared = next
        }
    }

    /// Notes that the delegate still has changes of its own to send, without scheduling a send:
    /// a batch of them it handed out did not settle, and goes again when the scheduler retries.
    private func keepUntrackedChangesPending(of batch: PreparedBatch) {
        guard batch.holdsUntrackedChanges else { return }
        state.withStorage { $0.hasPendingUntrackedChanges = true }
    }

    /// Whether zone changes in `scope` wait to be sent: they go before any more record batches.
    private func zoneChangesWait(in scope: SendChangesOptions.Scope) -> Bool {
        state.withStorage { $0.databaseChanges.changes.contains { scope.contains($0) } }
    }

    /// The records this send sends no more: those sent `maxAttemptsPerPass` times, and those
    /// waiting for a retry after an error.
    private static func excluded(_ attempts: [RecordID: Int], _ retryLater: [RecordID: ServerError]) -> Set<RecordID> {
        Set(attempts.filter { $0.value >= maxAttemptsPerPass }.keys).union(retryLater.keys)
    }

    /// Starts sending a batch, counting the attempt for each of its records.
    private func startSending(
        _ batch: PreparedBatch, attempts: inout [RecordID: Int]
    ) -> Task<(RecordSendOutcome?, (any Error)?), Never> {
        for recordID in batch.recordIDs {
            attempts[recordID, default: 0] += 1
        }
        return Task { await self.transmit(batch) }
    }

    /// Asks the delegate for its next batch with `excluded` left out (``SendChangesContext/recordIDsToSkip``),
    /// drops what it holds of them anyway, and encodes its requests unless assets wait to be uploaded.
    private func prepareBatch(
        _ context: SendChangesContext, delegate: any SyncEngineDelegate, excluding excluded: Set<RecordID>
    ) async -> PreparedBatch? {
        // The delegate has every answer before it is asked for more.
        await deliverEvents()
        // Cleared before the question: changes the delegate learns of after it answered set it again.
        let (revisions, untracked) = state.withStorage { storage in
            defer { storage.hasPendingUntrackedChanges = false }
            return (storage.recordChanges.revisionsByKey, storage.hasPendingUntrackedChanges)
        }
        var batchContext = context
        batchContext.limits = BatchLimits(
            maxCount: configuration.maxBatchCount, maxBytes: configuration.maxBatchBytes, excludedRecordIDs: excluded)
        delegateCalls.record()
        let proposed = await delegate.nextRecordZoneChangeBatch(batchContext, syncEngine: self)
        if untracked, proposed?.hasMorePendingChanges == true { state.withStorage { $0.hasPendingUntrackedChanges = true } }
        guard var batch = proposed else { return nil }
        batch.keepSaves(normalizing: normalized, excluding: excluded)
        batch.recordIDsToDelete = batch.recordIDsToDelete.map(normalized).filter { !excluded.contains($0) }
        batch.recordChangeTagsToDelete = Dictionary(batch.recordChangeTagsToDelete.map { (normalized($0.key), $0.value) }) { first, _ in first }
        guard !batch.isEmpty else { return nil }
        let plan =
            batch.recordsToSave.contains(where: \.hasAssets)
            ? nil : RecordBatchPlan(batch, maxCount: configuration.maxBatchCount, maxBytes: configuration.maxBatchBytes)
        return PreparedBatch(batch: batch, revisions: revisions, plan: plan, holdsUntrackedChanges: untracked)
    }

    /// Sends one batch (its new assets uploaded first, then one or more requests) and looks up
    /// server copies for conflicts that came without one. Answers what was settled (nil when the
    /// assets' upload failed as a whole: nothing was sent) and the failure that stopped it: what
    /// was settled before a request failed is still answered.
    private func transmit(_ prepared: PreparedBatch) async -> (RecordSendOutcome?, (any Error)?) {
        var outcome = RecordSendOutcome()
        let plan: RecordBatchPlan
        if let encoded = prepared.plan {
            plan = encoded
        } else {
            var batch = prepared.batch
            do {
                batch.recordsToSave = try await prepareAssets(of: batch.recordsToSave, into: &outcome)
            } catch {
                return (nil, error)
            }
            plan = RecordBatchPlan(batch, maxCount: configuration.maxBatchCount, maxBytes: configuration.maxBatchBytes)
        }
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
        return (outcome, failure)
    }

    /// Sends one `records/modify` request. `LIMIT_EXCEEDED` or `BAD_REQUEST` for the whole request
    /// splits it in half and sends both halves, down to single records, which then fail on their own.
    ///
    /// The request carries the zone's sync token, and an answer with a token after it
    /// (``RecordsResponse/syncToken``) is what the next request carries and what the state takes
    /// once the delegate has the answers (``apply(_:revisions:)``): a device does not fetch its
    /// own writes back.
    private func send(_ request: RecordBatchPlan.Request, into outcome: inout RecordSendOutcome) async throws {
        var request = request
        let zoneID = normalized(request.zoneID)
        request.syncToken = tokensToSend[zoneID] ?? state.withStorage { $0.zoneTokens[zoneID] }
        logger.info(
            "Sending record changes",
            metadata: ["zone": "\(request.zoneID)", "count": "\(request.operations.count)", "atomic": "\(request.atomic)"])
        let response: RecordsResponse
        do {
            response = try await database.modifyRecords(request.wireRequest, encodedAs: request.body)
        } catch let error as CloudError {
            // A request that failed may have been written all the same.
            tokensToSend[zoneID] = .some(nil)
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
        tokensToSend[zoneID] = .some(response.syncToken)
        outcome.advanceToken(of: zoneID, sent: request.syncToken, answered: response.syncToken)
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
                    let result = response.records.first { ($0.value?.recordName ?? $0.error?.recordName) == name }
                    outcome.resolveConflict(conflict, lookup: result ?? .error(ServerError(.notFound, recordName: name)))
                    unresolved.removeAll { $0.record.recordID == conflict.record.recordID }
                }
            }
        }
    }

    /// The failed saves with the assets of their server records downloaded, as a fetched page's
    /// (``fetchAssets(of:in:)``): a conflict merges with the server's copy, bytes included. A
    /// download that fails leaves the asset without a `fileURL` (the record's next fetch brings it).
    private func fetchServerRecordAssets(of failures: [Event.SentRecordZoneChanges.FailedRecordSave]) async -> ([Event.SentRecordZoneChanges.FailedRecordSave], [URL]) {
        guard configuration.assetDirectory != nil,
            failures.contains(where: { $0.error.serverRecord?.assetFields.contains { $0.1.downloadURL != nil } == true })
        else { return (failures, []) }
        var downloaded: [URL] = []
        var delivered = failures
        for index in delivered.indices {
            guard let server = delivered[index].error.serverRecord,
                let fetched = try? await fetchAssets(of: [server], in: server.recordID.zoneID)
            else { continue }
            downloaded += fetched.downloaded
            var error = delivered[index].error
            error.serverRecord = fetched.records.first
            delivered[index] = Event.SentRecordZoneChanges.FailedRecordSave(record: delivered[index].record, error: error)
        }
        return (delivered, downloaded)
    }

    /// Removes the settled record changes (unless the app added them again meanwhile) and reports
    /// them, with the changes that stay pending for a retry: to the delegate at once with
    /// `deliverNow` (or when it carries server copies' downloaded assets), otherwise with the
    /// send's next events.
    private func apply(_ outcome: RecordSendOutcome, revisions: [RecordID: UInt64], deliverNow: Bool) async {
        let settled: [PendingRecordZoneChange] =
            outcome.savedRecords.map { .saveRecord($0.recordID) }
            + outcome.failedRecordSaves.map { .saveRecord($0.record.recordID) }
            + outcome.deletedRecordIDs.map { .deleteRecord($0) } + outcome.failedRecordDeletes.keys.map { .deleteRecord($0) }
        state.withStorage { storage in
            let pending = Dictionary(
                storage.recordChanges.changes.map { (normalized($0), $0) }, uniquingKeysWith: { first, _ in first })
            storage.recordChanges.removeAcknowledged(settled.compactMap { pending[$0] }, revisions: revisions)
            // The delegate gets the answers with the state below: the token moves past the writes
            // only with them, and only while nothing else is owed to the delegate (a fetch that
            // broke off, from scratch or from a page's token, still brings every record).
            guard outcome.isSettled else { return }
            for (zoneID, advance) in outcome.tokenAdvances where storage.acceptsTokenAfterSend(from: advance.from, in: zoneID) {
                storage.setZoneToken(advance.to, for: zoneID)
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
        let retrying = outcome.retrying
        guard outcome.isSettled || !retrying.isEmpty else { return }
        let (failedRecordSaves, downloaded) = await fetchServerRecordAssets(of: outcome.failedRecordSaves)
        defer { removeDownloadedAssets(downloaded) }
        let (serialization, version) = state.withStorage { ($0.serialization, $0.version) }
        queue(
            .sentRecordZoneChanges(
                Event.SentRecordZoneChanges(
                    savedRecords: outcome.savedRecords, failedRecordSaves: failedRecordSaves,
                    deletedRecordIDs: outcome.deletedRecordIDs, failedRecordDeletes: outcome.failedRecordDeletes,
                    retryingRecordChanges: retrying, stateSerialization: serialization)),
            carryingStateAt: version)
        if deliverNow || !downloaded.isEmpty { await deliverEvents() }
    }
}
