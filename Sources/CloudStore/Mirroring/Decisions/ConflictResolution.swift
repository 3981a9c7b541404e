import Foundation

/// Every way a change made on this device can meet another device's change, and what wins:
/// decided here, without I/O, so tests drive each case directly. ``MirrorWrite`` carries the
/// decisions out (writes objects, metadata and the conflict log).
///
/// | this device | the server | decided by |
/// |---|---|---|
/// | edited fields | edited fields | ``editAgainstEdit(_:of:)``: field by field against the ancestor |
/// | its upload, acknowledged | that upload and maybe others' edits | ``acknowledgedUpload(_:sent:stillPending:of:)`` |
/// | edited an object | deleted it | ``editAgainstDeletion(of:pendingKeys:local:)`` |
/// | deleted an object | edited it | ``deletionAgainstEdit(of:writtenByThisDevice:)`` |
/// | added a link | deleted it | ``linkAgainstDeletion(_:)`` |
/// | removed a link | saved it | ``linkDeletionAgainstSave(_:)`` |
/// | a reference (or the server's) | deleted its target | ``referenceAgainstDeletion(of:property:target:side:)`` |
/// | its own write whose answer was lost | that write | ``ancestor(_:server:writtenBy:thisDevice:)`` |
/// | changed an object in a zone shared with it | its access to the zone ended | ``accessEnded(of:pending:recordKeys:local:)`` |
/// | created an object with a unique key | another object already has that key | ``newcomerAgainstExisting(_:into:newcomer:)`` |
///
/// Only values both sides changed follow the ``ConflictPolicy``; every value that loses is returned
/// as a ``ConflictRecord`` for the conflict log, so nothing is silently gone.
struct ConflictResolution {
    let policy: ConflictPolicy
    let now: Date

    /// Which side's version of a whole object or link wins.
    enum Winner: Equatable {
        case local, server
    }

    /// The object a decision is about.
    struct Object: Equatable {
        var entityName: String
        var id: UUID
    }

    /// A many-to-many link as the conflict log names it: the canonical side's entity and
    /// relationship, the source object and the member it links to.
    struct Link: Equatable {
        var entityName: String
        var relationship: String
        var source: UUID
        var target: UUID
    }

    // MARK: Edit against edit

    /// Both sides' values of an object, for a three-way merge.
    struct Fields {
        /// This device's current values and the keys it changed since the ancestor, with when.
        var local: [String: AttributeValue]
        var localChanges: [String: Date]
        /// The server copy both sides last agreed on; nil when this device never saw one (two
        /// devices created the same object), so every server value counts as a change.
        var ancestor: [String: AttributeValue]?
        var server: [String: AttributeValue]
        /// When the server's values were edited, per field, where the record says.
        var serverChanges: [String: Date] = [:]
        /// When the server record was last written, for fields without an edit time.
        var serverModified: Date?
    }

    struct FieldOutcome: Equatable {
        /// The values the object should have: every key of either side.
        var merged: [String: AttributeValue]
        /// The keys whose merged value differs from the server's and must be uploaded.
        var keysToUpload: Set<String>
        /// Every value that lost.
        var conflicts: [ConflictRecord]
    }

    /// Merges field by field: fields only this device changed keep its value (and are uploaded),
    /// fields only the server changed take the server's, fields both changed to different values
    /// follow the policy and the loser is logged.
    func editAgainstEdit(_ fields: Fields, of object: Object) -> FieldOutcome {
        var outcome = FieldOutcome(merged: fields.server, keysToUpload: [], conflicts: [])
        for key in Set(fields.local.keys).union(fields.server.keys).sorted() {
            let localValue = fields.local[key] ?? .null
            let serverValue = fields.server[key] ?? .null
            let localChanged = fields.localChanges[key] != nil
            let serverChanged = fields.ancestor.map { ($0[key] ?? .null) != serverValue } ?? true
            guard localChanged else {
                outcome.merged[key] = serverValue
                continue
            }
            guard serverChanged, localValue != serverValue else {
                outcome.merged[key] = localValue
                if localValue != serverValue { outcome.keysToUpload.insert(key) }
                continue
            }
            let conflict = FieldConflict(
                entityName: object.entityName, objectID: object.id, property: key, ancestorValue: fields.ancestor?[key],
                localValue: localValue, serverValue: serverValue, localModified: fields.localChanges[key],
                serverModified: fields.serverChanges[key] ?? fields.serverModified)
            func lost(_ side: ConflictRecord.Side, _ value: AttributeValue, to winner: AttributeValue) {
                outcome.conflicts.append(record(object, key, side, lost: value, won: winner))
            }
            switch Self.resolution(of: conflict, policy: policy) {
            case .server:
                outcome.merged[key] = serverValue
                lost(.local, localValue, to: serverValue)
            case .local:
                outcome.merged[key] = localValue
                outcome.keysToUpload.insert(key)
                lost(.server, serverValue, to: localValue)
            case .value(let value):
                outcome.merged[key] = value
                if value != serverValue {
                    outcome.keysToUpload.insert(key)
                    lost(.server, serverValue, to: value)
                }
                if value != localValue { lost(.local, localValue, to: value) }
            }
        }
        return outcome
    }

