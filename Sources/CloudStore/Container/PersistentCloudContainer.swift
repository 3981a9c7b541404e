import CloudStoreLogging
import CloudStoreSync
import Foundation
import Logging

/// A local store that mirrors itself through a cloud server to every other device of the same user,
/// as `NSPersistentCloudKitContainer` does on Apple platforms.
///
/// Save through ``store`` as usual: each save records what it must upload in its own transaction,
/// the container uploads it and imports what other devices saved, resolving conflicts field by
/// field and logging every value that loses. Imports are written with the author `cloudstore.import`, so an app observing history sees
/// them and can refresh only what changed.
///
/// ```swift
/// let schema = try Schema.load(contentsOf: URL(fileURLWithPath: "Schema/Notes.json"))
/// let container = try await PersistentCloudContainer(
///     url: URL(fileURLWithPath: "notes.sqlite"), schema: schema,
///     options: .init(server: .init(url: URL(string: "http://127.0.0.1:8080")!,
///                                  containerIdentifier: "iCloud.com.example.notes", token: "alice-token")))
/// try await container.store.write(author: "app") { context in
///     try context.insert(Note(title: "Groceries"))
/// }
/// try await container.waitUntilSynced()   // uploaded, and everything the server had is here
/// ```
///
/// Without a server (`Options(server: nil)`) the container is a plain local store; with a server that
/// is unreachable at start it opens anyway and syncs when it can.
///
/// Objects can be shared with other users (``share(_:with:publicPermission:title:timeout:)``,
/// ``acceptShare(shortGUID:timeout:)``): the container mirrors the server's private database (this
/// user's objects) and its shared database (what others share with this user) with one sync engine
/// each, into one store. See <doc:Sharing>.
public final class PersistentCloudContainer: Sendable {
    /// The local store: read and write through it as with any ``PersistentStore``; its saves are
    /// uploaded and other devices' changes are imported into it.
    public let store: PersistentStore
    /// The schema the container was opened with.
    public let schema: Schema
    /// The options the container was opened with.
    public let options: Options
    /// The zone the store's records live in.
    public let zoneID: ZoneID
    /// Held while the container mirrors the file (nil without a server).
    private let syncLock: SyncLock?
    let mirror: CloudMirror
    let hub: EventHub

    /// Opens (creating or migrating) the store at `url` and starts mirroring it.
    ///
    /// ```swift
    /// let container = try await PersistentCloudContainer(
    ///     url: URL(fileURLWithPath: "notes.sqlite"),
    ///     schema: Schema(name: "Notes", version: 1, entities: [Folder.self, Note.self]),
    ///     options: .init(server: .init(url: serverURL, containerIdentifier: "iCloud.com.example.notes",
    ///                                  token: userToken)))
    /// ```
    ///
    /// It returns once the store is open and mirroring has started; it does not wait for the
    /// server (``waitUntilSynced(timeout:)`` does).
    ///
    /// - Parameters:
    ///   - url: the store's SQLite file; created when it does not exist.
    ///   - schema: the schema of the store's entities; every mirrored entity follows the rules of
    ///     <doc:DesigningASchemaForSync>.
    ///   - migrations: explicit migration steps, see ``MigrationPlan``.
    ///   - options: the server to mirror to (none: the store works offline), the conflict policy,
    ///     and the store's configuration.
    ///   - logger: where mirroring logs; by default a `cloudstore.mirroring` logger at the level
    ///     `CLOUDSTORE_DEBUG` selects.
    public convenience init(
        url: URL, schema: Schema, migrations: MigrationPlan = MigrationPlan(), options: Options = Options(),
        logger: Logger = Logger.cloudStore("mirroring")
    ) async throws {
        try await self.init(url: url, schema: schema, migrations: migrations, options: options, logger: logger) {
            server, scope, deviceID in
            var httpLogger = Logger(label: "cloudstore.http")
            httpLogger.logLevel = logger.logLevel
            return HTTPCloudDatabase(
                baseURL: server.url, container: server.containerIdentifier, environment: server.environment,
                scope: scope, token: server.token, deviceID: deviceID, logger: httpLogger)
        }
    }

