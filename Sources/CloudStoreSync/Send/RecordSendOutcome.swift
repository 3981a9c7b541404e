import CloudStoreWire

/// What became of the record changes of a send, decided from the server's answers per
/// WireProtocol.md §4, without I/O.
///
/// - saved and deleted records are acknowledged: the engine removes them from pending;
/// - failed saves and deletes are final: removed from pending and reported, the delegate decides;
/// - retained changes stay pending for a retry: transient errors, `QUOTA_EXCEEDED`, `ATOMIC_ERROR`;
/// - conflicts without the server's copy wait for a `records/lookup` (``resolveConflict(_:lookup:)``).
///
/// A `CONFLICT` or `EXISTS` whose server copy already holds every value that was sent counts as
/// saved: that is what a retry looks like after the response to the first attempt was lost.
/// Assets are compared by checksum and size (the sent one carries a receipt, the server's a
/// download URL).
struct RecordSendOutcome: Sendable {
    typealias FailedRecordSave = SyncEngine.Event.SentRecordZoneChanges.FailedRecordSave

    var savedRecords: [Record] = []
    var failedRecordSaves: [FailedRecordSave] = []
    var deletedRecordIDs: [RecordID] = []
    var failedRecordDeletes: [RecordID: ServerError] = [:]
    /// Changes that stay pending, with the error that kept them.
    var retained: [RecordID: ServerError] = [:]
    /// `CONFLICT`/`EXISTS` saves whose error came without `serverRecord`.
    var conflictsAwaitingServerRecord: [FailedRecordSave] = []
    /// Per zone, how far the answers brought the client: the token the first request carried and
    /// the token the last answer gave (``RecordsResponse/syncToken``), through requests each of
    /// which carried the token the one before it was given.
    var tokenAdvances: [ZoneID: TokenAdvance] = [:]

    /// A zone's token before and after requests of this send: the server answered `to` only
    /// because nothing but those requests changed the zone after `from` (nil: the client held no
    /// token, and the zone was never written before them).
    struct TokenAdvance: Hashable, Sendable {
        var from: String?
        var to: String
    }

    /// Whether anything was acknowledged or failed for good.
    var isSettled: Bool {
        !savedRecords.isEmpty || !failedRecordSaves.isEmpty || !deletedRecordIDs.isEmpty
            || !failedRecordDeletes.isEmpty
    }

    /// The longest `retryAfter` among retained changes.
    var retryAfter: Double? { retained.values.compactMap(\.retryAfter).max() }

    /// The retained changes that wait for a retry later, with the error that kept each: all but
    /// the `ATOMIC_ERROR`s, which went down with another record of their atomic request and go
    /// again once it is handled. What ``SyncEngine/Event/SentRecordZoneChanges/retryingRecordChanges`` reports.
    var retrying: [RecordID: ServerError] { retained.filter { $0.value.code != .atomicError } }

    /// Whether a retained change needs a retry later (rather than once its atomic culprit is handled).
    var needsRetry: Bool { !retrying.isEmpty }

    /// Codes whose change stays pending: the same request may succeed later.
    static func keepsPending(_ code: ServerErrorCode) -> Bool {
        code.isTransient || code == .quotaExceeded || code == .atomicError
    }

    /// Takes the server's per-operation results for a request.
    mutating func absorb(_ response: RecordsResponse, for request: RecordBatchPlan.Request) throws(CloudError) {
        guard response.records.count == request.operations.count else {
            throw CloudError(
                .invalidResponse,
                message: "records/modify for zone \(request.zoneID) answered \(response.records.count) results "
                    + "for \(request.operations.count) operations")
        }
        for (operation, result) in zip(request.operations, response.records) {
            absorb(result, for: operation, in: request.zoneID)
        }
    }

    /// Extends the zone's ``TokenAdvance`` by a request that carried `sent` (nil: none) and was
    /// answered `answered`; a request that does not continue it (no token answered, or `sent` is
    /// not where the advance got to) leaves it as it is.
    mutating func advanceToken(of zoneID: ZoneID, sent: String?, answered: String?) {
        guard let answered else { return }
        if let advance = tokenAdvances[zoneID] {
            if advance.to == sent { tokenAdvances[zoneID]?.to = answered }
        } else {
            tokenAdvances[zoneID] = TokenAdvance(from: sent, to: answered)
        }
    }

