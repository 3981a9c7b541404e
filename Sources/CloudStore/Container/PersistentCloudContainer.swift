import CloudStoreLogging
import CloudStoreSync
import Foundation
import GRDB
import Logging

/// A local store that mirrors itself through a cloud server to every other device of the same user,
/// as `NSPersistentCloudKitContainer` does on Apple platforms.
///
/// Save through ``store`` as usual; the container exports each save's history to the server and
/// imports what other devices saved, resolving conflicts field by field and logging every value that
/// loses. Imports are written with the author `cloudstore.import`, so an app observing history sees
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
public final class PersistentCloudContainer: Sendable {
    public let store: PersistentStore
    public let schema: Schema
    public let options: Options
    /// The zone the store's records live in.
    public let zoneID: ZoneID
    let mirror: CloudMirror
    let hub: EventHub

    /// Opens (creating or migrating) the store at `url` and starts mirroring it.
    ///
    /// - Parameters:
    ///   - migrations: explicit migration steps, see ``MigrationPlan``.
    ///   - logger: where mirroring logs; by default a `cloudstore.mirroring` logger at the level
    ///     `CLOUDSTORE_DEBUG` selects.
    public convenience init(
        url: URL, schema: Schema, migrations: MigrationPlan = MigrationPlan(), options: Options = Options(),
        logger: Logger = Logger.cloudStore("mirroring")
    ) async throws {
        try await self.init(url: url, schema: schema, migrations: migrations, options: options, logger: logger) {
            server, deviceID in
            var httpLogger = Logger(label: "cloudstore.http")
            httpLogger.logLevel = logger.logLevel
            return HTTPCloudDatabase(
                baseURL: server.url, container: server.containerIdentifier, environment: server.environment,
                scope: .private, token: server.token, deviceID: deviceID, logger: httpLogger)
        }
    }

    /// Opens the store and mirrors it through a database you provide, e.g. one wrapped to inject
    /// faults in tests. `makeDatabase` is called when `options.server` is set.
    public init(
        url: URL, schema: Schema, migrations: MigrationPlan = MigrationPlan(), options: Options = Options(),
        logger: Logger = Logger.cloudStore("mirroring"),
        makeDatabase: @Sendable (Server, _ deviceID: String) throws -> any CloudDatabase
    ) async throws {
        var storeLogger = Logger(label: "cloudstore.store")
        storeLogger.logLevel = logger.logLevel
        let store = try PersistentStore(
            url: url, schema: schema, migrations: migrations, configuration: options.storeConfiguration, logger: storeLogger)
        self.store = store
        self.schema = schema
        self.options = options
        self.zoneID = ZoneID(zoneName: options.zoneName ?? schema.name)
        self.hub = EventHub()
        self.mirror = CloudMirror(
            store: store, schema: schema, zoneID: zoneID, options: options, events: hub, logger: logger)
        do {
            var database: (any CloudDatabase)?
            var deviceID: String?
            if let server = options.server {
                if let configured = server.deviceID {
                    deviceID = configured
                } else {
                    deviceID = try await Self.storedDeviceID(store)
                }
                database = try makeDatabase(server, deviceID!)
            }
            try await mirror.start(database: database, deviceID: deviceID)
        } catch {
            try? store.close()
            throw error
        }
    }

    private static func storedDeviceID(_ store: PersistentStore) async throws -> String {
        try await store.write(author: MirrorAuthor.import) { context in
            try MirrorMetadata.create(context.db)
            if let id = try context.db.mirrorState(.deviceID, as: String.self) { return id }
            let id = UUID().uuidString
            try context.db.setMirrorState(.deviceID, encoding: id)
            return id
        }
    }

    /// A stream of mirroring events: each setup, import and export when it starts and when it ends.
    public func events() -> AsyncStream<Event> {
        hub.subscribe()
    }

    /// Sends local changes, then fetches the server's, now.
    public func sync() async throws {
        try await mirror.sendNow()
        try await mirror.fetchNow()
    }

    /// Sends local changes now.
    public func sendChanges() async throws { try await mirror.sendNow() }

    /// Fetches and applies the server's changes now.
    public func fetchChanges() async throws { try await mirror.fetchNow() }

    /// Returns once both directions are drained: every local change is on the server and every
    /// server change is here, the "sync finished" signal. Transient failures (no network,
    /// throttling) are retried until `timeout`.
    ///
    /// - Throws: ``ContainerError/timedOut(_:lastFailure:)`` with the last failure when not in sync
    ///   in time; ``ContainerError/uploadsRefused(_:)`` when the server refused some uploads for
    ///   good; ``ContainerError/syncFailed(_:)`` when the credentials were rejected.
    public func waitUntilSynced(timeout: Duration = .seconds(60)) async throws {
        try await mirror.waitUntilSynced(timeout: timeout)
    }

