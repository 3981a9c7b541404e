import CloudStoreWire
import Foundation

/// The storage side of `records/modify`, once for every backend: what it reads, in which order,
/// and what each planned write means in rows. A pure state machine that does no I/O and reads no
/// clock: a backend runs it in the transaction of ``ServerStorage/modifyRecords(in:loading:decide:)``,
/// after locking the partition, answering each ``Read`` and applying each ``Operation`` in its own
/// SQL (``run(deciding:read:write:)``).
///
/// 1. Reads the zone, the named rows, the schema, the receipts and the zone's share
///    (``Read/snapshot(names:receipts:)``); the script ends there when the zone does not exist.
/// 2. Reads, level by level, the live records referring with `DELETE_SELF` to what a delete may
///    reach, and those of their rows it has not read (``CascadeSearch``).
/// 3. Asks for the plan (``Step/decide(_:)``); while the plan asks for unique keys
///    (``RecordSnapshot/MissingUniqueKeys``), reads their holders and the holders' rows it has
///    not read, and asks again.
/// 4. When the plan writes anything, in this order: removes the references, then the unique keys,
///    of the records the writes may replace (``RecordWrite/mayReplaceLive(_:read:)``), inserts the
///    writes' unique keys, writes the rows (``RecordRows``: each write at the zone's next sequence,
///    their references, the zone's sequences, the assets the replaced records no longer hold
///    released and those the writes hold saved) with the partition's next database sequence,
///    stores the schema over the version read (else throws ``StorageRetry``: the backend runs the
///    transaction again), applies the share change, and raises the shared databases the writes
///    change.
/// 5. Reads the subscriptions watching the zone; when any fires (``NotificationPlan``), inserts
///    the notifications, deletes the `firesOnce` subscriptions that fired, and removes the
///    notifications older than ``NotificationPlan/retention``.
///
/// Every list a step carries is in a fixed order (names sorted, writes in plan order), so a
/// backend's statements and the notifications' order do not depend on a dictionary's.
struct RecordWriteScript: Sendable {
    /// What the backend does next.
    enum Step: Sendable {
        /// Read, and hand the answer to ``take(_:)``.
        case read(Read)
        /// Plan the writes on this snapshot, and hand the plan (or the unique keys it asks for)
        /// to ``take(plan:)``.
        case decide(RecordSnapshot)
        /// Apply, and hand the answer to ``take(_:)``.
        case write(Operation)
        /// The rows written, in order (none when the plan wrote nothing); nil when the zone does
        /// not exist.
        case finished([StoredRecord]?)
    }

    let zone: ZoneAddress
    let request: RecordSnapshotRequest
    /// When the notifications are written.
    let now: Date
    let assetLifetime: AssetLifetime
    let newNotificationID: @Sendable () -> String
    private var phase = Phase.start
    /// Every name whose row was read: its row, if it has one, is in the snapshot.
    private var namesRead: Set<String> = []

    init(
        zone: ZoneAddress, loading request: RecordSnapshotRequest, now: Date, assetLifetime: AssetLifetime,
        newNotificationID: @escaping @Sendable () -> String = { UUID().uuidString.lowercased() }
    ) {
        self.zone = zone
        self.request = request
        self.now = now
        self.assetLifetime = assetLifetime
        self.newNotificationID = newNotificationID
    }

    private enum Phase: Sendable {
        case start
        case readingSnapshot
        case readingReferrers(RecordSnapshot, CascadeSearch)
        case readingCascadeRows(RecordSnapshot, CascadeSearch)
        case deciding(RecordSnapshot)
        case readingKeyHolders(RecordSnapshot, keys: Set<String>)
        case readingHolderRows(RecordSnapshot, keys: Set<String>, holders: [String: String])
        /// Applying `writing.operations.first`.
        case applying(Writing)
        /// Reading `writing.subscriptionReads.first`.
        case readingSubscriptions(Writing)
        case finished
    }

    /// The first step.
    mutating func start() -> Step {
        guard case .start = phase else { preconditionFailure("a record write's script started twice") }
        phase = .readingSnapshot
        namesRead = request.names
        return .read(.snapshot(names: request.names.sorted(), receipts: request.receipts.sorted()))
    }