    static func resolution(of conflict: FieldConflict, policy: ConflictPolicy) -> FieldConflict.Resolution {
        switch policy {
        case .serverWins:
            return .server
        case .localWins:
            return .local
        case .lastWriterWins:
            guard let local = conflict.localModified else { return .server }
            guard let server = conflict.serverModified else { return .local }
            return local > server ? .local : .server
        case .custom(let decide):
            return decide(conflict)
        }
    }

    // MARK: Acknowledged upload

    /// The server acknowledged this device's upload with its copy of the record. That copy holds
    /// what was sent, and it may hold more: other devices' edits the upload did not overwrite
    /// (when a retry found this device's first attempt already applied, and others' edits after
    /// it). This is a merge whose ancestor is what this device believed the server held once its
    /// upload landed (the ancestor with the sent values): other devices' edits are applied here,
    /// and meet the keys this device changed again after sending (`stillPending`) as any edit
    /// meets another.
    func acknowledgedUpload(
        _ fields: Fields, sent: [String: AttributeValue], stillPending: [String: Date], of object: Object
    ) -> FieldOutcome {
        guard !stillPending.isEmpty else {
            // Nothing changed here since: every key takes the server's value (what the merge below
            // gives when no key changed locally), the common acknowledgement, without merging.
            var merged = fields.server
            for key in fields.local.keys where merged[key] == nil { merged[key] = .null }
            return FieldOutcome(merged: merged, keysToUpload: [], conflicts: [])
        }
        var believed = fields
        believed.ancestor = (fields.ancestor ?? [:]).merging(sent) { _, sent in sent }
        believed.localChanges = stillPending
        return editAgainstEdit(believed, of: object)
    }

    // MARK: Edit against deletion

    /// This device edited an object (the keys of its pending upload) that the server deleted.
    /// With `localWins` the object is uploaded again as a new record and the deletion is logged as
    /// lost; otherwise the deletion wins and each edited value is logged as lost.
    func editAgainstDeletion(
        of object: Object, pendingKeys: Set<String>, local: [String: AttributeValue]?
    ) -> (Winner, [ConflictRecord]) {
        if case .localWins = policy, local != nil {
            return (.local, [record(object, "*", .server, lost: .null, won: .null)])
        }
        let lost = pendingKeys.sorted().map { key in
            record(object, key, .local, lost: local?[key] ?? .null, won: .null)
        }
        return (.server, local == nil ? [] : lost)
    }

    /// This device deleted an object that the server edited. With `localWins` the deletion stays
    /// pending and the server's edit is logged as lost; otherwise the object comes back with the
    /// server's values and the deletion is logged as lost. When the server's version is this
    /// device's own write whose answer was lost (`writtenByThisDevice`), nobody else edited it:
    /// the deletion stands and nothing is logged.
    func deletionAgainstEdit(of object: Object, writtenByThisDevice: Bool = false) -> (Winner, [ConflictRecord]) {
        if writtenByThisDevice { return (.local, []) }
        if case .localWins = policy {
            return (.local, [record(object, "*", .server, lost: .null, won: .null)])
        }
        return (.server, [record(object, "*", .local, lost: .null, won: .null)])
    }

    // MARK: Links

    /// This device added a link that the server deleted: with `localWins` it is uploaded again,
    /// otherwise it is removed here.
    func linkAgainstDeletion(_ link: Link) -> (Winner, [ConflictRecord]) {
        let object = Object(entityName: link.entityName, id: link.source)
        if case .localWins = policy {
            return (.local, [record(object, link.relationship, .server, lost: .null, won: .uuid(link.target))])
        }
        return (.server, [record(object, link.relationship, .local, lost: .uuid(link.target), won: .null)])
    }

    /// This device removed a link that the server saved (another device added it again): with
    /// `localWins` the removal stays pending, otherwise the link stays.
    func linkDeletionAgainstSave(_ link: Link) -> (Winner, [ConflictRecord]) {
        let object = Object(entityName: link.entityName, id: link.source)
        if case .localWins = policy {
            return (.local, [record(object, link.relationship, .server, lost: .uuid(link.target), won: .null)])
        }
        return (.server, [record(object, link.relationship, .local, lost: .null, won: .uuid(link.target))])
    }

    // MARK: Unique keys

    /// The policy name of the conflict record that says a newcomer was merged into the object
    /// that already had its unique key (``newcomerAgainstExisting(_:into:newcomer:)``).
    static let uniqueKeyMergePolicy = "uniqueKeyMerge"

