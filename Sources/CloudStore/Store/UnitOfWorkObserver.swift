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

/// An observer a store file can require (``PersistentStore/requireObserver(named:_:)``): any
/// store instance writing the file makes one for itself when it lacks it. A feature that requires
/// one lists it in ``PersistentStore/requirableObservers``.
protocol RequirableUnitOfWorkObserver: UnitOfWorkObserver {
    /// The name the file records.
    static var requiredName: String { get }

    /// The observer a store instance without it runs (another process's plain store), made from
    /// what the file keeps.
    static func forOtherWriter(of db: Database, schema: Schema) throws -> Self
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
    /// a store instance without that observer (another process, a plain `PersistentStore`) runs
    /// it too (``missingRequiredObserver(_:among:)``), so no change goes unrecorded. Call inside a
    /// write.
    static func requireObserver(named name: String, _ db: Database) throws {
        try db.execute(
            sql: "INSERT INTO cloudstore_metadata (key, value) VALUES ('requiredObserver', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            arguments: [name])
    }

    /// The observer the store file requires (``requireObserver(named:_:)``), if any.
    static func requiredObserver(_ db: Database) throws -> String? {
        try String.fetchOne(db.cachedStatement(sql: "SELECT value FROM cloudstore_metadata WHERE key = 'requiredObserver'"))
    }

    /// The observer the store file requires and this store instance lacks, made for it: a plain
    /// `PersistentStore` (in an app extension, a widget, an import tool) writing a mirrored file
    /// records each unit of work's pending uploads in its own transaction, as the container does,
    /// and the process that mirrors sends them. Nil when nothing is missing.
    ///
    /// - Throws: ``StoreError/Code/mirroredStore`` when the file requires an observer this version
    ///   does not know (a newer version's): writing without it would lose what it records.
    func missingRequiredObserver(_ db: Database, among observers: [any UnitOfWorkObserver]) throws -> (any UnitOfWorkObserver)? {
        guard let required = try Self.requiredObserver(db), !observers.contains(where: { $0.name == required }) else { return nil }
        guard let kind = Self.requirableObservers.first(where: { $0.requiredName == required }) else {
            throw StoreError(
                .mirroredStore,
                "the store at \(path) requires the unit-of-work observer \(required), which this version of CloudStore does not know: write to it with the version that made it")
        }
        return try kind.forOtherWriter(of: db, schema: schema)
    }

    /// Runs the observers on a unit of work that changed objects.
    func notifyObservers(_ observers: [any UnitOfWorkObserver], of context: WriteContext, date: Date) throws {
        guard !context.recorder.isEmpty, !observers.isEmpty else { return }
        let unitOfWork = CommittingUnitOfWork(
            context: context, changes: historyChanges(context.recorder.recordedChanges), date: date)
        for observer in observers { try observer.unitOfWorkWillCommit(unitOfWork) }
    }
}
