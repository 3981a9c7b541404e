import Foundation
import GRDB
import GRDBSQLite

/// Persistent history: every unit of work that changed something is one row of
/// `cloudstore_history_transaction`, written in the same SQLite transaction as the rows it
/// describes, with its changes in a compact blob (see ``HistoryEncoding``).
extension PersistentStore {
    /// The token of the last committed transaction, or nil when history is empty. Observe
    /// `transactions(after: currentHistoryToken())` to see only what happens from now on.
    public func currentHistoryToken() throws -> HistoryToken? {
        let number = try currentTransactionNumber()
        return number == 0 ? nil : HistoryToken(storeIdentifier: storeIdentifier, transactionNumber: number)
    }

    /// The committed transactions after `token` (all kept history when nil), oldest first.
    ///
    /// ```swift
    /// let transactions = try store.history(after: lastToken, matching: HistoryFilter(
    ///     excludingAuthors: ["cloudstore.import"], entities: ["Note"]))
    /// ```
    ///
    /// - Throws: ``StoreError/Code/historyTokenExpired`` when history after `token` was purged
    ///   or `token` belongs to another store: the caller must re-read the store instead.
    public func history(after token: HistoryToken?, matching filter: HistoryFilter = .all) throws -> [HistoryTransaction] {
        try withStoreErrors("reading history") {
            try pool.read { db in try historyPage(db, after: token, filter: filter).transactions }
        }
    }

    /// Deletes the transactions up to and including the one `token` came from (everything a
    /// reader holding `token` has seen). Fetching after an older token then throws
    /// ``StoreError/Code/historyTokenExpired``. Returns how many transactions were deleted.
    @discardableResult
    public func purgeHistory(through token: HistoryToken) throws -> Int {
        try checkStore(of: token)
        return try purgeHistory(throughNumber: token.transactionNumber, "purging history")
    }

    /// Deletes the transactions committed before `date`: every transaction up to the last one
    /// whose timestamp is earlier than `date`. Returns how many were deleted.
    @discardableResult
    public func purgeHistory(before date: Date) throws -> Int {
        let number = try withStoreErrors("purging history") {
            try pool.read { db in
                try db.integer(
                    "SELECT max(token) FROM cloudstore_history_transaction WHERE timestamp < ?",
                    [.int64(date.millisecondsSince1970)])
            }
        }
        guard let number else { return 0 }
        return try purgeHistory(throughNumber: number, "purging history")
    }

    private func purgeHistory(throughNumber number: Int64, _ doing: String) throws -> Int {
        try checkWritable(doing)
        let deleted = try withStoreErrors(doing) {
            try pool.write { db -> Int in
                try db.execute(sql: "DELETE FROM cloudstore_history_transaction WHERE token <= ?", arguments: [number])
                let deleted = db.changesCount
                try db.execute(
                    sql: """
                        INSERT INTO cloudstore_metadata (key, value) VALUES ('historyPurgedThrough', ?)
                        ON CONFLICT(key) DO UPDATE SET value = max(value, excluded.value)
                        """,
                    arguments: [number])
                return deleted
            }
        }
        logger.notice("history purged", metadata: ["token": "\(number)", "count": "\(deleted)"])
        return deleted
    }

    // MARK: Internals

    /// The number of the last committed transaction (0 when none).
    func currentTransactionNumber() throws -> Int64 {
        try withStoreErrors("reading history") {
            try pool.read { db in try Self.lastTransactionNumber(db) }
        }
    }

    /// Returns once a transaction after `number` is known to be committed (by this store instance
    /// at once, by another process within ``Configuration/observationPollInterval``), the store
    /// closes, or the task is cancelled.
    func waitForCommit(after number: Int64) async {
        await monitor.wait(after: number, interval: configuration.observationPollInterval) { [pool, monitor] in
            // A synchronous read: the reader goes back to the pool before this returns, never held
            // across a suspension, so closing the store (which waits for every reader on the
            // calling thread) cannot wait for a poll that needs a thread to finish.
            guard !monitor.isClosed else { return nil }
            return try? pool.read { db in try PersistentStore.lastTransactionNumber(db) }
        }
    }

    static func lastTransactionNumber(_ db: Database) throws -> Int64 {
        try db.integer("SELECT seq FROM sqlite_sequence WHERE name = 'cloudstore_history_transaction'") ?? 0
    }

    func checkStore(of token: HistoryToken) throws {
        guard token.storeIdentifier == storeIdentifier else {
            throw StoreError(
                .historyTokenExpired,
                "history token \(token) belongs to another store (this store at \(path) is \(storeIdentifier.uuidString), perhaps the file was re-created); re-read the whole store instead of resuming from the token")
        }
    }

