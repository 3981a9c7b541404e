import CloudStoreWire
import Synchronization

extension SyncEngine {
    /// What the engine knows and has to do: pending record and zone changes, sync tokens, the
    /// signed-in user. As CKSyncEngine's `State`.
    ///
    /// Add and remove pending changes synchronously, from any thread, right where your data
    /// changes. With `automaticallySync` on, adding a change schedules a send.
    ///
    /// ```swift
    /// engine.state.add(pendingRecordZoneChanges: [.saveRecord(noteID)])
    /// engine.state.add(pendingDatabaseChanges: [.saveZone(ZoneID(zoneName: "Notes"))])
    /// ```
    ///
    /// Changes are de-duplicated per record (and per zone): save A, save B, save A gives
    /// [save A, save B]; save A then delete A gives [delete A]; delete A then save A gives [save A].
    ///
    /// Every change to the state is followed by a ``SyncEngine/Event/stateUpdate(_:)`` event that
    /// carries a new ``Serialization``; persist the latest one and pass it back in
    /// ``SyncEngine/Configuration/stateSerialization`` at the next launch.
    public final class State: Sendable, CustomStringConvertible {
        private let storage: Mutex<Storage>
        /// Told about changes the app made, so the engine can schedule work and emit a state update.
        private let observer = Mutex<(@Sendable (_ addedChanges: Bool) -> Void)?>(nil)

        init(_ serialization: Serialization?) {
            storage = Mutex(Storage(serialization ?? Serialization()))
        }

        // MARK: Pending changes

        /// The record changes waiting to be sent, in the order they were first added.
        public var pendingRecordZoneChanges: [PendingRecordZoneChange] {
            storage.withLock { $0.recordChanges.changes }
        }

        /// The zone changes waiting to be sent, in the order they were first added.
        public var pendingDatabaseChanges: [PendingDatabaseChange] {
            storage.withLock { $0.databaseChanges.changes }
        }

        /// Set this when your app has changes to send that it tracks itself rather than in
        /// ``pendingRecordZoneChanges``: the engine then asks the delegate for batches even when
        /// nothing is pending, and with `automaticallySync` on, schedules a send.
        ///
        /// The engine clears it before each question to the delegate, and sets it again when the
        /// answer says more is pending (``SyncEngine/RecordZoneChangeBatch/hasMorePendingChanges``)
        /// or a batch of these changes did not settle (a retry, a failed request): set it whenever
        /// your app has new changes. It is not part of the ``Serialization``: an app whose store
        /// holds unsent changes sets it when it starts the engine.
        ///
        /// ```swift
        /// try db.write { try note.save($0); try pendingUploads.insert(note.id, $0) }
        /// engine.state.hasPendingUntrackedChanges = true
        /// ```
        public var hasPendingUntrackedChanges: Bool {
            get { storage.withLock { $0.hasPendingUntrackedChanges } }
            set {
                let changed = storage.withLock { storage in
                    defer { storage.hasPendingUntrackedChanges = newValue }
                    return storage.hasPendingUntrackedChanges != newValue
                }
                if changed { notify(addedChanges: newValue) }
            }
        }

        /// Zones the server reported changed whose changes the engine has not fetched completely yet.
        public var zoneIDsWithUnfetchedServerChanges: [ZoneID] {
            storage.withLock { $0.zonesWithUnfetchedChanges }
        }

        /// Adds record changes to send, replacing any pending change for the same record in place.
        /// Adding a change that is already pending still marks it as changed again, so a send in
        /// flight does not remove it when the server acknowledges the earlier version.
        public func add(pendingRecordZoneChanges changes: [PendingRecordZoneChange]) {
            add(changes, to: \.recordChanges)
        }

        /// Removes record changes; a change is removed only where exactly it is pending.
        public func remove(pendingRecordZoneChanges changes: [PendingRecordZoneChange]) {
            remove(changes, from: \.recordChanges)
        }

