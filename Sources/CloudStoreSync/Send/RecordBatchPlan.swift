import CloudStoreWire
import Foundation

/// Turns a batch of record changes into `records/modify` requests: one per zone, split further so
/// that each holds at most `maxCount` operations and about `maxBytes` of encoded operations.
///
/// Saves with a change tag become `update`s, saves without one `create`s, deletes `forceDelete`s.
/// A record named twice in a batch is sent once (the first time), as the server refuses a
/// record name twice in one request.
struct RecordBatchPlan: Sendable {
    struct Request: Sendable {
        var zoneID: ZoneID
        var atomic: Bool
        var operations: [RecordsModifyRequest.Operation]

        var wireRequest: RecordsModifyRequest {
            RecordsModifyRequest(zoneID: zoneID, atomic: atomic, operations: operations)
        }

        /// The request's two halves, for a retry after `LIMIT_EXCEEDED`.
        func halves() -> (Request, Request) {
            let middle = operations.count / 2
            var first = self
            var second = self
            first.operations = Array(operations[..<middle])
            second.operations = Array(operations[middle...])
            return (first, second)
        }
    }

    /// Bytes allowed for the request's envelope (`zoneID`, `atomic`, brackets) beside the operations.
    static let envelopeBytes = 256

    private(set) var requests: [Request] = []

    init(_ batch: SyncEngine.RecordZoneChangeBatch, maxCount: Int, maxBytes: Int) {
        var zoneOrder: [ZoneID] = []
        var operationsByZone: [ZoneID: [RecordsModifyRequest.Operation]] = [:]
        var seen = Set<RecordID>()
        func append(_ operation: RecordsModifyRequest.Operation, _ recordID: RecordID) {
            guard seen.insert(recordID).inserted else { return }
            if operationsByZone[recordID.zoneID] == nil { zoneOrder.append(recordID.zoneID) }
            operationsByZone[recordID.zoneID, default: []].append(operation)
        }
        for record in batch.recordsToSave { append(Self.operation(saving: record), record.recordID) }
        for recordID in batch.recordIDsToDelete { append(Self.operation(deleting: recordID), recordID) }

        let budget = max(1, maxBytes - Self.envelopeBytes)
        for zoneID in zoneOrder {
            var current = Request(zoneID: zoneID, atomic: batch.atomicByZone, operations: [])
            var bytes = 0
            for operation in operationsByZone[zoneID] ?? [] {
                let size = Self.encodedSize(of: operation)
                if !current.operations.isEmpty && (current.operations.count >= maxCount || bytes + size > budget) {
                    requests.append(current)
                    current.operations = []
                    bytes = 0
                }
                current.operations.append(operation)
                bytes += size
            }
            if !current.operations.isEmpty { requests.append(current) }
        }
    }

    /// The operation that saves a record: `update` when it has a change tag, `create` otherwise.
    /// Only the record's identity, type, tag and fields travel, and for a share record what its
    /// owner sets: `publicPermission` and `participants` (the server assigns the rest).
    static func operation(saving record: Record) -> RecordsModifyRequest.Operation {
        let sent = Record(
            recordName: record.recordName, recordType: record.recordType, recordChangeTag: record.recordChangeTag,
            zoneID: record.zoneID, fields: record.fields,
            share: record.share.map { ShareMetadata(publicPermission: $0.publicPermission, participants: $0.participants) })
        return RecordsModifyRequest.Operation(record.recordChangeTag == nil ? .create : .update, sent)
    }

    static func operation(deleting recordID: RecordID) -> RecordsModifyRequest.Operation {
        RecordsModifyRequest.Operation(.forceDelete, Record(recordName: recordID.recordName, zoneID: recordID.zoneID))
    }

    /// The operation's size as JSON, plus one byte for the separating comma.
    static func encodedSize(of operation: RecordsModifyRequest.Operation) -> Int {
        ((try? WireCoding.encode(operation))?.count ?? 0) + 1
    }
}