    /// Takes the answer of the last ``Step/read(_:)`` or ``Step/write(_:)``.
    mutating func take(_ answer: Answer) throws -> Step {
        switch (phase, answer) {
        case (.readingSnapshot, .snapshot(let snapshot)):
            guard let snapshot else { return finish(nil) }
            return searchCascade(snapshot, CascadeSearch(roots: request.cascadeRoots))
        case (.readingReferrers(let snapshot, var search), .referrers(let pairs)):
            search.advance(with: pairs)
            let unread = search.frontier.filter { snapshot.records[$0] == nil }
            guard !unread.isEmpty else { return searchCascade(snapshot, search) }
            phase = .readingCascadeRows(snapshot, search)
            return readRows(unread)
        case (.readingCascadeRows(var snapshot, let search), .rows(let rows)):
            snapshot.records.merge(rows) { $1 }
            return searchCascade(snapshot, search)
        case (.readingKeyHolders(let snapshot, let keys), .uniqueKeyHolders(let holders)):
            let unread = Set(holders.values).filter { snapshot.records[$0] == nil }
            guard !unread.isEmpty else { return decide(snapshot, adding: keys, holders: holders, rows: [:]) }
            phase = .readingHolderRows(snapshot, keys: keys, holders: holders)
            return readRows(unread)
        case (.readingHolderRows(let snapshot, let keys, let holders), .rows(let rows)):
            return decide(snapshot, adding: keys, holders: holders, rows: rows)
        case (.applying(var writing), _):
            try writing.take(answer, to: writing.operations.removeFirst())
            return apply(writing)
        case (.readingSubscriptions(var writing), .subscriptions(let found)):
            writing.subscriptionReads.removeFirst()
            writing.watch(found)
            return readSubscriptions(writing)
        default:
            preconditionFailure("a record write's script was answered out of turn")
        }
    }

    /// Takes what the plan answered to the last ``Step/decide(_:)``: the writes, or the unique keys
    /// it asks for first.
    mutating func take(plan decided: Result<RecordWritePlan, RecordSnapshot.MissingUniqueKeys>) -> Step {
        guard case .deciding(let snapshot) = phase else {
            preconditionFailure("a record write's script was given a plan out of turn")
        }
        switch decided {
        case .failure(let missing):
            phase = .readingKeyHolders(snapshot, keys: missing.keys)
            return .read(.uniqueKeyHolders(missing.keys.sorted()))
        case .success(let plan):
            guard !plan.writes.isEmpty else { return finish([]) }
            return apply(Writing(plan, after: snapshot, read: namesRead, assetLifetime: assetLifetime))
        }
    }

    /// Reads rows by name (``namesRead`` from then on).
    private mutating func readRows(_ names: some Collection<String>) -> Step {
        namesRead.formUnion(names)
        return .read(.rows(named: names.sorted()))
    }

    /// Reads the next level of the cascade, or asks for the plan once there is none.
    private mutating func searchCascade(_ snapshot: RecordSnapshot, _ search: CascadeSearch) -> Step {
        var snapshot = snapshot
        snapshot.deleteSelfReferrers = search.referrers
        guard search.frontier.isEmpty else {
            phase = .readingReferrers(snapshot, search)
            return .read(.deleteSelfReferrers(of: search.frontier.sorted()))
        }
        phase = .deciding(snapshot)
        return .decide(snapshot)
    }

    /// Asks for the plan again, with the unique keys it asked for.
    private mutating func decide(
        _ snapshot: RecordSnapshot, adding keys: Set<String>, holders: [String: String], rows: [String: StoredRecord]
    ) -> Step {
        var snapshot = snapshot
        snapshot.add(uniqueKeys: keys, holders: holders, rows: rows)
        phase = .deciding(snapshot)
        return .decide(snapshot)
    }

    /// The next operation; once the writes' are applied, the subscriptions; once the
    /// notifications' are, the end.
    private mutating func apply(_ writing: Writing) -> Step {
        if let operation = writing.operations.first {
            phase = .applying(writing)
            return .write(operation)
        }
        guard !writing.notified else { return finish(writing.written) }
        var writing = writing
        writing.subscriptionReads = subscriptionReads(writing)
        return readSubscriptions(writing)
    }

    /// The next subscriptions to read; once read, the notifications they fire.
    private mutating func readSubscriptions(_ writing: Writing) -> Step {
        if let read = writing.subscriptionReads.first {
            phase = .readingSubscriptions(writing)
            return .read(read)
        }
        var writing = writing
        writing.notified = true
        writing.operations = notifications(writing)
        return apply(writing)
    }

