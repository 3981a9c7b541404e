import Foundation
import GRDB
import Logging

/// Applies a migration inside the opening transaction, in this order:
///
/// 1. renames (entities, attributes, relationships), then additions (entities, attributes,
///    many-to-many relationships, defaults filled into attributes that became required);
/// 2. the explicit steps, in version then name order;
/// 3. table rebuilds that drop removed columns and change column types (copying every row),
///    then drops of removed entities and relationships;
/// 4. indexes: the store's `cloudstore_` indexes on user tables are dropped when they are no
///    longer wanted (or changed) and created when missing;
/// 5. checks: required attributes have a value in every row, and every relationship points to
///    an existing object.
///
/// Any failure throws ``StoreError/Code/migrationFailed`` naming the step or change, and the
/// transaction rolls back: the store is exactly as it was.
struct Migrator {
    let work: MigrationWork
    let layout: StoreLayout
    let path: String
    let logger: Logger

    func run(_ db: Database) throws {
        for change in work.lightweight {
            try perform(change.description) {
                for statement in change.statements { try db.execute(sql: statement) }
            }
        }
        for step in work.steps {
            try perform("step \(step.version) \(step.name)") {
                switch step.action {
                case .sql(let sql): try db.execute(sql: sql)
                case .code(let body): try body(db)
                }
            }
        }
        for entity in work.rebuilds {
            try perform("rebuild \(entity) without its removed or retyped columns") { try rebuild(entity, db) }
        }
        for move in work.storageMoves {
            let what = move.toFiles ? "move \(move.entity).\(move.column) into files (external storage on)" : "move \(move.entity).\(move.column) back into rows (external storage off)"
            try perform(what) { try moveStorage(move.entity, move.column, toFiles: move.toFiles, db) }
        }
        for change in work.drops {
            try perform(change.description) {
                for statement in change.statements { try db.execute(sql: statement) }
            }
        }
        try perform("update the indexes") { try updateIndexes(db) }
        for (entity, column) in work.requiredColumns {
            let table = try layout.table(entity)
            let missing = try Int.fetchOne(
                db, sql: "SELECT count(*) FROM \(table.quotedName) WHERE \(column.quotedIdentifier) IS NULL") ?? 0
            if missing > 0 {
                throw failure(
                    "the final check",
                    "\(entity).\(column) is required but \(missing) existing object(s) have no value; give the attribute a default or fill it in a migration step")
            }
        }
        let violations = try Row.fetchAll(db, sql: "PRAGMA foreign_key_check")
        if let violation = violations.first {
            let table: String = violation[0]
            let parent: String = violation[2]
            throw failure(
                "the final check",
                "\(violations.count) row(s) of \(table) refer to \(parent) objects that do not exist; fix or clear those relationships in a migration step")
        }
        logger.info(
            "migration applied",
            metadata: [
                "schema": "\(work.schemaName)", "from": "\(work.fromVersion)", "version": "\(work.toVersion)",
                "count": "\(work.lightweight.count + work.steps.count + work.rebuilds.count + work.drops.count)",
            ])
    }

    private func perform(_ what: String, _ body: () throws -> Void) throws {
        logger.debug("migration change", metadata: ["change": "\(what)"])
        do {
            try body()
        } catch let error as StoreError where error.code == .migrationFailed {
            throw error
        } catch let error as DatabaseError {
            throw failure(what, "SQLite: \(error.message ?? "\(error.resultCode)")")
        } catch {
            throw failure(what, "\(error)")
        }
    }

    private func failure(_ what: String, _ message: String) -> StoreError {
        StoreError(
            .migrationFailed,
            "migrating schema \(work.schemaName) from version \(work.fromVersion) to \(work.toVersion) failed in \(what): \(message); the store at \(path) is unchanged")
    }

    /// Recreates a table with the new schema's columns, copying the rows.
    /// Moves the bytes of a `data` column between rows (BLOB) and the store's files (a TEXT
    /// reference), one row at a time. Files written by a migration that then fails are removed when
    /// the store next opens.
    private func moveStorage(_ entity: String, _ column: String, toFiles: Bool, _ db: Database) throws {
        guard let files = layout.externalData else { return }
        let table = try layout.table(entity).quotedName, quoted = column.quotedIdentifier
        let rows = try String.fetchAll(
            db, sql: "SELECT id FROM \(table) WHERE typeof(\(quoted)) = '\(toFiles ? "blob" : "text")'")
        for id in rows {
            let stored = try DatabaseValue.fetchOne(db, sql: "SELECT \(quoted) FROM \(table) WHERE id = ?", arguments: [id])
            let moved: DatabaseValue
            if toFiles {
                guard let bytes = stored.flatMap(Data.fromDatabaseValue) else { continue }
                moved = AttributeValue.externalData(try files.store(bytes)).databaseValue
            } else {
                guard let text = stored.flatMap(String.fromDatabaseValue), let value = ExternalData(storedText: text) else { continue }
                moved = try files.data(for: value).databaseValue
            }
            try db.execute(sql: "UPDATE \(table) SET \(quoted) = ? WHERE id = ?", arguments: [moved, id])
        }
    }

    private func rebuild(_ entity: String, _ db: Database) throws {
        let table = try layout.table(entity)
        let temporary = "cloudstore_rebuild"
        let columns = (["id"] + table.columns.map(\.name)).map(\.quotedIdentifier).joined(separator: ", ")
        try db.execute(sql: table.createTableSQL(named: temporary))
        try db.execute(sql: "INSERT INTO \(temporary) (\(columns)) SELECT \(columns) FROM \(table.quotedName)")
        try db.execute(sql: "DROP TABLE \(table.quotedName)")
        try db.execute(sql: "ALTER TABLE \(temporary) RENAME TO \(table.quotedName)")
    }

    /// Makes the `cloudstore_` indexes of the user tables those the layout wants.
    private func updateIndexes(_ db: Database) throws {
        var wanted: [String: String] = [:]
        for table in layout.tables {
            for index in table.indexes { wanted[index.name] = index.sql }
        }
        for link in layout.links {
            for index in link.indexes { wanted[index.name] = index.sql }
        }
        let tables = layout.tables.map(\.name) + layout.links.map(\.name)
        let placeholders = Array(repeating: "?", count: tables.count).joined(separator: ", ")
        let existing = try Row.fetchAll(
            db,
            sql: """
                SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL \
                AND name LIKE 'cloudstore\\_%' ESCAPE '\\' AND tbl_name IN (\(placeholders))
                """,
            arguments: StatementArguments(tables))
        var kept: Set<String> = []
        for row in existing {
            let name: String = row["name"]
            let sql: String = row["sql"]
            if wanted[name] == sql {
                kept.insert(name)
            } else {
                try db.execute(sql: "DROP INDEX \(name.quotedIdentifier)")
            }
        }
        for (name, sql) in wanted.sorted(by: { $0.key < $1.key }) where !kept.contains(name) {
            try db.execute(sql: sql)
        }
    }
}

extension EntityTable {
    /// The `CREATE TABLE` statement under another name (for rebuilds).
    func createTableSQL(named name: String) -> String {
        createTableSQL.replacingOccurrences(of: "CREATE TABLE \(quotedName) (", with: "CREATE TABLE \(name.quotedIdentifier) (")
    }
}