    /// Gives every operation of a request the request-level error it failed with.
    mutating func absorb(requestError error: ServerError, for request: RecordBatchPlan.Request) {
        for operation in request.operations {
            var itemError = error
            itemError.recordName = operation.record.recordName
            absorb(.error(itemError), for: operation, in: request.zoneID)
        }
    }

    mutating func absorb(_ result: RecordResult, for operation: RecordsModifyRequest.Operation, in zoneID: ZoneID) {
        let recordID = RecordID(recordName: operation.record.recordName, zoneID: zoneID)
        let isDelete = operation.operationType.isDelete
        switch result {
        case .value(var record):
            if isDelete {
                deletedRecordIDs.append(recordID)
            } else {
                record.zoneID = zoneID
                record.recordType = record.recordType ?? operation.record.recordType
                savedRecords.append(record)
            }
        case .error(let error) where Self.keepsPending(error.code):
            retained[recordID] = error
        case .error(let error) where isDelete:
            if error.code == .notFound || error.code == .zoneNotFound {
                deletedRecordIDs.append(recordID)
            } else {
                failedRecordDeletes[recordID] = error
            }
        case .error(var error):
            var sent = operation.record
            sent.zoneID = zoneID
            guard error.code == .conflict || error.code == .exists else {
                failedRecordSaves.append(FailedRecordSave(record: sent, error: error))
                return
            }
            guard var serverRecord = error.serverRecord else {
                conflictsAwaitingServerRecord.append(FailedRecordSave(record: sent, error: error))
                return
            }
            serverRecord.zoneID = zoneID
            error.serverRecord = serverRecord
            settleConflict(FailedRecordSave(record: sent, error: error), operation: operation.operationType)
        }
    }

    /// Settles a conflict that waited for its server copy, with the result of looking it up; nil
    /// when the lookup failed as a whole (the change then stays pending).
    mutating func resolveConflict(_ conflict: FailedRecordSave, lookup: RecordResult?) {
        let recordID = conflict.record.recordID
        switch lookup {
        case .value(var serverRecord)?:
            serverRecord.zoneID = recordID.zoneID
            var error = conflict.error
            error.serverRecord = serverRecord
            let operation: RecordsModifyRequest.OperationType = conflict.record.recordChangeTag == nil ? .create : .update
            settleConflict(FailedRecordSave(record: conflict.record, error: error), operation: operation)
        case .error(let error)? where error.code == .notFound:
            failedRecordSaves.append(FailedRecordSave(record: conflict.record, error: error))
        case .error(let error)?:
            retained[recordID] = error
        case nil:
            retained[recordID] = conflict.error
        }
    }

    private mutating func settleConflict(_ conflict: FailedRecordSave, operation: RecordsModifyRequest.OperationType) {
        guard let serverRecord = conflict.error.serverRecord else {
            failedRecordSaves.append(conflict)
            return
        }
        if Self.serverHolds(conflict.record, serverRecord, exactly: operation == .create) {
            savedRecords.append(serverRecord)
        } else {
            failedRecordSaves.append(conflict)
        }
    }

    /// Whether the server's copy holds every value that was sent (for a create: exactly those),
    /// and for a share record, the access it grants: the same participants with the same
    /// permissions, and the same public permission. A share change that conflicts is not a save
    /// that already happened unless the server's share is the one sent.
    static func serverHolds(_ sent: Record, _ server: Record, exactly: Bool) -> Bool {
        func present(_ fields: [String: FieldValue]) -> [String: FieldValue] {
            fields.filter { !$0.value.isNull }.mapValues(\.comparingAssetsByContent)
        }
        if let share = sent.share, !(server.share.map { $0.grantsTheAccess(of: share) } ?? false) { return false }
        let sentFields = present(sent.fields)
        let serverFields = present(server.fields)
        if exactly { return sentFields == serverFields && sent.recordType == server.recordType }
        return sent.fields.allSatisfy { name, value in
            value.isNull ? serverFields[name] == nil : serverFields[name] == value.comparingAssetsByContent
        }
    }
}