    /// Where mirroring stands.
    public func status() async throws -> SyncStatus {
        var status = try Self.status(of: store)
        status.isMirroring = options.server != nil
        if let failure = await mirror.currentFailure { status.lastError = failure }
        return status
    }

    /// Where mirroring of a store stands, read from the store file (the CLI's `status`).
    public static func status(of store: PersistentStore) throws -> SyncStatus {
        try store.read { context in
            let db = context.db
            guard try MirrorMetadata.exists(db) else {
                return SyncStatus(
                    isMirroring: false, user: nil, isSignedOut: false, pendingUploads: 0,
                    unexportedTransactions: try Int.fetchOne(db, sql: "SELECT count(*) FROM cloudstore_history_transaction") ?? 0,
                    serverChangeToken: nil, lastImport: nil, lastExport: nil, lastError: nil, conflictCount: 0)
            }
            let engine = try db.mirrorState(.engineState, as: SyncEngine.State.Serialization.self)
            let through = try db.mirrorState(.exportedThrough, as: HistoryToken.self)
            let unexported = try Int.fetchOne(
                db,
                sql: "SELECT count(*) FROM cloudstore_history_transaction WHERE token > ? AND (author IS NULL OR author != ?)",
                arguments: [through?.transactionNumber ?? 0, MirrorAuthor.import]) ?? 0
            let lastError = try db.mirrorState(.lastError, as: String.self).map { message in
                SyncFailure(message: message, date: (try? db.mirrorState(.lastErrorDate, as: Date.self)) ?? Date())
            }
            return SyncStatus(
                isMirroring: try db.mirrorState(.engineState) != nil,
                user: try db.mirrorState(.userRecordName, as: String.self) ?? engine?.user,
                isSignedOut: try db.mirrorState(.accountStatus, as: String.self) == "signedOut",
                pendingUploads: try db.pendingRecordCount(), unexportedTransactions: unexported,
                serverChangeToken: engine?.databaseSyncToken,
                lastImport: try db.mirrorState(.lastImport, as: Date.self),
                lastExport: try db.mirrorState(.lastExport, as: Date.self), lastError: lastError,
                conflictCount: try Int.fetchOne(db, sql: "SELECT count(*) FROM cloudstore_mirror_conflict") ?? 0)
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
            guard try MirrorMetadata.exists(context.db) else { return [] }
            return try context.db.conflicts(after: sequence, limit: limit)
        }
    }

    /// Pushes the schema's record types to the server (``CloudSchema``), as
    /// `initializeCloudKitSchema` does; with `dryRun` it only returns them.
    public func initializeCloudSchema(dryRun: Bool = false) async throws -> CloudSchema {
        let cloudSchema = schema.cloudSchema
        guard !dryRun else { return cloudSchema }
        return try await mirror.modifySchema(cloudSchema)
    }

    /// Stops mirroring and closes the store.
    public func close() async throws {
        await mirror.stop()
        hub.finish()
        try store.close()
    }
}

extension Schema {
    /// The record types of the mirrored entities, as the server's schema endpoints take them: a field
    /// per attribute and to-one relationship, and the link record type for many-to-many relationships.
    public var cloudSchema: CloudSchema {
        var recordTypes = mirroredEntities.map { entity in
            CloudSchema.RecordType(
                name: entity.name,
                fields: entity.attributes.map { CloudSchema.Field(name: $0.name, type: $0.type.fieldType, queryable: true) }
                    + entity.toOneRelationships.map { CloudSchema.Field(name: $0.name, type: .reference, queryable: true) }
                    + [CloudSchema.Field(name: EditTimes.field, type: .string, queryable: false)])
        }
        if mirroredEntities.contains(where: { !LinkRecords.sides(of: $0, in: self).isEmpty }) {
            recordTypes.append(
                CloudSchema.RecordType(
                    name: LinkRecords.recordType,
                    fields: [
                        CloudSchema.Field(name: "relationship", type: .string, queryable: true),
                        CloudSchema.Field(name: "source", type: .reference, queryable: true),
                        CloudSchema.Field(name: "target", type: .reference, queryable: true),
                    ]))
        }
        return CloudSchema(recordTypes: recordTypes)
    }
}

extension AttributeType {
    /// The record field type an attribute travels as.
    public var fieldType: FieldType {
        switch self {
        case .string, .uuid, .url, .decimal, .json: .string
        case .int64, .bool: .int64
        case .double: .double
        case .date: .timestamp
        case .data: .bytes
        }
    }
}
