import CloudStoreWire
import Foundation

/// The decisions of `records/modify`, as a pure function of the operations and the stored rows.
///
/// Operations run in order against the snapshot; each gets an outcome. `VALIDATE` references must
/// point at records that exist once the request is applied; deleting a record deletes the records
/// that refer to it with `DELETE_SELF`, transitively (records the request itself writes excepted).
/// An atomic request with any failure writes nothing and reports `ATOMIC_ERROR` for every
/// operation that did not fail itself. `ASSETID` values follow ``AssetRules``; the share record
/// `cloudkit.zoneshare` and writes through the shared database follow ``ShareRules``
/// (RecordsModifier+Share.swift); uniqueness constraints of record types follow ``UniqueKey``
/// (RecordsModifier+UniqueKeys.swift).
struct RecordsModifier: Sendable {
    struct Operation: Sendable {
        var type: RecordsModifyRequest.OperationType
        var record: Record
        /// A failure found before reading the snapshot (bad name, unknown type, a reference out of the zone).
        var failure: ServerError?
    }

    enum Outcome: Hashable, Sendable {
        case saved(String)
        case deleted(String)
        case failed(ServerError)
        case atomicError(String)
    }

    var operations: [Operation]
    var atomic: Bool
    /// The stamp of this request's writes: now, the caller, the device.
    var stamp: Record.Stamp
    var environment: CloudEnvironment
    /// The public database's rule for users (WireProtocol.md §1): only a record's creator may update or
    /// delete it. False for private and shared zones and for server-to-server keys.
    var onlyCreatorMayChange: Bool
    var rules: RecordRules
    /// How a stored row reads in an error's `serverRecord`.
    var present: @Sendable (StoredRecord) throws -> Record
    /// The caller when they write through the shared database (WireProtocol.md §6): the zone's
    /// share must list them as accepted, with `READ_WRITE` to change records other than the share;
    /// nil when the caller writes a zone of their own.
    var participant: String? = nil
    /// The rules of the zone's share record.
    var shareRules = ShareRules()
    /// Which fields the request sent without a `type`, to be typed by the schema.
    var untypedFields = UntypedFields(body: [])

    /// The rows a plan needs: every named record, validating targets, and what deletes may cascade to.
    var snapshotRequest: RecordSnapshotRequest {
        var names = Set<String>()
        var roots = Set<String>()
        var receipts = Set<String>()
        for operation in operations where operation.failure == nil {
            names.insert(operation.record.recordName)
            if operation.type.isDelete { roots.insert(operation.record.recordName) }
            names.formUnion(validateTargets(of: operation.record.fields))
            receipts.formUnion(AssetRules.receipts(in: operation.record.fields))
        }
        return RecordSnapshotRequest(names: names, cascadeRoots: roots, receipts: receipts)
    }

    /// The writes and each operation's outcome. Throws ``RecordSnapshot/MissingUniqueKeys`` when
    /// records it saves hold unique keys the snapshot did not read: the storage reads them and
    /// calls it again.
    func plan(_ snapshot: RecordSnapshot) throws(RecordSnapshot.MissingUniqueKeys) -> (RecordWritePlan, [Outcome]) {
        var schema = snapshot.schema
        var share = snapshot.share
        var shareChange: ShareChange?
        var outcomes: [Outcome] = []
        var writes: [Int: RecordWrite] = [:]
        let permission = participant.flatMap { ShareRules.permission(of: snapshot.share?.participants[$0]) }
        for (index, operation) in operations.enumerated() {
            if let failure = operation.failure {
                outcomes.append(.failed(failure))
                continue
            }
            if participant != nil, permission == nil {
                outcomes.append(.failed(accessEnded(operation.record.recordName)))
                continue
            }
            let isShare = Self.isShareRecord(operation.record)
            if !isShare, permission == .readOnly {
                outcomes.append(.failed(readOnly(operation)))
                continue
            }
            let decision =
                isShare
                ? decideShare(operation, snapshot: snapshot, schema: &schema, share: &share, change: &shareChange)
                : decide(operation, snapshot: snapshot, schema: &schema)
            switch decision {
            case .success(let write?):
                writes[index] = write
                let deleted = write.change == .delete || (isShare && operation.type.isDelete)
                outcomes.append(deleted ? .deleted(write.name) : .saved(write.name))
            case .success(nil):
                outcomes.append(.deleted(operation.record.recordName))
            case .failure(let error):
                outcomes.append(.failed(error))
            }
        }
        var cascade = checkReferences(&outcomes, writes: &writes, snapshot: snapshot)
        // A save failed for its keys can make references to it fail, which can free or keep keys:
        // until neither check fails anything more.
        while try checkUniqueKeys(&outcomes, writes: &writes, snapshot: snapshot) {
            cascade = checkReferences(&outcomes, writes: &writes, snapshot: snapshot)
        }

        let failed = outcomes.contains { if case .failed = $0 { true } else { false } }
        if atomic && failed {
            let reported = outcomes.enumerated().map { index, outcome -> Outcome in
                if case .failed = outcome { return outcome }
                return .atomicError(operations[index].record.recordName)
            }
            return (RecordWritePlan(writes: [], schema: nil), reported)
        }
        var ordered = writes.sorted { $0.key < $1.key }.map(\.value)
        ordered += cascade.sorted().compactMap { name in
            snapshot.records[name].map {
                RecordWrite(
                    name: name, type: $0.type, change: .delete, time: stamp.timestamp,
                    uniqueKeys: uniqueKeysAfterDeletion(of: $0.type, in: snapshot.schema))
            }
        }
        var changedSchema = schema == snapshot.schema || ordered.isEmpty ? nil : schema
        // Every change raises the version: storage stores a schema only over the version it read,
        // so of two batches that extend it at once the second retries on the first's fields.
        changedSchema?.version = (snapshot.schema.version ?? 0) + 1
        var plan = RecordWritePlan(writes: ordered, schema: changedSchema)
        if !ordered.isEmpty {
            plan.share = shareChange
            plan.sharedDatabases = ShareRules.sharedDatabases(before: snapshot.share, after: share)
        }
        return (plan, outcomes)
    }

