import Foundation

/// The three-way, field-by-field merge of an object this device changed with the server's copy,
/// against the copy both last agreed on (the ancestor). Pure: no I/O, so tests drive it directly.
struct FieldMerge {
    /// This device's current values and the keys it changed since the ancestor, with when.
    var local: [String: AttributeValue]
    var localChanges: [String: Date]
    /// The server copy both sides last agreed on; nil when this device never saw one (two devices
    /// created the same object), so every server value counts as a change.
    var ancestor: [String: AttributeValue]?
    var server: [String: AttributeValue]
    /// When the server's values were edited, per field, where the record says.
    var serverChanges: [String: Date] = [:]
    /// When the server record was last written, for fields without an edit time.
    var serverModified: Date?

    struct Outcome: Equatable {
        /// The values the object should have: every key of either side.
        var merged: [String: AttributeValue]
        /// The keys whose merged value differs from the server's and must be uploaded.
        var keysToUpload: Set<String>
        /// Every value that lost.
        var conflicts: [ConflictRecord]
    }

    func resolve(
        entityName: String, objectID: UUID, policy: ConflictPolicy, now: Date
    ) -> Outcome {
        var outcome = Outcome(merged: server, keysToUpload: [], conflicts: [])
        for key in Set(local.keys).union(server.keys).sorted() {
            let localValue = local[key] ?? .null
            let serverValue = server[key] ?? .null
            let localChanged = localChanges[key] != nil
            let serverChanged = ancestor.map { ($0[key] ?? .null) != serverValue } ?? true
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
                entityName: entityName, objectID: objectID, property: key, ancestorValue: ancestor?[key],
                localValue: localValue, serverValue: serverValue, localModified: localChanges[key],
                serverModified: serverChanges[key] ?? serverModified)
            let resolution = Self.resolution(of: conflict, policy: policy)
            func log(_ side: ConflictRecord.Side, lost: AttributeValue, won: AttributeValue) {
                outcome.conflicts.append(
                    ConflictRecord(
                        date: now, entityName: entityName, objectID: objectID, property: key, losingSide: side,
                        losingValue: lost, winningValue: won, policy: policy.name))
            }
            switch resolution {
            case .server:
                outcome.merged[key] = serverValue
                log(.local, lost: localValue, won: serverValue)
            case .local:
                outcome.merged[key] = localValue
                outcome.keysToUpload.insert(key)
                log(.server, lost: serverValue, won: localValue)
            case .value(let value):
                outcome.merged[key] = value
                if value != serverValue {
                    outcome.keysToUpload.insert(key)
                    log(.server, lost: serverValue, won: value)
                }
                if value != localValue { log(.local, lost: localValue, won: value) }
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
}
