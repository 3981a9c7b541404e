import Foundation
import GRDB
import Observation
import Synchronization

extension PersistentStore {
    /// The results of a typed query, kept live: the current array first, then a new one after
    /// each commit that changed the objects the query reads.
    ///
    /// ```swift
    /// let inbox = FetchDescriptor<Note>(predicate: #Predicate { $0.folder == inboxID },
    ///                                   sortBy: [SortDescriptor(\.created, order: .reverse)])
    /// for try await notes in store.results(for: inbox) {
    ///     render(notes)
    /// }
    /// ```
    ///
    /// Which commits count is decided by persistent history: a commit of this process, of
    /// another process on the same file, or a sync import that changed an object in the results
    /// (its attributes, relationships or membership in a relationship), or an object of the
    /// query's entity that now matches its predicate, runs the query again; a commit that changed
    /// only other objects runs nothing (with a `fetchOffset`, any change of the entity runs it).
    /// The predicate is compiled once. ``LiveResults/removeDuplicates()`` also skips an array
    /// equal to the one before. Each array is one consistent
    /// state of the store, never part of a unit of work. A consumer slower than the commits sees
    /// the latest state when it asks for the next array, not a backlog of older ones: arrays are
    /// at most one per commit, fewer under load, and the last one is always current.
    ///
    /// Commits of this store instance are noticed at once, those of other processes within
    /// ``Configuration/observationPollInterval``. Iteration ends when the task is cancelled or the
    /// store is closed. The store must record history (``Configuration/recordsHistory``, the
    /// default); without it the first iteration throws.
    public func results<Model: PersistentModel>(for descriptor: FetchDescriptor<Model>) -> LiveResults<Model> {
        LiveResults(store: self, descriptor: descriptor)
    }
}

/// The live results of a typed query; see ``PersistentStore/results(for:)``.
public struct LiveResults<Model: PersistentModel>: AsyncSequence, Sendable {
    /// Each element is the query's whole result, in its sort order.
    public typealias Element = [Model]

    let store: PersistentStore
    let descriptor: FetchDescriptor<Model>
    /// Whether two arrays are equal, when arrays equal to the last are skipped.
    var isDuplicate: (@Sendable ([Model], [Model]) -> Bool)?
    /// Called before each run of the query (tests count the runs).
    var willRun: (@Sendable () -> Void)?

    /// Starts following the store; each iterator delivers its own first array.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(store: store, descriptor: descriptor, isDuplicate: isDuplicate, willRun: willRun)
    }

    /// Runs the query, then waits for a commit that may change its results and runs it again.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let store: PersistentStore
        let descriptor: FetchDescriptor<Model>
        let isDuplicate: (@Sendable ([Model], [Model]) -> Bool)?
        let willRun: (@Sendable () -> Void)?
        /// The last transaction the last array reflects; nil before the first array.
        var seen: Int64?
        /// The query's SQL, compiled on the first run.
        var compiled: CompiledFetch?
        /// What the last array depends on.
        var region: LiveQueryRegion?
        /// The last array delivered, kept only to skip an equal one.
        var last: [Model]?

        init(
            store: PersistentStore, descriptor: FetchDescriptor<Model>, isDuplicate: (@Sendable ([Model], [Model]) -> Bool)?,
            willRun: (@Sendable () -> Void)?
        ) {
            self.store = store
            self.descriptor = descriptor
            self.isDuplicate = isDuplicate
            self.willRun = willRun
        }

        /// The next array: the first at once, then after the next commit that may change it.
        /// Nil when the task is cancelled or the store closed.
        public mutating func next() async throws -> [Model]? {
            guard store.configuration.recordsHistory else {
                throw StoreError(
                    .invalidValue,
                    "live results follow persistent history, and the store at \(store.path) does not record it; open it with Configuration.recordsHistory = true")
            }
            while true {
                if Task.isCancelled || store.monitor.isClosed { return nil }
                let (store, descriptor, seen, compiled, region, willRun) = (store, descriptor, seen, compiled, region, willRun)
                let layout = store.layout
                let outcome: (last: Int64, compiled: CompiledFetch, results: [Model]?)
                do {
                    // A synchronous read, as the commit monitor's poll does: the reader goes back
                    // to the pool before this returns, never held across a suspension, so a
                    // `close()` on another thread of the cooperative pool cannot wait for a read
                    // that needs a thread of that pool to finish.
                    outcome = try store.withStoreErrors("reading live results") {
                        try store.pool.read { db in
                            let context = ReadContext(db: db, layout: layout)
                            let query = try compiled ?? context.compile(descriptor)
                            let last = try PersistentStore.lastTransactionNumber(db)
                            if let seen, let region {
                                guard last > seen else { return (last, query, nil) }
                                let changes = try store.changes(of: Model.entityName, db, after: seen, through: last)
                                switch region.decision(for: changes) {
                                case .unchanged:
                                    return (last, query, nil)
                                case .runIfAnyMatches(let ids):
                                    if try !context.anyMatches(query, among: ids) { return (last, query, nil) }
                                case .run:
                                    break
                                }
                            }
                            willRun?()
                            return (last, query, try context.fetch(query, Model.self))
                        }
                    }
                } catch {
                    if store.monitor.isClosed { return nil }
                    throw error
                }
                self.seen = outcome.last
                self.compiled = outcome.compiled
                if let results = outcome.results {
                    self.region = LiveQueryRegion(ids: Set(results.map(\.id)), skipsSome: descriptor.fetchOffset != nil)
                    if let isDuplicate {
                        if let last, isDuplicate(last, results) { continue }
                        self.last = results
                    }
                    return results
                }
                await store.waitForCommit(after: outcome.last)
            }
        }
    }
}