    // MARK: - One operation

    func decide(
        _ operation: Operation, snapshot: RecordSnapshot, schema: inout CloudSchema
    ) -> Result<RecordWrite?, ServerError> {
        let sent = operation.record
        let name = sent.recordName
        let live = snapshot.records[name].flatMap { $0.isDeleted ? nil : $0 }
        let type = operation.type
        let liveContent: RecordContent?
        do {
            liveContent = try live?.content?.decoded()
        } catch {
            return .failure(rules.failure(.internalError, "the stored copy of record \(name) cannot be read", name))
        }

        if let live, type == .create {
            return .failure(conflict(.exists, "record \(name) already exists: update it with its change tag", live, in: snapshot))
        }
        if live == nil, type == .update || type == .replace || type == .delete {
            return .failure(rules.failure(.notFound, "record \(name) does not exist", name))
        }
        if onlyCreatorMayChange, let creator = liveContent?.created.userRecordName, creator != stamp.userRecordName {
            return .failure(
                rules.failure(
                    .accessDenied,
                    "record \(name) was created by \(creator): in the public database only its creator or a server-to-server key may \(type.isDelete ? "delete" : "change") it",
                    name))
        }
        if let live, type.checksChangeTag {
            guard let tag = sent.recordChangeTag else {
                // As Apple's reference: update, replace and delete need the tag; the force forms do not.
                let force = "force" + type.rawValue.prefix(1).uppercased() + type.rawValue.dropFirst()
                return .failure(
                    conflict(
                        .conflict,
                        "\(type.rawValue) of \(name) needs its recordChangeTag: send the tag of the copy you last read (serverRecord has the current one), or use \(force) to skip the check",
                        live, in: snapshot))
            }
            guard tag == live.changeTag else {
                return .failure(
                    conflict(.conflict, "record \(name) changed on the server: merge with serverRecord and resend with its tag", live, in: snapshot))
            }
        }
        if type.isDelete {
            guard let live else { return .success(nil) }
            return .success(RecordWrite(name: name, type: live.type, change: .delete, time: stamp.timestamp))
        }

        guard let recordType = sent.recordType ?? live?.type else {
            return .failure(rules.failure(.badRequest, "\(type.rawValue) of new record \(name) needs a recordType", name))
        }
        if let live, recordType != live.type {
            return .failure(
                rules.failure(.badRequest, "record \(name) is a \(live.type); it cannot be saved as a \(recordType)", name))
        }
        var fields: [String: FieldValue] = [:]
        if let content = liveContent, type == .update || type == .forceUpdate {
            fields = content.fields
        }
        let typedFields: [String: FieldValue]
        switch SchemaRules.typed(sent.fields, recordType: recordType, schema: schema, isUntyped: {
            untypedFields.contains(record: name, field: $0)
        }) {
        case .success(let typed): typedFields = typed
        case .failure(let misfit): return .failure(rules.failure(.badRequest, misfit.reason, name))
        }
        let assets = AssetRules(zone: rules.zone, caller: stamp.userRecordName ?? "", now: stamp.timestamp)
        let sentFields: [String: FieldValue]
        switch assets.resolve(typedFields, recordName: name, stored: liveContent?.fields, receipts: snapshot.receipts) {
        case .success(let resolved): sentFields = resolved
        case .failure(let problem): return .failure(rules.failure(.badRequest, problem.reason, name))
        }
        for (key, value) in sentFields {
            fields[key] = value.isNull ? nil : value
        }
        let content: StoredContent
        do {
            content = try StoredContent(RecordContent(fields: fields, created: liveContent?.created ?? stamp, modified: stamp))
        } catch {
            return .failure(rules.failure(.badRequest, "record \(name) cannot be encoded: \(error)", name))
        }
        if let problem = rules.sizeProblem(content, recordName: name) {
            return .failure(problem)
        }
        if !ShareMetadata.isShareType(recordType),
            let problem = SchemaRules.admit(recordType: recordType, fields: fields, into: &schema, environment: environment)
        {
            return .failure(rules.failure(.badRequest, problem, name))
        }
        return .success(
            RecordWrite(
                name: name, type: recordType,
                change: .save(content: content, fields: fields, deleteSelfTargets: deleteSelfTargets(of: fields)),
                time: stamp.timestamp))
    }

