import CloudStoreLogging
import Foundation
import GRDB
import GRDBSQLite
import Logging
import Synchronization

/// A store over one SQLite file: a table per entity of a schema, persistent history written in the
/// same transaction as the rows, observation of committed transactions (from this process and
/// others), query generations and schema migrations.
///
/// ```swift
/// let schema = Schema(name: "Notes", version: 2, entities: [Folder.self, Note.self])
/// let store = try PersistentStore(url: URL(fileURLWithPath: "notes.sqlite"), schema: schema,
///                                 migrations: try MigrationPlan.load(directory: migrationsURL, schemaName: "Notes"))
/// try store.write(author: "app", contextName: "editor") { context in
///     try context.insert(Note(title: "Hello"))
/// }
/// let notes = try store.read { context in
///     try context.fetch(FetchDescriptor<Note>(sortBy: [SortDescriptor(\.title)]))
/// }
/// ```
///
/// The file is a WAL-mode SQLite database (GRDB `DatabasePool`): one writer at a time, many
/// readers, readers never block the writer. Opening checks the file before touching it: a file
/// that is not a CloudStore store, a damaged one, or one written by a newer schema version is
/// refused with a ``StoreError`` and left as it was. A store opened for inspection
/// (``init(inspecting:schema:logger:)``) reads the file as it is and never writes.
public final class PersistentStore: Sendable {
    /// The store file.
    public let url: URL
    /// The schema the store was opened with.
    public let schema: Schema
    /// How the store was opened and commits.
    public let configuration: Configuration
    /// Whether the store was opened for inspection, read-only: its writes throw
    /// ``StoreError/Code/readOnly``.
    public let isReadOnly: Bool
    let layout: StoreLayout
    let pool: DatabasePool
    let logger: Logger
    /// Identifies this store file in history tokens.
    let storeIdentifier: UUID
    let monitor: CommitMonitor
    /// What writes its bookkeeping in each unit of work's transaction (mirroring's pending uploads).
    let observers = Mutex<[any UnitOfWorkObserver]>([])
    /// How many units of work this store instance committed (a debug counter: tests count the
    /// writes a sync makes).
    let committedUnitsOfWork = Atomic(0)

    var path: String { url.path }

    /// Opens the store at `url`, creating it if the file does not exist and migrating it if it was
    /// written by an older version of the schema.
    ///
    /// - Parameters:
    ///   - url: the store's SQLite file.
    ///   - schema: the schema of the store's entities, usually loaded from a file
    ///     (<doc:SchemaFileFormat>).
    ///   - migrations: explicit steps for versions the schema skipped through; see ``MigrationPlan``.
    ///   - configuration: how the store opens and commits (`synchronous`, history, readers, clock).
    ///   - logger: where the store logs (lifecycle at `.notice`, each write at `.info`, each changed
    ///     object at `.debug`, SQL at `.trace`).
    /// - Throws: ``SchemaError`` for an invalid schema; ``StoreError`` when the file is not a store
    ///   (``StoreError/Code/notAStore``), is damaged (``StoreError/Code/corrupt``), holds a newer
    ///   schema version (``StoreError/Code/schemaTooOld``), or cannot be migrated.
    public convenience init(
        url: URL, schema: Schema, migrations: MigrationPlan = MigrationPlan(),
        configuration: Configuration = Configuration(), logger: Logger = Logger(label: "cloudstore.store")
    ) throws {
        try self.init(
            url: url, schema: schema, migrations: migrations, configuration: configuration, logger: logger,
            isReadOnly: false)
    }

