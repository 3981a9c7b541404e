import Foundation
import GRDB
import Synchronization

extension PersistentStore {
    /// A reader pinned to the store's current state (Core Data's `setQueryGenerationFrom(.current)`):
    /// all its reads see that one snapshot, whatever is committed meanwhile, until you
    /// ``QueryGeneration/advance()`` it, write through it, or ``QueryGeneration/close()`` it.
    ///
    /// ```swift
    /// let generation = try store.makeQueryGeneration()
    /// let notes = try generation.read { try $0.fetch(Note.self) }     // a list for the screen
    /// // … another device's changes are imported …
    /// let same = try generation.read { try $0.fetch(Note.self, id: notes[0].id) }  // still there
    /// try generation.advance()                                          // now show the new state
    /// ```
    ///
    /// Each generation holds a WAL read transaction on its own connection, so any number can be
    /// pinned at once and none blocks writers; but while one is pinned, SQLite cannot recycle the
    /// WAL past its snapshot, so the WAL file grows with every commit. Close generations you no
    /// longer need (a closed or released generation lets the next checkpoint complete).
    public func makeQueryGeneration() throws -> QueryGeneration {
        try QueryGeneration(store: self)
    }
}

/// A reader pinned to one state of a store; see ``PersistentStore/makeQueryGeneration()``.
public final class QueryGeneration: Sendable {
    let store: PersistentStore
    private let snapshot: Mutex<DatabaseSnapshot?>

    init(store: PersistentStore) throws {
        self.store = store
        self.snapshot = Mutex(try store.withStoreErrors("pinning a query generation") { try store.pool.makeSnapshot() })
    }

    /// The token of the last transaction this generation sees (nil if none).
    public var token: HistoryToken? {
        get throws {
            let number = try pinned().read { db in try PersistentStore.lastTransactionNumber(db) }
            return number == 0 ? nil : HistoryToken(storeIdentifier: store.storeIdentifier, transactionNumber: number)
        }
    }

    /// Runs `block` with a read context on the pinned state.
    @_disfavoredOverload
    public func read<T>(_ block: (ReadContext) throws -> T) throws -> T {
        let snapshot = try pinned()
        let layout = store.layout
        return try store.withStoreErrors("reading a query generation") {
            try snapshot.read { db in try block(ReadContext(db: db, layout: layout)) }
        }
    }

    /// Runs `block` with a read context on the pinned state, without blocking the caller's thread.
    public func read<T: Sendable>(_ block: @escaping @Sendable (ReadContext) throws -> T) async throws -> T {
        let snapshot = try pinned()
        let layout = store.layout
        return try await store.withStoreErrors("reading a query generation") {
            try await snapshot.read { db in try block(ReadContext(db: db, layout: layout)) }
        }
    }

    /// Moves the generation to the store's current state.
    public func advance() throws {
        let next = try store.withStoreErrors("advancing a query generation") { try store.pool.makeSnapshot() }
        let previous = snapshot.withLock { current -> DatabaseSnapshot? in
            guard current != nil else { return nil }
            defer { current = next }
            return current
        }
        guard previous != nil else { throw closedError }
    }

    /// Writes through the store (see ``PersistentStore/write(author:contextName:_:)-3mggj``), then
    /// advances the generation so it sees its own changes, as a Core Data context does when it saves.
    @discardableResult
    public func write<T>(author: String? = nil, contextName: String? = nil, _ block: (WriteContext) throws -> T) throws -> T {
        _ = try pinned()
        let result = try store.write(author: author, contextName: contextName, block)
        try advance()
        return result
    }

    /// Releases the pinned state: its read transaction ends (once reads in progress finish) and
    /// the WAL can be checkpointed past it. Later reads throw ``StoreError/Code/closed``.
    public func close() {
        // The snapshot is released after the lock, when the returned reference goes away.
        _ = snapshot.withLock { current -> DatabaseSnapshot? in
            defer { current = nil }
            return current
        }
    }

    private func pinned() throws -> DatabaseSnapshot {
        guard let current = snapshot.withLock({ $0 }) else { throw closedError }
        return current
    }

    private var closedError: StoreError {
        StoreError(.closed, "this query generation of \(store.path) is closed; make a new one with makeQueryGeneration()")
    }
}