        /// Adds zone changes to send, replacing any pending change for the same zone in place.
        public func add(pendingDatabaseChanges changes: [PendingDatabaseChange]) {
            add(changes, to: \.databaseChanges)
        }

        /// Removes zone changes; a change is removed only where exactly it is pending.
        public func remove(pendingDatabaseChanges changes: [PendingDatabaseChange]) {
            remove(changes, from: \.databaseChanges)
        }

        private func add<Change>(_ changes: [Change], to list: WritableKeyPath<Storage, PendingChangeList<Change>>) {
            guard !changes.isEmpty else { return }
            storage.withLock { storage in
                for change in changes { storage[keyPath: list].add(change) }
            }
            notify(addedChanges: true)
        }

        private func remove<Change>(_ changes: [Change], from list: WritableKeyPath<Storage, PendingChangeList<Change>>) {
            let removed = storage.withLock { storage in
                // Nothing to remove changes nothing: no state update is due.
                guard changes.contains(where: { storage[keyPath: list].change(for: $0.key) == $0 }) else { return false }
                return storage[keyPath: list].remove(changes)
            }
            if removed { notify(addedChanges: false) }
        }

        /// A snapshot of the whole state, to persist.
        public var serialization: Serialization {
            storage.withLock { $0.serialization }
        }

        /// Counts of the pending changes and zone tokens, and the user, for logs.
        public var description: String {
            storage.withLock { storage in
                "State(\(storage.recordChanges.count) record changes, \(storage.databaseChanges.count) zone changes, "
                    + "\(storage.zoneTokens.count) zone tokens, user \(storage.userRecordName ?? "unknown"))"
            }
        }

        // MARK: Engine side

        func setObserver(_ observer: @escaping @Sendable (_ addedChanges: Bool) -> Void) {
            self.observer.withLock { $0 = observer }
        }

        /// Reads or changes the storage under the lock; engine mutations do not notify the observer.
        func withStorage<T>(_ body: (inout Storage) throws -> T) rethrows -> T {
            try storage.withLock { try body(&$0) }
        }

        private func notify(addedChanges: Bool) {
            observer.withLock { $0 }?(addedChanges)
        }
    }
}

extension SyncEngine.State {
    /// The state's contents. Every mutation through ``SyncEngine/State`` bumps `version`, so the
    /// engine can tell whether a state update is due.
    struct Storage: Sendable {
        var userRecordName: String? { didSet { version &+= 1 } }
        var databaseToken: String? { didSet { version &+= 1 } }
        var zoneTokens: [ZoneID: String] { didSet { version &+= 1 } }
        var zonesWithUnfetchedChanges: [ZoneID] { didSet { version &+= 1 } }
        /// Zones whose fetch from scratch began and has not completed: until it completes, a
        /// delegate may count on it to bring every record of the zone, so the token moves only with
        /// fetched pages (``SyncEngine/apply(_:revisions:)`` takes none from a send).
        var zonesFetchingFromScratch: Set<ZoneID> { didSet { version &+= 1 } }
        var recordChanges: PendingChangeList<SyncEngine.PendingRecordZoneChange> { didSet { version &+= 1 } }
        var databaseChanges: PendingChangeList<SyncEngine.PendingDatabaseChange> { didSet { version &+= 1 } }
        /// Not persisted, and no state update is due for it (``SyncEngine/State/hasPendingUntrackedChanges``).
        var hasPendingUntrackedChanges = false
        var subscribedRecordTypes: Set<String> { didSet { version &+= 1 } }
        /// Raised by every change to the fields above, in their observers and nowhere else, so the
        /// engine can tell whether a state update is due; not persisted.
        private(set) var version: UInt64 = 0

