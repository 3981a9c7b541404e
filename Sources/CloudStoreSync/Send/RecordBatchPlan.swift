import CloudStoreWire
import Foundation

/// Turns a batch of record changes into `records/modify` requests: one per zone, split further so
/// that each holds at most `maxCount` operations and about `maxBytes` of encoded operations.
///
/// Saves with a change tag become `update`s, saves without one `create`s, deletes `delete`s with
/// the change tag the batch gives (``SyncEngine/RecordZoneChangeBatch/recordChangeTagsToDelete``)
/// or `forceDelete`s.
/// A record named twice in a batch is sent once (the first time), as the server refuses a
/// record name twice in one request.
struct RecordBatchPlan: Sendable {
    struct Request: Sendable {
        var zoneID: ZoneID
        var atomic: Bool
        var operations: [RecordsModifyRequest.Operation]
        /// Each operation's JSON, encoded once to size the request and sent as it is.
        var encodedOperations: [[UInt8]]
        /// The zone's sync token, set just before the request goes out (``RecordsModifyRequest/syncToken``).
        var syncToken: String?

        /// A request of `operations`, encoded here unless `encodedOperations` holds their JSON already.
        init(zoneID: ZoneID, atomic: Bool, operations: [RecordsModifyRequest.Operation], encodedOperations: [[UInt8]]? = nil) {
            self.zoneID = zoneID
            self.atomic = atomic
            self.operations = operations
            self.encodedOperations = encodedOperations ?? operations.map(RecordBatchPlan.encoded)
        }

        var wireRequest: RecordsModifyRequest {
            RecordsModifyRequest(zoneID: zoneID, atomic: atomic, operations: operations, syncToken: syncToken)
        }

        /// The bytes `WireCoding.encode(wireRequest)` gives, put together from the encoded
        /// operations; nil when one of them could not be encoded (the request then fails as
        /// `WireCoding` fails it).
        var body: Data? {
            guard !encodedOperations.contains(where: \.isEmpty) else { return nil }
            var json = JSONBytes(capacity: encodedOperations.reduce(RecordBatchPlan.envelopeBytes) { $0 + $1.count + 1 })
            try? json.object { json in
                json.member("atomic", bool: atomic)
                json.member("operations")
                json.array(encodedOperations) { json, operation in json.raw(operation) }
                json.member("syncToken", string: syncToken)
                try json.member("zoneID", value: zoneID)
            }
            return Data(json.bytes)
        }

        /// The request's two halves, for a retry after `LIMIT_EXCEEDED`.
        func halves() -> (Request, Request) {
            let middle = operations.count / 2
            var first = self
            var second = self
            first.operations = Array(operations[..<middle])
            first.encodedOperations = Array(encodedOperations[..<middle])
            second.operations = Array(operations[middle...])
            second.encodedOperations = Array(encodedOperations[middle...])
            return (first, second)
        }
    }

    /// Bytes allowed for the request's envelope (`zoneID`, `atomic`, `syncToken`, brackets) beside the operations.
    static let envelopeBytes = 256

    private(set) var requests: [Request] = []

    init(_ batch: SyncEngine.RecordZoneChangeBatch, maxCount: Int, maxBytes: Int) {
        var zoneOrder: [ZoneID] = []
        var operationsByZone: [ZoneID: [(operation: RecordsModifyRequest.Operation, encoded: [UInt8]?)]] = [:]
        var seen = Set<RecordID>()
        func append(_ operation: RecordsModifyRequest.Operation, _ recordID: RecordID, encoded: [UInt8]? = nil) {
            guard seen.insert(recordID).inserted else { return }
            if operationsByZone[recordID.zoneID] == nil { zoneOrder.append(recordID.zoneID) }
            operationsByZone[recordID.zoneID, default: []].append((operation, encoded))
        }
        for record in batch.recordsToSave {
            append(Self.operation(saving: record), record.recordID, encoded: batch.encodedSaves[record.recordID])
        }
        for recordID in batch.recordIDsToDelete {
            append(Self.operation(deleting: recordID, changeTag: batch.recordChangeTagsToDelete[recordID]), recordID)
        }

        let budget = max(1, maxBytes - Self.envelopeBytes)
        for zoneID in zoneOrder {
            var current = Request(zoneID: zoneID, atomic: batch.atomicByZone, operations: [], encodedOperations: [])
            var bytes = 0
            for (operation, known) in operationsByZone[zoneID] ?? [] {
                let encoded = known ?? Self.encoded(operation)
                let size = encoded.count + 1
                if !current.operations.isEmpty && (current.operations.count >= maxCount || bytes + size > budget) {
                    requests.append(current)
                    current.operations = []
                    current.encodedOperations = []
                    bytes = 0
                }
                current.operations.append(operation)
                current.encodedOperations.append(encoded)
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

    /// The operation that deletes a record: `delete` of the version `changeTag` names, or
    /// `forceDelete` whatever the version.
    static func operation(deleting recordID: RecordID, changeTag: String? = nil) -> RecordsModifyRequest.Operation {
        RecordsModifyRequest.Operation(
            changeTag == nil ? .forceDelete : .delete,
            Record(recordName: recordID.recordName, recordChangeTag: changeTag, zoneID: recordID.zoneID))
    }

    /// The operation's size as JSON, plus one byte for the separating comma.
    static func encodedSize(of operation: RecordsModifyRequest.Operation) -> Int {
        encoded(operation).count + 1
    }

    /// The operation's JSON; empty if it cannot be encoded (a non-finite double), which the
    /// request then fails on as a whole.
    static func encoded(_ operation: RecordsModifyRequest.Operation) -> [UInt8] {
        (try? WireCoding.encodedBytes(operation)) ?? []
    }
}
