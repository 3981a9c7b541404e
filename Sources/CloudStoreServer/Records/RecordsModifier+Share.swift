import CloudStoreWire
import Foundation

/// The share record `cloudkit.zoneshare` (WireProtocol.md §6) and writes through the shared
/// database.
///
/// - The owner creates, updates and deletes the share record in a custom zone of their private
///   database, with the usual tag checks; its `participants` and `publicPermission` follow
///   ``ShareRules``; deleting it stops sharing. Its type is stored as `cloudkit.share` however the
///   request spells it, needs no schema, and its fields may hold no references (a cascade could
///   otherwise delete it without stopping the share).
/// - A participant may only delete it, which removes them from the share (ext: whatever the tag
///   sent, since leaving cannot conflict with anything): the record stays, under a new tag.
extension RecordsModifier {
    static func isShareRecord(_ record: Record) -> Bool {
        record.recordName == ShareMetadata.zoneShareRecordName || ShareMetadata.isShareType(record.recordType)
    }

    func decideShare(
        _ operation: Operation, snapshot: RecordSnapshot, schema: inout CloudSchema, share: inout StoredShare?,
        change: inout ShareChange?
    ) -> Result<RecordWrite?, ServerError> {
        let name = operation.record.recordName
        if let participant {
            guard operation.type.isDelete, name == ShareMetadata.zoneShareRecordName else {
                return .failure(
                    rules.failure(
                        .accessDenied,
                        "the share is read-only to its participants: the only change a participant makes is to leave, by deleting \(ShareMetadata.zoneShareRecordName)",
                        name))
            }
            guard let current = share, let live = snapshot.records[name], !live.isDeleted,
                let write = ShareRules.shareRecordRewrite(live, stamp: stamp)
            else { return .failure(accessEnded(name)) }
            let after = ShareRules.leaving(current, user: participant)
            share = after
            change = .save(after)
            return .success(write)
        }
        guard rules.zone.partition.scope == .private, !rules.zone.isDefaultZone else {
            return .failure(
                rules.failure(
                    .badRequest,
                    "a share covers a custom zone of the private database: move the records into a zone of their own and save \(ShareMetadata.zoneShareRecordName) there",
                    name))
        }
        guard name == ShareMetadata.zoneShareRecordName else {
            return .failure(
                rules.failure(
                    .badRequest,
                    "this server offers zone-wide shares only: name the share record \(ShareMetadata.zoneShareRecordName)", name))
        }
        if let type = operation.record.recordType, !ShareMetadata.isShareType(type) {
            return .failure(
                rules.failure(
                    .badRequest,
                    "\(ShareMetadata.zoneShareRecordName) is the zone's share: its recordType is \(ShareMetadata.recordType), not \(type.prefix(64))",
                    name))
        }
        if operation.record.fields.values.contains(where: { !RecordRules.references(in: $0).isEmpty }) {
            return .failure(rules.failure(.badRequest, "the share record's fields may not hold references", name))
        }
        var canonical = operation
        canonical.record.recordType = operation.record.recordType.map { _ in ShareMetadata.recordType }
        let decision = decide(canonical, snapshot: snapshot, schema: &schema)
        guard case .success(_?) = decision else { return decision }
        if operation.type.isDelete {
            if let current = share {
                share = nil
                change = .stop(ShareRules.stopped(current))
            }
            return decision
        }
        let live = snapshot.records[name].flatMap { $0.isDeleted ? nil : $0 }
        switch shareRules.saved(operation.record.share, over: live == nil ? nil : share, owner: rules.zone.partition.owner) {
        case .success(let after):
            share = after
            change = .save(after)
            return decision
        case .failure(let problem):
            return .failure(rules.failure(problem.code, problem.reason, name))
        }
    }

    /// The failure of every operation of a participant whose access ended.
    func accessEnded(_ name: String) -> ServerError {
        rules.failure(
            .accessDenied,
            "zone \(rules.zone.zoneName) of \(rules.zone.partition.owner) is not shared with you any more: remove your copy of it",
            name)
    }

    /// The failure of a `READ_ONLY` participant's write.
    func readOnly(_ operation: Operation) -> ServerError {
        rules.failure(
            .accessDenied,
            "you may read zone \(rules.zone.zoneName) of \(rules.zone.partition.owner) but not change it (READ_ONLY): ask its owner for READ_WRITE",
            operation.record.recordName)
    }
}