    /// Opens the store and mirrors it through databases you provide, e.g. ones wrapped to inject
    /// faults in tests. `makeDatabase` is called when `options.server` is set, once for the
    /// `private` database (the store's own zones), once for the `shared` one (zones other users
    /// share with this user, see <doc:Sharing>) and, with ``Options/publicEntities``, once for the
    /// `public` one (<doc:PublicDatabase>).
    public init(
        url: URL, schema: Schema, migrations: MigrationPlan = MigrationPlan(), options: Options = Options(),
        logger: Logger = Logger.cloudStore("mirroring"),
        makeDatabase: @Sendable (Server, DatabaseScope, _ deviceID: String) throws -> any CloudDatabase
    ) async throws {
        let publicEntities = try PublicEntities(options.publicEntities, in: schema)
        var storeLogger = Logger(label: "cloudstore.store")
        storeLogger.logLevel = logger.logLevel
        let store = try PersistentStore(
            url: url, schema: schema, migrations: migrations, configuration: options.storeConfiguration, logger: storeLogger)
        // One container syncs a file at a time; a local-only container syncs nothing.
        let lock: SyncLock?
        do {
            lock = try options.server.map { _ in try SyncLock.acquire(for: url) }
        } catch {
            try? store.close()
            throw error
        }
        self.syncLock = lock
        self.store = store
        self.schema = schema
        self.options = options
        let zoneID = ZoneID(zoneName: options.zoneName ?? schema.name)
        self.zoneID = zoneID
        let hub = EventHub()
        self.hub = hub
        do {
            try MirrorTables.migrate(store)
            var databases: [DatabaseScope: any CloudDatabase] = [:]
            var keyDirectory: (any CloudDatabase)?
            var deviceID: String?
            if let server = options.server {
                var id = server.deviceID ?? ""
                if server.deviceID == nil { id = try await Self.storedDeviceID(store) }
                deviceID = id
                for scope in [DatabaseScope.private, .shared] + (publicEntities.isEmpty ? [] : [.public]) {
                    databases[scope] = try makeDatabase(server, scope, id)
                }
                if schema.mirroredEntities.contains(where: RecordSealing.needsKey) {
                    keyDirectory = try databases[.public] ?? makeDatabase(server, .public, id)
                }
            }
            let setup = MirrorSetup(
                schema: schema, zoneID: zoneID, publicEntities: publicEntities, policy: options.conflictPolicy, deviceID: deviceID,
                logger: logger)
            self.mirror = CloudMirror(
                store: store, setup: setup, options: options, events: hub, databases: databases, keyDirectory: keyDirectory)
        } catch {
            try? store.close()
            lock?.release()
            throw error
        }
        do {
            try await mirror.start()
        } catch {
            try? store.close()
            lock?.release()
            throw error
        }
    }

    private static func storedDeviceID(_ store: PersistentStore) async throws -> String {
        try await store.write(author: MirrorAuthor.import) { context in try MirrorStatus.deviceID(context.db) }
    }

    /// A stream of mirroring events: each setup, import and export when it starts, as it
    /// progresses and when it ends, and what happens to shares. Each call makes a new stream that
    /// starts with the next event; it finishes when the container closes.
    ///
    /// ```swift
    /// Task {
    ///     for await event in container.events() where event.phase == .ended && !event.succeeded {
    ///         showSyncProblem(event.error)
    ///     }
    /// }
    /// ```
    public func events() -> AsyncStream<Event> {
        hub.subscribe()
    }

    /// Sends local changes, then fetches the server's, now: pull to refresh, or each step of a
    /// test with `automaticallySync` off. A request that fails as a whole (no network, throttling)
    /// throws its `CloudError` and what it carried stays pending; rejected credentials throw
    /// ``ContainerError/Code/syncFailed``, and a container without a server
    /// ``ContainerError/Code/localOnly``.
    ///
    /// ```swift
    /// try await container.sync()
    /// ```
    public func sync() async throws {
        try await mirror.syncNow()
    }

    /// Sends local changes now.
    public func sendChanges() async throws { try await mirror.sendNow() }

    /// Fetches and applies the server's changes now.
    public func fetchChanges() async throws { try await mirror.fetchNow() }

    /// Returns once both directions are drained: every local change is on the server and every
    /// server change is here, the "sync finished" signal. Transient failures (no network,
    /// throttling) are retried until `timeout`.
    ///
    /// - Throws: ``ContainerError/Code/timedOut`` with the last failure when not in sync
    ///   in time; ``ContainerError/Code/uploadsRefused`` when the server refused some uploads for
    ///   good; ``ContainerError/Code/syncFailed`` when the credentials were rejected.
    public func waitUntilSynced(timeout: Duration = .seconds(60)) async throws {
        try await mirror.waitUntilSynced(timeout: timeout)
    }

    /// Where mirroring stands: pending and refused uploads, the last import, export and failure.
    ///
    /// ```swift
    /// let status = try await container.status()
    /// if status.pendingUploads > 0 { showBadge("\(status.pendingUploads) changes not uploaded yet") }
    /// ```
    public func status() async throws -> SyncStatus {
        var status = try Self.status(of: store)
        status.isMirroring = options.server != nil
        return status
    }