        init(_ serialization: Serialization) {
            userRecordName = serialization.userRecordName
            databaseToken = serialization.databaseToken
            zoneTokens = Dictionary(
                serialization.zoneTokens.map { ($0.zoneID, $0.syncToken) }, uniquingKeysWith: { $1 })
            zonesWithUnfetchedChanges = serialization.zonesWithUnfetchedChanges
            zonesFetchingFromScratch = Set(serialization.zonesFetchingFromScratch)
            recordChanges = PendingChangeList(serialization.pendingRecordZoneChanges)
            databaseChanges = PendingChangeList(serialization.pendingDatabaseChanges)
            subscribedRecordTypes = Set(serialization.subscribedRecordTypes)
        }

        var serialization: Serialization {
            Serialization(
                userRecordName: userRecordName,
                databaseToken: databaseToken,
                zoneTokens: zoneTokens.map { .init(zoneID: $0.key, syncToken: $0.value) }
                    .sorted { Self.persistedOrder($0.zoneID, $1.zoneID) },
                zonesWithUnfetchedChanges: zonesWithUnfetchedChanges,
                zonesFetchingFromScratch: zonesFetchingFromScratch.sorted(by: Self.persistedOrder),
                pendingRecordZoneChanges: recordChanges.changes,
                pendingDatabaseChanges: databaseChanges.changes,
                subscribedRecordTypes: subscribedRecordTypes.sorted())
        }

        /// The order zones are persisted in, so that equal states serialize equally.
        static func persistedOrder(_ a: ZoneID, _ b: ZoneID) -> Bool {
            (a.zoneName, a.ownerRecordName ?? "") < (b.zoneName, b.ownerRecordName ?? "")
        }

        mutating func markUnfetched(_ zoneID: ZoneID) {
            guard !zonesWithUnfetchedChanges.contains(zoneID) else { return }
            zonesWithUnfetchedChanges.append(zoneID)
        }

        /// Notes that `changes/database` listed the zone as changed, at the zone's current `token`:
        /// it has unfetched changes unless this state already holds that token (the device's own
        /// writes brought it there, ``acceptsTokenAfterSend(from:in:)``) outside a fetch from scratch.
        mutating func markChanged(_ zoneID: ZoneID, token: String?) {
            if let token, zoneTokens[zoneID] == token, !zonesFetchingFromScratch.contains(zoneID) { return }
            markUnfetched(zoneID)
        }

        mutating func markFetched(_ zoneID: ZoneID) {
            guard let index = zonesWithUnfetchedChanges.firstIndex(of: zoneID) else { return }
            zonesWithUnfetchedChanges.remove(at: index)
        }

        /// Notes that a fetch of the zone from scratch began (`true`) or that a fetch of it completed.
        mutating func setFetchingFromScratch(_ fromScratch: Bool, _ zoneID: ZoneID) {
            guard fromScratch != zonesFetchingFromScratch.contains(zoneID) else { return }
            if fromScratch { zonesFetchingFromScratch.insert(zoneID) } else { zonesFetchingFromScratch.remove(zoneID) }
        }

        /// Whether a send may move the zone's token from `from` past its own writes: the state is
        /// still at `from`, and the zone's last fetch completed (nothing unfetched, no fetch from
        /// scratch under way).
        func acceptsTokenAfterSend(from: String?, in zoneID: ZoneID) -> Bool {
            zoneTokens[zoneID] == from && !zonesWithUnfetchedChanges.contains(zoneID)
                && !zonesFetchingFromScratch.contains(zoneID)
        }

        mutating func setZoneToken(_ token: String?, for zoneID: ZoneID) {
            guard zoneTokens[zoneID] != token else { return }
            zoneTokens[zoneID] = token
        }

        mutating func setDatabaseToken(_ token: String?) {
            guard databaseToken != token else { return }
            databaseToken = token
        }

        /// Forgets everything that belonged to the previous account, as CKSyncEngine does on an
        /// account switch: tokens, pending changes and unfetched zones.
        mutating func reset(userRecordName: String?) {
            let version = self.version
            self = Storage(Serialization(userRecordName: userRecordName))
            self.version = version + 1
        }
    }
}
