import CloudStoreWire
import Foundation

/// Uniqueness constraints of record types (WireProtocol.md §3, "Uniqueness constraints").
///
/// Once the operations are decided, the saves run in order against who holds each key
/// (``UniqueKey``): the live records of the snapshot (``RecordSnapshot/uniqueKeyHolders``), as the
/// request's earlier writes leave them. A save whose key another record holds fails with
/// `UNIQUE_FIELD_ERROR`, carrying that record as `serverRecord` when it is stored; a record's own
/// keys never stop it; a record changed or deleted earlier in the request frees its keys; a save
/// that succeeds takes its keys for the operations after it. Records deleted by a `DELETE_SELF`
/// cascade are deleted after every operation, so they hold their keys throughout.
extension RecordsModifier {
    /// Fails the writes whose keys another record holds at their turn, and gives each write of a
    /// constrained type its ``RecordWrite/uniqueKeys``; answers whether it failed any. Decided
    /// afresh from the writes left each time, so that writes failed since (their references) free
    /// what they would have taken or kept what they would have freed.
    func checkUniqueKeys(
        _ outcomes: inout [Outcome], writes: inout [Int: RecordWrite], snapshot: RecordSnapshot
    ) throws(RecordSnapshot.MissingUniqueKeys) -> Bool {
        let schema = snapshot.schema
        var keys: [Int: [UniqueKey]] = [:]
        for (index, write) in writes where UniqueKey.isConstrained(write.type, in: schema) && !ShareMetadata.isShareType(write.type) {
            guard case .save(_, let fields, _) = write.change else {
                keys[index] = []
                continue
            }
            keys[index] = UniqueKey.keys(of: write.type, fields: fields, in: schema)
        }
        let missing = Set(keys.values.joined().map(\.text)).subtracting(snapshot.uniqueKeysRead)
        guard missing.isEmpty else { throw RecordSnapshot.MissingUniqueKeys(keys: missing) }

        var holders = snapshot.uniqueKeyHolders
        var held = Dictionary(grouping: holders, by: \.value).mapValues { $0.map(\.key) }
        var takenInRequest = Set<String>()
        var failed = false
        for index in keys.keys.sorted() {
            guard var write = writes[index], let recordKeys = keys[index] else { continue }
            if let clash = recordKeys.first(where: { holders[$0.text].map { $0 != write.name } ?? false }),
                let holder = holders[clash.text]
            {
                outcomes[index] = .failed(
                    uniqueFieldError(write.name, clash, holder: holder, heldInRequest: takenInRequest.contains(clash.text), snapshot))
                writes[index] = nil
                failed = true
                continue
            }
            for text in held[write.name] ?? [] { holders[text] = nil }
            held[write.name] = recordKeys.map(\.text)
            for key in recordKeys {
                holders[key.text] = write.name
                takenInRequest.insert(key.text)
            }
            write.uniqueKeys = recordKeys.map(\.text)
            writes[index] = write
        }
        return failed
    }

    /// The unique keys a deletion of a record of `recordType` leaves: none when the type is
    /// constrained, nil (no key rows to touch) when it is not.
    func uniqueKeysAfterDeletion(of recordType: String, in schema: CloudSchema) -> [String]? {
        UniqueKey.isConstrained(recordType, in: schema) ? [] : nil
    }

    /// `UNIQUE_FIELD_ERROR` for the save of `name`, whose `key` `holder` holds: stored (then the
    /// error carries it as `serverRecord`), or taken by an earlier operation of the request.
    private func uniqueFieldError(
        _ name: String, _ key: UniqueKey, holder: String, heldInRequest: Bool, _ snapshot: RecordSnapshot
    ) -> ServerError {
        let constraint = "uniqueness constraint [\(key.fields.joined(separator: ", "))]"
        let them = key.fields.count == 1 ? "it" : "them"
        let fix = "merge into \(holder) or change the value\(key.fields.count == 1 ? "" : "s")"
        if !heldInRequest, let stored = snapshot.records[holder], !stored.isDeleted {
            return conflict(
                .uniqueFieldError,
                "record \(name) cannot have \(key.values): record \(holder) in zone \(rules.zone.zoneName) already has \(them) (\(constraint)); \(fix)",
                stored, in: snapshot, recordName: name)
        }
        return rules.failure(
            .uniqueFieldError,
            "record \(name) cannot have \(key.values): record \(holder), saved earlier in this request, has \(them) (\(constraint)); \(fix)",
            name)
    }
}