    /// The subscriptions the writes may fire: in the public database, everyone's query
    /// subscriptions to the types written; in a private one, the owner's; and those of each shared
    /// database the writes raised.
    private func subscriptionReads(_ writing: Writing) -> [Read] {
        let partition = zone.partition
        var reads: [Read] = []
        if partition.scope == .public {
            reads.append(.publicSubscriptions(recordTypes: Set(writing.writes.map(\.type)).sorted()))
        }
        var subscribers: [Subscriber] = []
        if partition.scope == .private {
            subscribers.append(
                Subscriber(container: partition.container, environment: partition.environment, scope: .private, user: partition.owner))
        }
        for user in writing.sharedSeqs.keys.sorted() {
            subscribers.append(Subscriber(container: partition.container, environment: partition.environment, scope: .shared, user: user))
        }
        if !subscribers.isEmpty { reads.append(.subscriptions(of: subscribers)) }
        return reads
    }

    /// The operations that store the notifications the writes fire (none when none fires): in
    /// order of watcher (the zone's own database first, then the shared databases by user, each
    /// user's subscriptions by ID), and within a subscription in order of write.
    private func notifications(_ writing: Writing) -> [Operation] {
        guard !writing.watches.isEmpty else { return [] }
        let watches = writing.watches.sorted {
            ($0.subscriber.scope == .shared ? 1 : 0, $0.subscriber.user, $0.subscription.subscriptionID)
                < ($1.subscriber.scope == .shared ? 1 : 0, $1.subscriber.user, $1.subscription.subscriptionID)
        }
        let plan = NotificationPlan(
            zone: zone, events: RecordEvent.events(of: writing.writes, before: writing.before), watches: watches,
            newID: newNotificationID)
        guard !plan.notifications.isEmpty else { return [] }
        var operations: [Operation] = [.insertNotifications(plan.notifications, createdAt: now)]
        if !plan.fired.isEmpty {
            operations.append(.deleteSubscriptions(plan.fired.map { SubscriptionKey(subscriber: $0.subscriber, id: $0.subscriptionID) }))
        }
        operations.append(.removeNotifications(createdBefore: now.addingTimeInterval(-NotificationPlan.retention)))
        return operations
    }

    private mutating func finish(_ written: [StoredRecord]?) -> Step {
        phase = .finished
        return .finished(written)
    }
}

extension RecordWriteScript {
    /// What the writing steps know: the plan, the rows it read and wrote, what is left to apply
    /// and read, and the sequences the backend assigned.
    private struct Writing: Sendable {
        /// The rows the plan read.
        var before: [String: StoredRecord]
        var writes: [RecordWrite]
        var written: [StoredRecord]
        var operations: [Operation]
        var dbSeq: Int64 = 0
        var sharedSeqs: [String: Int64] = [:]
        var subscriptionReads: [Read] = []
        var watches: [SubscriptionWatch] = []
        /// Whether ``operations`` are the notifications'.
        var notified = false

        /// The operations of a plan's writes, each at the zone's next sequence. `read`: the names
        /// whose rows were read into the snapshot.
        init(_ plan: RecordWritePlan, after snapshot: RecordSnapshot, read: Set<String>, assetLifetime: AssetLifetime) {
            before = snapshot.records
            writes = plan.writes
            var rows = RecordRows(zoneSeq: snapshot.zone.seq)
            var replaced: [String] = []
            var keysReplaced: [String] = []
            var keys: [UniqueKeyRow] = []
            for write in plan.writes {
                rows.zoneSeq += 1
                let replacesLive = write.mayReplaceLive(snapshot.records, read: read)
                switch write.change {
                case .save(let content, _, let targets):
                    rows.records.append(StoredRecord(name: write.name, type: write.type, seq: rows.zoneSeq, content: content, deletedAt: nil))
                    rows.references += targets.sorted().map { ReferenceRow(source: write.name, target: $0) }
                case .delete:
                    rows.records.append(
                        StoredRecord(name: write.name, type: write.type, seq: rows.zoneSeq, content: nil, deletedAt: write.time))
                }
                if let recordKeys = write.uniqueKeys {
                    if replacesLive { keysReplaced.append(write.name) }
                    keys += recordKeys.map { UniqueKeyRow(key: $0, type: write.type, source: write.name) }
                }
                let assetIDs = write.assetIDs
                if replacesLive {
                    replaced.append(write.name)
                    rows.releasedAssets.append(
                        AssetRelease(record: write.name, removableAt: assetLifetime.removableAt(after: write.assetRelease)))
                }
                if !assetIDs.isEmpty { rows.savedAssets.append(AssetSave(record: write.name, assetIDs: assetIDs)) }
            }
            written = rows.records
            operations = []
            if !replaced.isEmpty { operations.append(.removeReferences(sources: replaced)) }
            if !keysReplaced.isEmpty { operations.append(.removeUniqueKeys(sources: keysReplaced)) }
            if !keys.isEmpty { operations.append(.insertUniqueKeys(keys)) }
            operations.append(.writeRecords(rows))
            if let schema = plan.schema { operations.append(.storeSchema(schema, replacing: snapshot.schema.version ?? 0)) }
            if let change = plan.share { operations.append(.applyShare(change)) }
            if !plan.sharedDatabases.isEmpty { operations.append(.advanceSharedDatabases(plan.sharedDatabases)) }
        }

