import CloudStoreWire

extension SyncEngine {
    /// A record change the app wants sent to the server, as CKSyncEngine's `PendingRecordZoneChange`.
    ///
    /// The engine keeps only the record's ID; it asks the delegate for the record itself when it
    /// builds a batch (``SyncEngineDelegate/nextRecordZoneChangeBatch(_:syncEngine:)``).
    public enum PendingRecordZoneChange: Hashable, Sendable, Codable, CustomStringConvertible {
        /// Save the record: the delegate hands over its current version when a batch is built.
        case saveRecord(RecordID)
        /// Delete the record from the server.
        case deleteRecord(RecordID)

        /// The record the change is about.
        public var recordID: RecordID {
            switch self {
            case .saveRecord(let recordID), .deleteRecord(let recordID): recordID
            }
        }

        /// The change as logs show it: `save <record>` or `delete <record>`.
        public var description: String {
            switch self {
            case .saveRecord(let recordID): "save \(recordID)"
            case .deleteRecord(let recordID): "delete \(recordID)"
            }
        }
    }

    /// A zone change the app wants sent to the server, as CKSyncEngine's `PendingDatabaseChange`.
    public enum PendingDatabaseChange: Hashable, Sendable, Codable, CustomStringConvertible {
        /// Create the zone on the server; creating a zone that exists succeeds.
        case saveZone(ZoneID)
        /// Delete the zone and every record in it from the server.
        case deleteZone(ZoneID)

        /// The zone the change is about.
        public var zoneID: ZoneID {
            switch self {
            case .saveZone(let zoneID), .deleteZone(let zoneID): zoneID
            }
        }

        /// The change as logs show it: `save zone <zone>` or `delete zone <zone>`.
        public var description: String {
            switch self {
            case .saveZone(let zoneID): "save zone \(zoneID)"
            case .deleteZone(let zoneID): "delete zone \(zoneID)"
            }
        }
    }
}

/// A pending change that names the one thing it changes, so a list keeps one change per thing.
protocol KeyedPendingChange: Hashable, Sendable {
    associatedtype Key: Hashable, Sendable
    var key: Key { get }
}

extension SyncEngine.PendingRecordZoneChange: KeyedPendingChange {
    var key: RecordID { recordID }
}

extension SyncEngine.PendingDatabaseChange: KeyedPendingChange {
    var key: ZoneID { zoneID }
}

/// An ordered list of pending changes with at most one change per record (or zone).
///
/// The rules are CKSyncEngine's: adding a change for a key already in the list replaces it in
/// place, so save A, save B, save A gives [save A, save B]; save A then delete A gives
/// [delete A]; delete A then save A gives [save A].
///
/// Every add stamps the key with a new revision. The engine notes the revisions of the changes it
/// sends and removes a change after the server acknowledged it only if its revision is unchanged:
/// a change the app added again while the request was in flight stays pending.
struct PendingChangeList<Change: KeyedPendingChange>: Sendable {
    private(set) var changes: [Change] = []
    private var positions: [Change.Key: Int] = [:]
    private var revisions: [Change.Key: UInt64] = [:]
    private var nextRevision: UInt64 = 1

    init(_ changes: [Change] = []) {
        for change in changes { add(change) }
    }

    var isEmpty: Bool { changes.isEmpty }
    var count: Int { changes.count }

    func change(for key: Change.Key) -> Change? {
        positions[key].map { changes[$0] }
    }

    /// The revision of every pending change, to note before sending them.
    var revisionsByKey: [Change.Key: UInt64] { revisions }

    /// Adds a change, replacing any change for the same key in place. Returns whether the list changed.
    @discardableResult
    mutating func add(_ change: Change) -> Bool {
        revisions[change.key] = nextRevision
        nextRevision += 1
        if let position = positions[change.key] {
            guard changes[position] != change else { return false }
            changes[position] = change
            return true
        }
        positions[change.key] = changes.count
        changes.append(change)
        return true
    }

    /// Removes the given changes where the list holds exactly them (a save does not remove a
    /// pending delete of the same record). Returns whether the list changed.
    @discardableResult
    mutating func remove(_ toRemove: some Sequence<Change>) -> Bool {
        let keys = Set(toRemove.filter { change(for: $0.key) == $0 }.map(\.key))
        return removeKeys(keys)
    }

    /// Removes changes the server acknowledged, unless they were added again since `revisions`
    /// were noted. Returns whether the list changed.
    @discardableResult
    mutating func removeAcknowledged(_ acknowledged: some Sequence<Change>, revisions noted: [Change.Key: UInt64])
        -> Bool
    {
        let keys = Set(
            acknowledged.filter { change in
                self.change(for: change.key) == change && revisions[change.key] == noted[change.key]
            }.map(\.key))
        return removeKeys(keys)
    }

    @discardableResult
    mutating func removeAll(where shouldRemove: (Change) -> Bool) -> Bool {
        removeKeys(Set(changes.filter(shouldRemove).map(\.key)))
    }

    private mutating func removeKeys(_ keys: Set<Change.Key>) -> Bool {
        guard !keys.isEmpty else { return false }
        changes.removeAll { keys.contains($0.key) }
        positions = Dictionary(uniqueKeysWithValues: changes.enumerated().map { ($0.element.key, $0.offset) })
        for key in keys { revisions[key] = nil }
        return true
    }
}