    /// Opens the store at `url`: for inspection when `isReadOnly` (see ``init(inspecting:schema:logger:)``),
    /// else creating or migrating it as needed.
    init(
        url: URL, schema: Schema, migrations: MigrationPlan, configuration: Configuration, logger: Logger,
        isReadOnly: Bool
    ) throws {
        try schema.validate()
        self.url = url
        self.schema = schema
        self.configuration = configuration
        self.isReadOnly = isReadOnly
        var layout = StoreLayout(schema: schema)
        layout.externalData = ExternalDataFiles(storeURL: url)
        self.layout = layout
        self.logger = logger
        self.monitor = CommitMonitor()
        let started = ContinuousClock.now
        let path = url.path
        let opening = try StoreOpening(path: path, schema: schema, migrations: migrations)
        do {
            let database = Self.databaseConfiguration(configuration, logger: logger)
            if isReadOnly {
                (pool, storeIdentifier) = try opening.openForInspection(database)
            } else {
                try FileManager.default.createDirectory(
                    at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
                pool = try DatabasePool(path: path, configuration: database)
                try Self.configureWriter(of: pool, configuration)
                storeIdentifier = try opening.prepare(pool, layout: layout, logger: logger)
            }
        } catch {
            throw StoreError.wrapping(error, path: path, while: "opening the store")
        }
        monitor.committed(try currentTransactionNumber())
        if !isReadOnly, let files = layout.externalData, FileManager.default.fileExists(atPath: files.directory.path) {
            // Files a crash left behind: written for a unit of work that never committed.
            pool.writeWithoutTransaction { db in removeUnreferencedExternalData(db) }
        }
        logger.notice(
            isReadOnly ? "store opened for inspection" : "store opened",
            metadata: [
                "store": "\(path)", "schema": "\(schema.name)", "version": "\(schema.version)",
                "duration": "\(LogFormat.duration(started.duration(to: .now)))",
            ])
    }

    /// Closes the store's connections. Later calls throw ``StoreError/Code/closed``; open query
    /// generations keep their snapshot until they are closed.
    ///
    /// If no other connection is reading, the WAL is checkpointed and truncated first, so the
    /// database file alone holds everything (GRDB closes its writer before its read-only readers,
    /// and a read-only connection cannot do that last checkpoint). A store opened for inspection
    /// just closes.
    public func close() throws {
        monitor.close()
        if !isReadOnly {
            checkpointBeforeClosing()
        }
        try pool.close()
        logger.notice("store closed", metadata: ["store": "\(path)"])
    }

    private func checkpointBeforeClosing() {
        try? pool.writeWithoutTransaction { db in
            guard let connection = db.sqliteConnection else { return }
            sqlite3_busy_timeout(connection, 0)
            defer { sqlite3_busy_timeout(connection, Int32(configuration.busyTimeout.milliseconds)) }
            _ = try db.checkpoint(.truncate)
        }
    }

    /// Copies the WAL into the database file and truncates it (SQLite's `TRUNCATE` checkpoint),
    /// waiting for readers to finish. SQLite checkpoints by itself every 1,000 pages; call this
    /// before copying the file, or to give back the WAL's disk space. Pinned query generations
    /// keep it from completing (it then fails with SQLite's busy error after the busy timeout).
    public func checkpoint() throws {
        try checkWritable("checkpointing the WAL")
        try withStoreErrors("checkpointing the WAL") {
            _ = try pool.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
        }
    }

    // MARK: Reading

    /// Runs `block` with a read context that sees one consistent state of the store.
    ///
    /// ```swift
    /// let count = try store.read { context in try context.count(Note.self) }
    /// ```
    @_disfavoredOverload
    public func read<T>(_ block: (ReadContext) throws -> T) throws -> T {
        try withStoreErrors("reading") {
            try pool.read { db in try block(ReadContext(db: db, layout: layout)) }
        }
    }

    /// Runs `block` with a read context, without blocking the caller's thread.
    public func read<T: Sendable>(_ block: @escaping @Sendable (ReadContext) throws -> T) async throws -> T {
        let layout = layout
        return try await withStoreErrors("reading") {
            try await pool.read { db in try block(ReadContext(db: db, layout: layout)) }
        }
    }

    // MARK: Writing

    /// Runs `block` as one unit of work: one SQLite transaction, committed with one history
    /// transaction carrying `author` and `contextName`. If `block` throws, nothing is written.
    ///
    /// ```swift
    /// try store.write(author: "app", contextName: "editor") { context in
    ///     try context.insert(Note(title: "Groceries"))
    /// }
    /// ```
    @_disfavoredOverload
    @discardableResult
    public func write<T>(
        author: String? = nil, contextName: String? = nil, _ block: (WriteContext) throws -> T
    ) throws -> T {
        try checkWritable("writing")
        let started = ContinuousClock.now
        let outcome = try withStoreErrors("writing") {
            try pool.writeWithoutTransaction { db in
                try unitOfWork(db, author: author, contextName: contextName, block)
            }
        }
        didCommit(outcome, author: author, contextName: contextName, started: started)
        return outcome.value
    }

    /// Runs `block` as one unit of work without blocking the caller's thread.
    @discardableResult
    public func write<T: Sendable>(
        author: String? = nil, contextName: String? = nil, _ block: @escaping @Sendable (WriteContext) throws -> T
    ) async throws -> T {
        try checkWritable("writing")
        let started = ContinuousClock.now
        let outcome = try await withStoreErrors("writing") {
            try await pool.writeWithoutTransaction { db in
                try self.unitOfWork(db, author: author, contextName: contextName, block)
            }
        }
        didCommit(outcome, author: author, contextName: contextName, started: started)
        return outcome.value
    }

    /// The file holding the bytes of an external-storage value, for reading a large value in
    /// pieces (`FileHandle`) instead of as one `Data`; nil when the store holds no such file.
    /// Read it, do not change it: the file is shared by every object with the same bytes, and is
    /// removed once no object names it.
    ///
    /// ```swift
    /// let snapshot = try store.read { try $0.fetchSnapshot(entityName: "Note", id: id) }
    /// if case .externalData(let value)? = snapshot?.values["attachment"],
    ///     let url = store.externalDataURL(for: value) {
    ///     let handle = try FileHandle(forReadingFrom: url)
    /// }
    /// ```
    public func externalDataURL(for value: ExternalData) -> URL? {
        guard let files = layout.externalData, files.contains(value) else { return nil }
        return files.url(for: value)
    }

    /// Removes the files of external-storage values no row names any more, after a commit that
    /// replaced or deleted such a value and when the store opens. It holds SQLite's write lock
    /// (an IMMEDIATE transaction) while it reads the rows and removes files: files are written
    /// only inside units of work, which hold that lock, so a unit of work in progress, in this
    /// process or another, never loses the file it is about to commit.
    func removeUnreferencedExternalData(_ db: Database) {
        guard let files = layout.externalData else { return }
        var removed = 0
        do {
            try db.inTransaction(.immediate) {
                var names: Set<String> = []
                for table in layout.tables {
                    for column in table.externalColumns {
                        let quoted = table.columnNames[column].quotedIdentifier
                        for text in try String.fetchAll(
                            db, sql: "SELECT \(quoted) FROM \(table.quotedName) WHERE typeof(\(quoted)) = 'text'")
                        {
                            if let name = ExternalData(storedText: text)?.fileName { names.insert(name) }
                        }
                    }
                }
                removed = files.removeUnreferenced(keeping: names)
                return .commit
            }
        } catch {
            logger.warning("external data files not checked", metadata: ["error": "\(error)"])
            return
        }
        if removed > 0 {
            logger.info("external data files removed", metadata: ["count": "\(removed)", "store": "\(path)"])
        }
    }

    struct WriteOutcome<T> {
        var value: T
        var token: HistoryToken?
        var changeCount: Int
        /// The changes, when they are logged one by one.
        var changes: [HistoryChange]
    }

    /// Runs a unit of work in an IMMEDIATE transaction and commits it with its history.
    func unitOfWork<T>(
        _ db: Database, author: String?, contextName: String?, _ block: (WriteContext) throws -> T
    ) throws -> WriteOutcome<T> {
        try db.beginTransaction(.immediate)
        var observers = observers.withLock { $0 }
        do {
            // Made for this unit of work only: a container that opens the store later adds its own.
            if let missing = try missingRequiredObserver(db, among: observers) { observers.append(missing) }
        } catch {
            try? db.rollback()
            throw error
        }
        let context = WriteContext(
            db: db, layout: layout, author: author, contextName: contextName,
            tracksChanges: configuration.recordsHistory || !observers.isEmpty)
        do {
            let value = try block(context)
            if let failure = context.failure { throw failure }
            let date = configuration.now()
            try notifyObservers(observers, of: context, date: date)
            let (token, count, changes) = try recordHistory(context, db: db, date: date)
            do {
                try db.commit()
            } catch {
                throw explainCommitFailure(error, context: context, db: db)
            }
            if context.releasesExternalData { removeUnreferencedExternalData(db) }
            return WriteOutcome(value: value, token: token, changeCount: count, changes: changes)
        } catch {
            if db.isInsideTransaction { try? db.rollback() }
            throw error
        }
    }

    private func didCommit<T>(_ outcome: WriteOutcome<T>, author: String?, contextName: String?, started: ContinuousClock.Instant) {
        committedUnitsOfWork.add(1, ordering: .relaxed)
        guard let token = outcome.token else { return }
        monitor.committed(token.transactionNumber)
        logger.info(
            "write committed",
            metadata: [
                "token": "\(token.transactionNumber)", "author": "\(author ?? "")", "context": "\(contextName ?? "")",
                "count": "\(outcome.changeCount)", "duration": "\(LogFormat.duration(started.duration(to: .now)))",
            ])
        guard logger.logLevel <= .debug else { return }
        for change in outcome.changes {
            logger.debug(
                "object changed",
                metadata: [
                    "token": "\(token.transactionNumber)", "entity": "\(change.entityName)",
                    "record": "\(change.objectID.uuidString)", "change": "\(change.changeType.rawValue)",
                    "keys": "\(change.updatedProperties.sorted().joined(separator: ","))",
                ])
        }
    }

    /// A commit refused by a deferred foreign key, explained with the relationship that points to
    /// a missing object.
    private func explainCommitFailure(_ error: any Error, context: WriteContext, db: Database) -> any Error {
        guard let databaseError = error as? DatabaseError,
            databaseError.extendedResultCode == .SQLITE_CONSTRAINT_FOREIGNKEY, db.isInsideTransaction
        else { return error }
        for reference in context.references {
            guard let destination = try? layout.table(reference.destination) else { continue }
            let found = try? db.integer("SELECT 1 FROM \(destination.quotedName) WHERE \"id\" = ?", [.uuid(reference.target)])
            guard found == nil else { continue }
            return StoreError(
                .invalidValue,
                "\(reference.entity).\(reference.relationship) of \(reference.id.uuidString) refers to \(reference.destination) \(reference.target.uuidString), which does not exist; insert it in the same write (or earlier) or clear the relationship")
        }
        return StoreError(
            .invalidValue,
            "the write leaves a relationship pointing to an object that does not exist (SQLite: \(databaseError.message ?? "FOREIGN KEY constraint failed")); a row written outside the store may refer to a deleted object")
    }

    // MARK: Errors

    /// Refuses an operation that writes when the store was opened for inspection.
    func checkWritable(_ doing: String) throws {
        guard isReadOnly else { return }
        throw StoreError(
            .readOnly,
            "the store at \(path) was opened for inspection, which never writes, so \(doing) is refused; open it with PersistentStore(url:schema:) (or its PersistentCloudContainer, when it is mirrored) to change it")
    }

    /// Runs an operation, turning SQLite's errors into store errors that name the file.
    func withStoreErrors<T>(_ doing: String, _ operation: () throws -> T) throws -> T {
        do {
            return try operation()
        } catch {
            throw storeError(error, doing)
        }
    }

    func withStoreErrors<T>(_ doing: String, _ operation: () async throws -> T) async throws -> T {
        do {
            return try await operation()
        } catch {
            throw storeError(error, doing)
        }
    }

    private func storeError(_ error: any Error, _ doing: String) -> any Error {
        if monitor.isClosed {
            return StoreError(.closed, "the store at \(path) is closed; open a new PersistentStore to use it")
        }
        return StoreError.wrapping(error, path: path, while: doing)
    }

    /// Sets `synchronous` on the writer connection again: GRDB's `DatabasePool` runs `PRAGMA
    /// synchronous = NORMAL` when it turns WAL on, after `prepareDatabase` ran, so the setting of
    /// ``databaseConfiguration(_:logger:)`` holds on the readers only. The writer is the
    /// connection whose commits it governs. Sets the writer's page cache
    /// (``Configuration/writerCacheSize``) too.
    static func configureWriter(of pool: DatabasePool, _ configuration: Configuration) throws {
        try pool.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = \(configuration.synchronous.rawValue)")
            // Negative: a size in KiB rather than in pages.
            try db.execute(sql: "PRAGMA cache_size = -\(max(1, configuration.writerCacheSize / 1024))")
        }
    }

    /// The GRDB configuration of the store's connections.
    static func databaseConfiguration(_ configuration: Configuration, logger: Logger) -> GRDB.Configuration {
        var database = GRDB.Configuration()
        database.label = "CloudStore"
        database.maximumReaderCount = configuration.maximumReaderCount
        database.busyMode = .timeout(TimeInterval(configuration.busyTimeout.milliseconds) / 1000)
        let synchronous = configuration.synchronous.rawValue
        let tracesSQL = logger.logLevel <= .trace
        database.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = \(synchronous)")
            QueryFunctions.register(in: db)
            if tracesSQL {
                db.trace(options: .statement) { event in
                    logger.trace("sql", metadata: ["sql": "\(event)"])
                }
            }
        }
        return database
    }
}

extension PersistentStore.WriteOutcome: Sendable where T: Sendable {}

extension Duration {
    /// The duration in whole milliseconds.
    var milliseconds: Int64 {
        components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }
}