        /// Takes the answer to an operation: the sequences it assigned, or whether the schema was
        /// stored (``StorageRetry`` when it was not).
        mutating func take(_ answer: Answer, to operation: Operation) throws {
            switch (operation, answer) {
            case (.writeRecords, .databaseSeq(let seq)):
                dbSeq = seq
            case (.storeSchema, .schemaStored(let stored)):
                guard stored else { throw StorageRetry() }
            case (.advanceSharedDatabases, .sharedDatabaseSeqs(let seqs)):
                sharedSeqs = seqs
            case (.removeReferences, .applied), (.removeUniqueKeys, .applied), (.insertUniqueKeys, .applied), (.applyShare, .applied),
                (.insertNotifications, .applied), (.deleteSubscriptions, .applied), (.removeNotifications, .applied):
                break
            default:
                preconditionFailure("a record write's script was answered out of turn")
            }
        }

        /// Takes subscriptions read: each watches at the sequence the writes gave its database.
        mutating func watch(_ found: [(subscriber: Subscriber, subscription: Subscription)]) {
            for (subscriber, subscription) in found {
                let seq = subscriber.scope == .shared ? sharedSeqs[subscriber.user] ?? dbSeq : dbSeq
                watches.append(SubscriptionWatch(subscriber: subscriber, subscription: subscription, dbSeq: seq))
            }
        }
    }
}

extension RecordWriteScript {
    /// Runs the script with a backend's synchronous reads and row operations (SQLite, inside its
    /// write transaction). Answers nil when the zone does not exist, else the decision and the
    /// rows written.
    func run<Decision>(
        deciding decide: (RecordSnapshot) throws -> (RecordWritePlan, Decision), read: (Read) throws -> Answer,
        write: (Operation) throws -> Answer
    ) throws -> (Decision, [StoredRecord])? {
        var script = self
        var decision: Decision?
        var step = script.start()
        while true {
            switch step {
            case .read(let request): step = try script.take(try read(request))
            case .write(let operation): step = try script.take(try write(operation))
            case .decide(let snapshot): step = script.take(plan: try Self.decide(snapshot, decide, into: &decision))
            case .finished(let written): return Self.result(written, decision)
            }
        }
    }

    /// ``run(deciding:read:write:)`` with a backend's asynchronous reads and row operations
    /// (PostgreSQL, on its transaction's connection).
    func run<Decision>(
        deciding decide: (RecordSnapshot) throws -> (RecordWritePlan, Decision), read: (Read) async throws -> Answer,
        write: (Operation) async throws -> Answer
    ) async throws -> (Decision, [StoredRecord])? {
        var script = self
        var decision: Decision?
        var step = script.start()
        while true {
            switch step {
            case .read(let request): step = try script.take(try await read(request))
            case .write(let operation): step = try script.take(try await write(operation))
            case .decide(let snapshot): step = script.take(plan: try Self.decide(snapshot, decide, into: &decision))
            case .finished(let written): return Self.result(written, decision)
            }
        }
    }

    /// The plan `decide` makes of a snapshot, keeping its decision; or the unique keys it asks for.
    private static func decide<Decision>(
        _ snapshot: RecordSnapshot, _ decide: (RecordSnapshot) throws -> (RecordWritePlan, Decision), into decision: inout Decision?
    ) throws -> Result<RecordWritePlan, RecordSnapshot.MissingUniqueKeys> {
        try snapshot.decision(decide).map { plan, decided in
            decision = decided
            return plan
        }
    }

    private static func result<Decision>(_ written: [StoredRecord]?, _ decision: Decision?) -> (Decision, [StoredRecord])? {
        guard let written else { return nil }
        guard let decision else { preconditionFailure("a record write's script finished without a decision") }
        return (decision, written)
    }
}
