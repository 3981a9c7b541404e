import Foundation
import Logging

/// What a store file says about itself, read without opening the store or modifying the file.
///
/// ```swift
/// if let info = try PersistentStore.fileInfo(at: url) {
///     print(info.schemaName, info.schemaVersion)          // Notes 1
///     let store = try PersistentStore(url: url, schema: info.storedSchema!)   // opens without migrating
/// }
/// ```
public struct StoreFileInfo: Sendable, Hashable {
    /// The store file.
    public var url: URL
    /// The name of the schema the store holds.
    public var schemaName: String
    /// The version of the schema the store was last opened (created or migrated) with.
    public var schemaVersion: Int
    /// That schema's ``Schema/schemaHash``: opening the store with a schema of the same version
    /// but another hash fails, since the schema changed without a new version.
    public var schemaHash: String
    /// The schema the store was last opened with, as the store keeps it for migrations; nil when
    /// the stored copy cannot be read.
    public var storedSchema: Schema?
    /// Every history transaction up to this number was purged (0 when none was).
    public var historyPurgedThrough: Int64
}

extension PersistentStore {
    /// Opens the store at `url` for inspection: read-only and as it is. Nothing is created,
    /// migrated or written, and no file is left beside it; reads work as usual (`read`,
    /// ``history(after:matching:)``, query generations), writes throw ``StoreError/Code/readOnly``.
    ///
    /// ```swift
    /// let info = try PersistentStore.fileInfo(at: url)!
    /// let store = try PersistentStore(inspecting: url, schema: info.storedSchema!)
    /// defer { try? store.close() }
    /// print(try store.history(after: nil).count)
    /// ```
    ///
    /// A mirrored store may be inspected without its container, since nothing can be saved.
    /// Inspect for a moment (a report, a command) rather than to follow a store: when no process
    /// has the file open, SQLite reads the main file alone and takes no lock (`immutable`), so
    /// commits made after it opened are not seen; when one has (a `-wal` file holds
    /// transactions), it reads through the WAL as any reader does and only SQLite's `-shm` index
    /// may change.
    ///
    /// - Throws: the ``StoreError`` opening would throw (not a store, damaged, a newer schema
    ///   version, ...); ``StoreError/Code/notAStore`` when there is no file;
    ///   ``StoreError/Code/needsUpgrade`` when the store holds an older version of `schema`
    ///   (inspect it with the schema it keeps, ``StoreFileInfo/storedSchema``).
    public convenience init(inspecting url: URL, schema: Schema, logger: Logger = Logger(label: "cloudstore.store")) throws {
        try self.init(
            url: url, schema: schema, migrations: MigrationPlan(), configuration: Configuration(), logger: logger,
            isReadOnly: true)
    }

    /// What the store file at `url` holds, read without modifying it: nil when there is no file
    /// (or an empty one), where opening a store would create one.
    ///
    /// - Throws: ``StoreError`` when the file is not a store (``StoreError/Code/notAStore``), is
    ///   damaged (``StoreError/Code/corrupt``) or cannot be read.
    public static func fileInfo(at url: URL) throws -> StoreFileInfo? {
        try StoreOpening.readMetadata(path: url.path).map { metadata in
            StoreFileInfo(
                url: url, schemaName: metadata.schemaName, schemaVersion: metadata.schemaVersion,
                schemaHash: metadata.schemaHash, storedSchema: metadata.schema,
                historyPurgedThrough: metadata.historyPurgedThrough)
        }
    }

    /// The changes opening the store at `url` with `schema` would make, in the order a migration
    /// applies them (`add Note.created`, `rename Note.rank to priority`, `step 2 2-clamp-priority.sql`,
    /// …), decided without modifying the file. Empty when the store opens as it is or does not
    /// exist yet.
    ///
    /// ```swift
    /// for change in try PersistentStore.migrationChanges(at: url, schema: schema, migrations: plan) {
    ///     print(change)
    /// }
    /// ```
    ///
    /// - Throws: the ``StoreError`` opening would throw: not a store, damaged, a newer schema
    ///   version, a changed schema whose version was not bumped, a destructive change no step handles.
    public static func migrationChanges(
        at url: URL, schema: Schema, migrations: MigrationPlan = MigrationPlan()
    ) throws -> [String] {
        try schema.validate()
        let opening = try StoreOpening(path: url.path, schema: schema, migrations: migrations)
        guard case .migrate(_, let work) = opening.inspected else { return [] }
        return work.changeDescriptions
    }
}

extension MigrationWork {
    /// Each change, in the order ``Migrator`` applies them.
    var changeDescriptions: [String] {
        lightweight.map(\.description) + steps.map { "step \($0.version) \($0.name)" }
            + rebuilds.map { "rebuild \($0) without its removed or retyped columns" } + drops.map(\.description)
    }
}