    /// Where mirroring of a store stands, read from the store file (the CLI's `status`); the store
    /// may be opened for inspection (``PersistentStore/init(inspecting:schema:logger:)``).
    ///
    /// - Throws: ``StoreError/Code/needsUpgrade`` when the store holds mirroring metadata in the
    ///   previous core's layout (``holdsLegacyMirrorLayout(at:)``), whose unsent changes become
    ///   pending uploads only when a container opens the store, or metadata of an earlier version
    ///   that a container brings up to date when it opens the store.
    public static func status(of store: PersistentStore) throws -> SyncStatus {
        try store.read { context in
            try MirrorTables.checkReadable(context.db, path: store.url.path)
            return try MirrorStatus.status(context.db)
        }
    }

    /// Whether the store at `url` holds mirroring metadata in the layout the previous CloudStore
    /// release wrote, read without modifying the file. A container moves it to the current layout
    /// when it opens the store, recording the changes that were not sent yet as pending uploads;
    /// until then ``status(of:)`` cannot count them.
    ///
    /// ```swift
    /// if try PersistentCloudContainer.holdsLegacyMirrorLayout(at: url) {
    ///     try await PersistentCloudContainer(url: url, schema: schema).close()   // upgrades it
    /// }
    /// ```
    public static func holdsLegacyMirrorLayout(at url: URL) throws -> Bool {
        guard try PersistentStore.fileInfo(at: url) != nil else { return false }
        return try StoreOpening.readWithoutWriting(path: url.path, while: "reading its mirroring metadata") { db in
            try LegacyMirrorLayout.isPresent(db)
        }
    }

    /// The entities the store at `url` mirrors in the public database, as the container that last
    /// opened it named them (``Options/publicEntities``), read without modifying the file: what a
    /// tool that syncs the file on the app's behalf opens it with (the CLI's `sync`).
    ///
    /// ```swift
    /// options.publicEntities = try PersistentCloudContainer.publicEntities(at: url)
    /// ```
    public static func publicEntities(at url: URL) throws -> Set<String> {
        guard try PersistentStore.fileInfo(at: url) != nil else { return [] }
        return try StoreOpening.readWithoutWriting(path: url.path, while: "reading its public entities") { db in
            guard try db.tableExists("cloudstore_mirror_state") else { return [] }
            return try PublicEntities.stored(in: db).names
        }
    }

    /// The conflict log: every value that lost a conflict, oldest first, after a sequence number.
    ///
    /// ```swift
    /// for conflict in try container.conflicts() {
    ///     print(conflict.entityName, conflict.property, conflict.losingValue, "lost to", conflict.winningValue)
    /// }
    /// ```
    public func conflicts(after sequence: Int64 = 0, limit: Int? = nil) throws -> [ConflictRecord] {
        try Self.conflicts(in: store, after: sequence, limit: limit)
    }

    /// The conflict log of a store (the CLI's `conflicts`).
    public static func conflicts(in store: PersistentStore, after sequence: Int64 = 0, limit: Int? = nil) throws
        -> [ConflictRecord]
    {
        try store.read { context in
            guard try MirrorTables.exists(context.db) else { return [] }
            return try context.db.conflicts(after: sequence, limit: limit)
        }
    }

    /// Pushes the schema's record types to the server (a `CloudSchema`), as
    /// `initializeCloudKitSchema` does; with `dryRun` it only returns them.
    public func initializeCloudSchema(dryRun: Bool = false) async throws -> CloudSchema {
        let cloudSchema = schema.cloudSchema
        guard !dryRun else { return cloudSchema }
        return try await mirror.modifySchema(cloudSchema)
    }

    /// How this app's record types meet the schema the server has, fetched now: what the server
    /// lacks or types otherwise, and what only it has (another app version's fields, which this
    /// app keeps and sends back unchanged). Ask before the first sync of a new app version
    /// against a production server, whose schema must hold every field first (the CLI's
    /// `schema diff`).
    ///
    /// ```swift
    /// let difference = try await container.serverSchemaDifference()
    /// for problem in difference.refusals(in: .production) { logger.error("\(problem)") }
    /// ```
    ///
    /// - Throws: ``ContainerError/Code/localOnly`` without a server; the server's or the network's
    ///   `CloudError`.
    public func serverSchemaDifference() async throws -> CloudSchema.Difference {
        schema.cloudSchema.difference(from: try await mirror.fetchSchema())
    }

    /// Stops mirroring and closes the store.
    public func close() async throws {
        await mirror.stop()
        hub.finish()
        defer { syncLock?.release() }
        try store.close()
    }
}