    /// One page of history after `token`: the matching transactions, and the number of the last
    /// transaction looked at (so a reader skipping non-matching ones still moves on).
    func historyPage(
        _ db: Database, after token: HistoryToken?, filter: HistoryFilter
    ) throws -> (transactions: [HistoryTransaction], scannedThrough: Int64) {
        let after = token?.transactionNumber ?? 0
        if let token {
            try checkStore(of: token)
            let purgedThrough = try db.integer(
                "SELECT value FROM cloudstore_metadata WHERE key = 'historyPurgedThrough'") ?? 0
            if after < purgedThrough {
                throw StoreError(
                    .historyTokenExpired,
                    "history after token \(token) was purged (history is kept after transaction \(purgedThrough)); re-read the whole store instead of resuming from the token")
            }
        }
        let last = try Self.lastTransactionNumber(db)
        var sql = """
            SELECT token, timestamp, author, context_name, changes FROM cloudstore_history_transaction \
            WHERE token > ? AND token <= ?
            """
        var arguments: [AttributeValue] = [.int64(after), .int64(last)]
        if let authors = filter.authors {
            sql += " AND author IN (\(Array(repeating: "?", count: authors.count).joined(separator: ", ")))"
            arguments += authors.sorted().map(AttributeValue.string)
        }
        if !filter.excludingAuthors.isEmpty {
            let placeholders = Array(repeating: "?", count: filter.excludingAuthors.count).joined(separator: ", ")
            sql += " AND (author IS NULL OR author NOT IN (\(placeholders)))"
            arguments += filter.excludingAuthors.sorted().map(AttributeValue.string)
        }
        if let entities = filter.entities {
            let placeholders = Array(repeating: "?", count: entities.count).joined(separator: ", ")
            sql += " AND EXISTS (SELECT 1 FROM json_each(entities) WHERE value IN (\(placeholders)))"
            arguments += entities.sorted().map(AttributeValue.string)
        }
        sql += " ORDER BY token"
        if let limit = filter.limit { sql += " LIMIT \(limit)" }
        var transactions: [HistoryTransaction] = []
        try db.each(sql, arguments) { statement in
            let number = sqlite3_column_int64(statement, 0)
            let blob = columnData(statement, 4)
            let changes = try HistoryEncoding.decode(blob) { filter.entities?.contains($0) ?? true }
            transactions.append(
                HistoryTransaction(
                    token: HistoryToken(storeIdentifier: storeIdentifier, transactionNumber: number),
                    timestamp: Date(millisecondsSince1970: sqlite3_column_int64(statement, 1)),
                    author: sqlite3_column_type(statement, 2) == SQLITE_NULL ? nil : columnText(statement, 2),
                    contextName: sqlite3_column_type(statement, 3) == SQLITE_NULL ? nil : columnText(statement, 3),
                    changes: changes))
        }
        let limited = filter.limit.map { transactions.count >= $0 } ?? false
        return (transactions, limited ? transactions.last!.token.transactionNumber : last)
    }

    /// Writes the unit of work's history transaction, if it changed anything.
    /// Returns its token, how many changes it has, and the changes themselves when they will be logged.
    func recordHistory(_ context: WriteContext, db: Database, date: Date) throws -> (HistoryToken?, Int, [HistoryChange]) {
        guard configuration.recordsHistory, !context.recorder.isEmpty else { return (nil, 0, []) }
        let changes = context.recorder.recordedChanges
        let blob = HistoryEncoding.encode(changes) { layout.table(at: $0).name }
        let entities = Set(changes.map(\.entity)).sorted().map { layout.table(at: $0).name }
        let sql = """
            INSERT INTO cloudstore_history_transaction (timestamp, author, context_name, entities, change_count, changes) \
            VALUES (?, ?, ?, ?, ?, ?)
            """
        let statement = try db.prepared(sql)
        try db.bind(
            [
                .int64(date.millisecondsSince1970), context.author.map(AttributeValue.string) ?? .null,
                context.contextName.map(AttributeValue.string) ?? .null,
                .string(try AttributeValue.canonicalJSON(entities)), .int64(Int64(changes.count)),
            ], to: statement, sql: sql)
        let code = blob.withUnsafeBytes { bytes in
            sqlite3_bind_blob(statement, 6, bytes.baseAddress, Int32(bytes.count), sqliteTransient)
        }
        guard code == SQLITE_OK else { throw db.error(code, sql: sql) }
        try db.step(statement, sql: sql)
        let token = HistoryToken(storeIdentifier: storeIdentifier, transactionNumber: db.lastInsertedRowID)
        guard logger.logLevel <= .debug else { return (token, changes.count, []) }
        return (token, changes.count, historyChanges(changes))
    }

    /// A unit of work's recorded changes as history reports them.
    func historyChanges(_ changes: [HistoryRecorder.Change]) -> [HistoryChange] {
        changes.map { change in
            HistoryChange(
                entityName: layout.table(at: change.entity).name, objectID: change.id, changeType: change.type,
                updatedProperties: change.updated, tombstone: change.tombstone)
        }
    }
}