    /// A failure that carries the stored record `live` as `serverRecord`; it is the failure of
    /// `recordName` when given, else of `live`. The zone's share record carries its share, as
    /// every other answer gives it (WireProtocol.md §6): a client merging with it keeps the
    /// participants.
    func conflict(
        _ code: ServerErrorCode, _ reason: String, _ live: StoredRecord, in snapshot: RecordSnapshot, recordName: String? = nil
    ) -> ServerError {
        var error = rules.failure(code, reason, recordName ?? live.name)
        error.serverRecord = try? present(live)
        if live.isLiveShareRecord, let share = snapshot.share {
            error.serverRecord?.share = share.metadata(for: stamp.userRecordName ?? "")
        }
        return error
    }

    // MARK: - References

    /// Fails saves whose validating references point at records that will not exist, until
    /// nothing changes; answers the records deleted by cascade.
    private func checkReferences(
        _ outcomes: inout [Outcome], writes: inout [Int: RecordWrite], snapshot: RecordSnapshot
    ) -> Set<String> {
        while true {
            let cascade = cascadedDeletes(writes: writes, snapshot: snapshot)
            var changed = false
            for (index, write) in writes {
                guard case .save(_, let fields, _) = write.change else { continue }
                for target in validateTargets(of: fields) where !exists(target, writes, cascade, snapshot) {
                    outcomes[index] = .failed(
                        rules.failure(
                            .validatingReferenceError,
                            "record \(write.name) refers to \(target) with VALIDATE, and \(target) does not exist: save it first or in the same request",
                            write.name))
                    writes[index] = nil
                    changed = true
                    break
                }
            }
            if !changed { return cascade }
        }
    }

    private func exists(
        _ name: String, _ writes: [Int: RecordWrite], _ cascade: Set<String>, _ snapshot: RecordSnapshot
    ) -> Bool {
        if let write = writes.values.first(where: { $0.name == name }) { return write.change != .delete }
        if cascade.contains(name) { return false }
        if let stored = snapshot.records[name] { return !stored.isDeleted }
        return false
    }

    private func cascadedDeletes(writes: [Int: RecordWrite], snapshot: RecordSnapshot) -> Set<String> {
        let written = Set(writes.values.map(\.name))
        var frontier = writes.values.filter { $0.change == .delete }.map(\.name)
        var deleted = Set<String>()
        while let target = frontier.popLast() {
            for source in snapshot.deleteSelfReferrers[target] ?? []
            where !written.contains(source) && !deleted.contains(source) {
                guard let row = snapshot.records[source], !row.isDeleted else { continue }
                deleted.insert(source)
                frontier.append(source)
            }
        }
        return deleted
    }

    private func validateTargets(of fields: [String: FieldValue]) -> Set<String> {
        Set(fields.values.flatMap(RecordRules.references(in:)).filter { $0.action == .validate }.map(\.recordName))
    }

    private func deleteSelfTargets(of fields: [String: FieldValue]) -> Set<String> {
        Set(fields.values.flatMap(RecordRules.references(in:)).filter { $0.action == .deleteSelf }.map(\.recordName))
    }
}