    /// An object this device created (or gave a unique key) that the server already has under
    /// another record: the newcomer is merged into the existing object, which keeps its identity.
    /// `fields.local` and `fields.localChanges` are the newcomer's values and the keys it changed;
    /// `fields.server` is the existing object's. There is no common ancestor: a field only one side
    /// has keeps that side's value (the newcomer's null never clears the existing object's value),
    /// a field both have follows the policy with the loser logged. One more record says the
    /// newcomer is gone: its id lost, the existing object's id won.
    func newcomerAgainstExisting(_ fields: Fields, into existing: Object, newcomer: UUID) -> FieldOutcome {
        var fields = fields
        // An empty ancestor: a server value counts as a change only where there is one.
        fields.ancestor = [:]
        fields.localChanges = fields.localChanges.filter { (fields.local[$0.key] ?? .null) != .null }
        var outcome = editAgainstEdit(fields, of: existing)
        outcome.conflicts.append(
            ConflictRecord(
                date: now, entityName: existing.entityName, objectID: newcomer, property: "*", losingSide: .local,
                losingValue: .uuid(newcomer), winningValue: .uuid(existing.id), policy: Self.uniqueKeyMergePolicy))
        return outcome
    }

    // MARK: References to deleted objects

    /// A to-one reference whose target was deleted: the object stays (nothing its writer did not
    /// see is deleted), the reference is cleared, and its value is logged as lost. `side` is whose
    /// value it was: this device's, when an import deletes the parent of an object here (the
    /// deleting device's cascade did not know the object was in it), or the server's, when a
    /// fetched object refers to one deleted meanwhile, so the reference is never set here.
    func referenceAgainstDeletion(of object: Object, property: String, target: UUID, side: ConflictRecord.Side) -> ConflictRecord {
        record(object, property, side, lost: .uuid(target), won: .null)
    }

    /// A to-one reference fetched while its target had not arrived (so this device showed none),
    /// replaced by a local edit before the target came: the edit wins (it is the later write), and
    /// the fetched reference is logged as the server's value that lost, under
    /// ``waitingReferencePolicy``, whatever the policy.
    static func waitingReferenceReplaced(
        of object: Object, property: String, target: UUID, by value: AttributeValue, at date: Date
    ) -> ConflictRecord {
        ConflictRecord(
            date: date, entityName: object.entityName, objectID: object.id, property: property, losingSide: .server,
            losingValue: .uuid(target), winningValue: value, policy: waitingReferencePolicy)
    }

    static let waitingReferencePolicy = "waitingReference"

    // MARK: Own unheard write

    /// The ancestor to merge a server copy against. When the server's copy was last written by
    /// this device, it is this device's own upload whose answer was lost: a save is conditional on
    /// the version this device last saw, so nothing in it is another device's edit, and the
    /// server's values are the ancestor (this device's later edits are not in conflict with it).
    ///
    /// Without a version of the record here (`versionKnown` false), `current` holds what this
    /// device's create carried: the ancestor only of a copy this device created, which another
    /// device then edited; a copy another device created (the same object inserted on both) has
    /// none, and every value that differs is a conflict.
    static func ancestor(
        _ current: [String: AttributeValue]?, server: [String: AttributeValue], writtenBy writer: String?,
        createdBy creator: String?, thisDevice: String?, versionKnown: Bool
    ) -> [String: AttributeValue]? {
        guard let thisDevice else { return versionKnown ? current : nil }
        if writer == thisDevice { return server }
        return versionKnown || creator == thisDevice ? current : nil
    }

    // MARK: Losing access

    /// The policy name conflict records of ``accessEnded(of:pending:recordKeys:local:)`` carry.
    static let accessEndedPolicy = "accessEnded"

    /// This device changed an object in a zone shared with it, and its access to the zone ended
    /// before the change went up (the owner removed the user or stopped sharing, or the user left):
    /// the server will not take it, and the local copy goes. Every value not uploaded is logged as
    /// lost, whatever the policy: the changed keys, or every key of an object created here.
    func accessEnded(
        of object: Object, pending: PendingUpload, recordKeys: Set<String>, local: [String: AttributeValue]?
    ) -> [ConflictRecord] {
        guard case .save(let full, let keys) = pending, let local else { return [] }
        let lost = full ? recordKeys : Set(keys.keys).intersection(recordKeys)
        return lost.sorted().map { key in
            ConflictRecord(
                date: now, entityName: object.entityName, objectID: object.id, property: key, losingSide: .local,
                losingValue: local[key] ?? .null, winningValue: .null, policy: Self.accessEndedPolicy)
        }
    }

    private func record(
        _ object: Object, _ property: String, _ side: ConflictRecord.Side, lost: AttributeValue, won: AttributeValue
    ) -> ConflictRecord {
        ConflictRecord(
            date: now, entityName: object.entityName, objectID: object.id, property: property, losingSide: side,
            losingValue: lost, winningValue: won, policy: policy.name)
    }
}
