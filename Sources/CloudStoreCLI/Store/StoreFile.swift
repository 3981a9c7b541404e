import CloudStore
import Foundation
import Logging

/// Opens the store file a command names.
enum StoreFile {
    /// What the commands that inspect a store (``inspect(_:schemaPath:logger:)``) promise in their help.
    static let inspectionPromise = """
        The store is only read: it is neither migrated nor upgraded, and every byte and every file \
        of it stay as they were (no -wal or -shm file is left beside it; while an app has the store \
        open, SQLite's -shm index records the read, as it does for every reader).
        """

    /// The path as a file URL, after checking that a store file is there: commands that read a
    /// store never create one.
    ///
    /// - Throws: ``CommandError`` when there is no file at `path` or it is a directory.
    static func existing(_ path: String) throws -> URL {
        try InputFile.existing(
            path, missing: "no store at \(path): check the path (this command does not create stores)",
            kind: "a store file (e.g. notes.sqlite)")
    }

    /// What the store at `path` holds, read without modifying it.
    static func info(_ path: String) throws -> StoreFileInfo {
        let url = try existing(path)
        guard let info = try PersistentStore.fileInfo(at: url) else {
            throw CommandError("\(path) is empty, not a CloudStore store: check the path")
        }
        return info
    }

    /// Opens the existing store at `path` for inspection: read-only and as it is, leaving every
    /// byte and file as it was (see `PersistentStore(inspecting:schema:)`). With the schema file at
    /// `schemaPath` when given (refused if the store would have to migrate to it), else with the
    /// schema the store keeps.
    static func inspect(_ path: String, schemaPath: String?, logger: Logger) throws -> PersistentStore {
        let info = try info(path)
        let schema: Schema
        if let schemaPath {
            schema = try SchemaFile.load(schemaPath)
            guard try PersistentStore.migrationChanges(at: info.url, schema: schema).isEmpty else {
                throw CommandError(
                    "\(path) holds version \(info.schemaVersion) of schema \"\(info.schemaName)\" and \(schemaPath) is version \(schema.version): run cloudstore migrate first, or leave out --schema")
            }
        } else {
            schema = try storedSchema(of: info, at: path)
        }
        return try PersistentStore(inspecting: info.url, schema: schema, logger: logger)
    }

    /// The copy of its schema the store at `path` keeps, for commands given no `--schema`.
    static func storedSchema(of info: StoreFileInfo, at path: String) throws -> Schema {
        guard let stored = info.storedSchema else {
            throw CommandError("\(path) lacks the copy of its schema the store keeps: pass the schema file with --schema")
        }
        return stored
    }
}
