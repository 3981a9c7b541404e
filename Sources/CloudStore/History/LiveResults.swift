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
    /// another process on the same file, or a sync import that changed an object of the query's
    /// entity (its attributes, relationships or membership in a relationship) runs the query
    /// again; a commit that changed only other entities runs nothing. Each array is one consistent
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

    /// Starts following the store; each iterator delivers its own first array.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(store: store, descriptor: descriptor)
    }

    /// Runs the query, then waits for a commit that changed its entity and runs it again.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let store: PersistentStore
        let descriptor: FetchDescriptor<Model>
        /// The last transaction the last array reflects; nil before the first array.
        var seen: Int64?

        init(store: PersistentStore, descriptor: FetchDescriptor<Model>) {
            self.store = store
            self.descriptor = descriptor
        }

        /// The next array: the first at once, then after the next commit that changed the
        /// query's entity. Nil when the task is cancelled or the store closed.
        public mutating func next() async throws -> [Model]? {
            guard store.configuration.recordsHistory else {
                throw StoreError(
                    .invalidValue,
                    "live results follow persistent history, and the store at \(store.path) does not record it; open it with Configuration.recordsHistory = true")
            }
            while true {
                if Task.isCancelled || store.monitor.isClosed { return nil }
                let (store, descriptor, seen) = (store, descriptor, seen)
                let layout = store.layout
                let outcome: (last: Int64, results: [Model]?)
                do {
                    outcome = try await store.withStoreErrors("reading live results") {
                        try await store.pool.read { db in
                            let last = try PersistentStore.lastTransactionNumber(db)
                            if let seen, try !store.changed(Model.entityName, db, after: seen, through: last) {
                                return (last, nil)
                            }
                            return (last, try ReadContext(db: db, layout: layout).fetch(descriptor))
                        }
                    }
                } catch {
                    if store.monitor.isClosed { return nil }
                    throw error
                }
                self.seen = outcome.last
                if let results = outcome.results { return results }
                await store.waitForCommit(after: outcome.last)
            }
        }
    }
}

extension PersistentStore {
    /// Whether a transaction after `seen` and up to `last` changed an object of `entity`. True
    /// when the history it would read was purged: the caller cannot know, so it reads again.
    func changed(_ entity: String, _ db: Database, after seen: Int64, through last: Int64) throws -> Bool {
        guard last > seen else { return false }
        let purgedThrough = try db.integer("SELECT value FROM cloudstore_metadata WHERE key = 'historyPurgedThrough'") ?? 0
        if purgedThrough > seen { return true }
        let found = try db.integer(
            """
            SELECT 1 FROM cloudstore_history_transaction WHERE token > ? AND token <= ? \
            AND EXISTS (SELECT 1 FROM json_each(entities) WHERE value = ?) LIMIT 1
            """,
            [.int64(seen), .int64(last), .string(entity)])
        return found != nil
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
