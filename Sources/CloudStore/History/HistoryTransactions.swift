import Foundation

extension PersistentStore {
    /// The committed history transactions after `token`, then each new one as it commits, for
    /// as long as you iterate: in commit order, each exactly once, including transactions
    /// committed by other processes (or other store instances) on the same file.
    ///
    /// Pass nil to start with all the history the store keeps, or ``currentHistoryToken()`` to
    /// see only what happens from now on. Save the token of each transaction you have handled
    /// and pass it back after a restart: no transaction is missed or repeated.
    ///
    /// ```swift
    /// for try await transaction in store.transactions(after: savedToken,
    ///                                                   matching: HistoryFilter(entities: ["Note"])) {
    ///     refresh(transaction.changes)
    ///     savedToken = transaction.token
    /// }
    /// ```
    ///
    /// Commits of this store instance are delivered right after they commit; commits of other
    /// processes are noticed within ``Configuration/observationPollInterval``. Iteration ends
    /// when the task is cancelled or the store is closed, and throws
    /// ``StoreError/Code/historyTokenExpired`` if the history it needs was purged.
    public func transactions(after token: HistoryToken?, matching filter: HistoryFilter = .all) -> HistoryTransactions {
        HistoryTransactions(store: self, start: token, filter: filter)
    }
}

/// An endless sequence of committed history transactions; see ``PersistentStore/transactions(after:matching:)``.
public struct HistoryTransactions: AsyncSequence, Sendable {
    /// Each element is one committed transaction.
    public typealias Element = HistoryTransaction

    let store: PersistentStore
    let start: HistoryToken?
    let filter: HistoryFilter

    /// Starts reading after the sequence's token; each iterator keeps its own position.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(store: store, position: start, filter: filter)
    }

    /// Reads the history in pages and waits for new commits once it has delivered them all.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let store: PersistentStore
        var position: HistoryToken?
        let filter: HistoryFilter
        var buffer: [HistoryTransaction] = []

        /// The next transaction; nil when the task is cancelled or the store closed.
        public mutating func next() async throws -> HistoryTransaction? {
            while true {
                if !buffer.isEmpty {
                    let transaction = buffer.removeFirst()
                    position = transaction.token
                    return transaction
                }
                if Task.isCancelled || store.monitor.isClosed { return nil }
                let pageFilter = HistoryFilter(
                    authors: filter.authors, excludingAuthors: filter.excludingAuthors, entities: filter.entities,
                    limit: 256)
                let (store, after) = (store, position)
                let page: (transactions: [HistoryTransaction], scannedThrough: Int64)
                do {
                    page = try await store.withStoreErrors("reading history") {
                        try await store.pool.read { db in try store.historyPage(db, after: after, filter: pageFilter) }
                    }
                } catch {
                    if store.monitor.isClosed { return nil }
                    throw error
                }
                buffer = page.transactions
                let scanned = page.scannedThrough
                if scanned > (position?.transactionNumber ?? 0) {
                    if buffer.isEmpty {
                        position = HistoryToken(storeIdentifier: store.storeIdentifier, transactionNumber: scanned)
                    }
                    continue
                }
                await store.waitForCommit(after: scanned)
            }
        }
    }
}