extension LiveResults where Model: Equatable {
    /// The same live results without an array equal to the one before it, as GRDB's
    /// `ValueObservation.removeDuplicates()`: a commit that changed an object of the query
    /// without changing the results delivers nothing.
    ///
    /// ```swift
    /// for try await notes in store.results(for: inbox).removeDuplicates() { render(notes) }
    /// ```
    public func removeDuplicates() -> LiveResults {
        var results = self
        results.isDuplicate = { $0 == $1 }
        return results
    }
}

extension PersistentStore {
    /// The changes of objects of `entity` in the transactions after `seen` and up to `last`, in
    /// order; nil when the history they are in was purged (the caller cannot know what changed).
    func changes(of entity: String, _ db: Database, after seen: Int64, through last: Int64) throws -> [(id: UUID, isDelete: Bool)]? {
        let purgedThrough = try db.integer("SELECT value FROM cloudstore_metadata WHERE key = 'historyPurgedThrough'") ?? 0
        if purgedThrough > seen { return nil }
        var changes: [(id: UUID, isDelete: Bool)] = []
        try db.each(
            """
            SELECT changes FROM cloudstore_history_transaction WHERE token > ? AND token <= ? \
            AND EXISTS (SELECT 1 FROM json_each(entities) WHERE value = ?) ORDER BY token
            """,
            [.int64(seen), .int64(last), .string(entity)]
        ) { statement in
            for change in try HistoryEncoding.decode(columnData(statement, 0), keepEntity: { $0 == entity }) {
                changes.append((change.objectID, change.changeType == .delete))
            }
        }
        return changes
    }
}

/// The live results of a typed query as an `Observable` property, for code that binds to a value
/// (a view model, a SwiftUI view on Apple platforms) rather than iterating.
///
/// ```swift
/// let notes = ObservedResults(store: store, FetchDescriptor<Note>(sortBy: [SortDescriptor(\.title)]))
/// withObservationTracking { show(notes.results) } onChange: { scheduleRedraw() }
/// ```
///
/// It starts following ``PersistentStore/results(for:)`` when made and stops when released or
/// cancelled. ``results`` is empty until the first array arrives; a failure stops it and sets
/// ``error``.
public final class ObservedResults<Model: PersistentModel>: Observable, Sendable {
    private struct State {
        var results: [Model] = []
        var error: (any Error)?
        var task: Task<Void, Never>?
    }

    private let registrar = ObservationRegistrar()
    private let state = Mutex(State())

    /// Starts following `descriptor`'s results in `store` (every object of the model, unsorted,
    /// by default).
    public init(store: PersistentStore, _ descriptor: FetchDescriptor<Model> = FetchDescriptor()) {
        let task = Task { [weak self] in
            do {
                for try await results in store.results(for: descriptor) {
                    guard let self else { return }
                    self.registrar.withMutation(of: self, keyPath: \.results) {
                        self.state.withLock { $0.results = results }
                    }
                }
            } catch {
                guard let self else { return }
                self.registrar.withMutation(of: self, keyPath: \.error) {
                    self.state.withLock { $0.error = error }
                }
            }
        }
        state.withLock { $0.task = task }
    }

    deinit {
        state.withLock { $0.task?.cancel() }
    }

    /// The query's current results.
    public var results: [Model] {
        registrar.access(self, keyPath: \.results)
        return state.withLock { $0.results }
    }

    /// Why the results stopped following the store, if they did.
    public var error: (any Error)? {
        registrar.access(self, keyPath: \.error)
        return state.withLock { $0.error }
    }

    /// Stops following the store; ``results`` keeps its last value.
    public func cancel() {
        state.withLock { $0.task?.cancel() }
    }
}
