import Foundation
import GRDB

/// Writes its own bookkeeping in the same SQLite transaction as each unit of work, right before it
/// commits: the shape of GRDB's `TransactionObserver.databaseWillCommit`, with the unit of work's
/// changes in the store's terms (entity, object, inserted/updated/deleted properties).
///
/// Mirroring is the observer: each save records what it must upload in its own transaction, so
/// nothing about a save is decided later by re-reading history. Register one with
/// ``PersistentStore/add(_:)`` before the first write it must see.
///
/// Contract:
/// - ``unitOfWorkWillCommit(_:)`` runs on the writer connection, inside the transaction, after
///   the write block returned and before the history transaction is written; it runs only for
///   units of work that changed objects.
/// - Throwing rolls the whole unit of work back: the save fails with that error.
/// - Write only the observer's own tables, through ``CommittingUnitOfWork/db``; read objects through
///   ``CommittingUnitOfWork/context``; do not change objects.
/// - To act after the commit (wake a sync engine), use GRDB's `db.afterNextTransaction`.
protocol UnitOfWorkObserver: Sendable {
    /// Names the observer in errors, and in ``PersistentStore/requireObserver(named:)``.
    var name: String { get }

    func unitOfWorkWillCommit(_ unitOfWork: CommittingUnitOfWork) throws
}

/// A unit of work about to commit, as a ``UnitOfWorkObserver`` sees it.
struct CommittingUnitOfWork {
    /// The write context the block used: its author, context name, and reads of the objects as
    /// the unit of work leaves them.
    let context: WriteContext
    /// What changed, one change per object, in order (as its history transaction records them).
    let changes: [HistoryChange]
    /// The commit's timestamp, the one its history transaction carries.
    let date: Date

    var db: Database { context.db }
    var author: String? { context.author }
}

extension PersistentStore {
    /// Adds an observer that writes its bookkeeping in every later unit of work's transaction.
    func add(_ observer: any UnitOfWorkObserver) {
        observers.withLock { observers in
            guard !observers.contains(where: { $0.name == observer.name }) else { return }
            observers.append(observer)
        }
    }

    /// Marks the store file as written with the observer `name`: from now on, a unit of work through
    /// a store instance without that observer (another process, a plain `PersistentStore`) fails
    /// instead of saving changes the observer would never see. Call inside a write.
    static func requireObserver(named name: String, _ db: Database) throws {
        try db.execute(
            sql: "INSERT INTO cloudstore_metadata (key, value) VALUES ('requiredObserver', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            arguments: [name])
    }

    /// The observer the store file requires (``requireObserver(named:_:)``), if any.
    static func requiredObserver(_ db: Database) throws -> String? {
        try String.fetchOne(db.cachedStatement(sql: "SELECT value FROM cloudstore_metadata WHERE key = 'requiredObserver'"))
    }

    /// Runs the observers on a unit of work that changed objects, after checking that the observer
    /// the file requires is among them.
    func notifyObservers(_ observers: [any UnitOfWorkObserver], of context: WriteContext, date: Date) throws {
        guard !context.recorder.isEmpty else { return }
        if let required = try Self.requiredObserver(context.db), !observers.contains(where: { $0.name == required })
        {
            throw StoreError(
                .mirroredStore,
                "the store at \(path) is mirrored: write to it through the PersistentCloudContainer that mirrors it (its `store`), so every save is recorded for upload; this PersistentStore does not mirror, and its writes would never reach the server")
        }
        guard !observers.isEmpty else { return }
        let unitOfWork = CommittingUnitOfWork(
            context: context, changes: historyChanges(context.recorder.recordedChanges), date: date)
        for observer in observers { try observer.unitOfWorkWillCommit(unitOfWork) }
    }
}
