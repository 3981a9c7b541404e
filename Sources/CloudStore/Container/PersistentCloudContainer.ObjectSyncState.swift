import CloudStoreWire
import Foundation
import GRDB

extension PersistentCloudContainer {
    /// What mirroring knows of one object: where its record lives, which server version this
    /// device has, what is still to upload, and whether the server refused it or did not take it
    /// yet. The per-object view of what ``SyncStatus`` counts, read from the store file in one
    /// transaction.
    ///
    /// ```swift
    /// if let state = try container.syncState(of: Note.self, id: note.id) {
    ///     if let refusal = state.refusal {
    ///         showError("Not uploaded: \(refusal.reason ?? refusal.code.rawValue)")
    ///     } else if let retry = state.retry {
    ///         showBadge("Upload failed \(retry.attempts)×, retrying")
    ///     } else if !state.isSynced {
    ///         showBadge("Waiting to upload")
    ///     }
    /// }
    /// ```
    public struct ObjectSyncState: Sendable, Hashable {
        /// What is still to upload for an object.
        public enum Upload: Sendable, Hashable {
            /// A save: every field when `wholeObject` (the server has no copy this device knows
            /// of: a new object, or one created again), else the fields in `keys`, each changed
            /// here since the server version this device has.
            case save(keys: Set<String>, wholeObject: Bool)
            /// A delete of the server's record.
            case delete
        }

        /// An upload the server did not take at its last attempt, with an error that may pass:
        /// its own `THROTTLED`, `TRY_AGAIN_LATER` or `INTERNAL_ERROR` for the record, or
        /// `QUOTA_EXCEEDED`. The upload stays pending and goes again by itself; this says how it
        /// went so far. It is gone once the server takes the upload (or refuses it for good:
        /// ``ObjectSyncState/refusal``), or once nothing is left to upload.
        ///
        /// A request that failed as a whole (no network, the server down) is not counted here: no
        /// object was answered (``SyncStatus/lastError`` says what happened).
        ///
        /// ```swift
        /// if let retry = try container.syncState(of: Note.self, id: note.id)?.retry {
        ///     let when = retry.nextAttempt.map { "after \($0.formatted())" } ?? "with the next sync"
        ///     print("\(retry.error.code): tried \(retry.attempts) times, trying again \(when)")
        /// }
        /// ```
        public struct UploadRetry: Sendable, Hashable, Codable {
            /// The server's error at the last attempt: its code, reason and `retryAfter`.
            public var error: ServerError
            /// How many attempts in a row the server did not take, this one included (1 after the
            /// first).
            public var attempts: Int
            /// When the next attempt is due: when the last one was answered plus the server's
            /// `retryAfter`; nil when the server gave none, and the upload goes with the next sync.
            public var nextAttempt: Date?

            /// A retry state: the last attempt's error, the attempts so far, and when the next is due.
            public init(error: ServerError, attempts: Int, nextAttempt: Date?) {
                self.error = error
                self.attempts = attempts
                self.nextAttempt = nextAttempt
            }

            /// Reads a retry state as `encode(to:)` wrote it (the store keeps it so).
            public init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: CodingKeys.self)
                error = try container.decode(ServerError.self, forKey: .error)
                attempts = try container.decode(Int.self, forKey: .attempts)
                nextAttempt = try container.decodeIfPresent(Date.self, forKey: .nextAttempt)
            }
        }

        /// The object's entity.
        public var entityName: String
        /// The object's id (its record's name).
        public var id: UUID
        /// Where the object's record lives: its zone, the zone's owner, and what the current user
        /// may do with it.
        public var sharing: ObjectSharing
        /// The server's change tag of the version this device has; nil when it has none (the
        /// object was never uploaded, or its upload's answer has not been heard yet).
        public var changeTag: String?
        /// When the server wrote that version; nil when unknown.
        public var serverModified: Date?
        /// What is still to upload; nil when nothing is.
        public var pendingUpload: Upload?
        /// Why the server refused the pending upload for good (its error code and reason); nil
        /// when it did not. A refused upload is not sent again until the app changes the object,
        /// which sends it with the next sync.
        public var refusal: ServerError?
        /// How the pending upload failed so far with errors that may pass (``UploadRetry``); nil
        /// when its last attempt did not fail so, or it was not sent yet.
        public var retry: UploadRetry? = nil

        /// Whether this device and the server agree on the object: it has a server version and
        /// nothing left to upload.
        public var isSynced: Bool { changeTag != nil && pendingUpload == nil }
    }

    /// What mirroring knows of an object (``ObjectSyncState``); nil when it knows nothing: the
    /// object does not exist and has no pending delete, or its entity is not mirrored.
    public func syncState<E: Entity>(of type: E.Type, id: UUID) throws -> ObjectSyncState? {
        try syncState(entityName: E.entityName, id: id)
    }

    /// What mirroring knows of the object `id` of `entityName`; nil when it knows nothing.
    public func syncState(entityName: String, id: UUID) throws -> ObjectSyncState? {
        let primary = zoneID
        return try store.read { context in
            guard try MirrorTables.exists(context.db) else { return nil }
            return try MirrorStatus.syncState(context.db, entityName: entityName, id: id, primary: primary)
        }
    }

    /// Every object whose upload the server refused for good, with why (``ObjectSyncState/refusal``),
    /// in record-name order: what ``SyncStatus/refusedUploads`` counts, less refused link changes
    /// (which are not objects). ``failedUploads()`` adds the uploads that wait for a retry.
    ///
    /// ```swift
    /// for state in try container.refusedUploads() {
    ///     print(state.entityName, state.id, state.refusal?.reason ?? "")
    /// }
    /// ```
    public func refusedUploads() throws -> [ObjectSyncState] {
        try Self.refusedUploads(in: store, primaryZone: zoneID)
    }

    /// The objects of a store whose upload the server refused for good; the store may be opened
    /// for inspection. `primaryZone` is the zone the container mirrors to (by default the one
    /// named after the schema, as a container's).
    ///
    /// - Throws: ``StoreError/Code/needsUpgrade`` when a container has to bring the store's
    ///   mirroring metadata up to date first (``status(of:)``).
    public static func refusedUploads(in store: PersistentStore, primaryZone: ZoneID? = nil) throws -> [ObjectSyncState] {
        try objectStates(in: store, primaryZone: primaryZone, MirrorStatus.refusedUploads)
    }

    /// Every object whose upload failed, in record-name order: refused for good
    /// (``ObjectSyncState/refusal``: not sent again until the app changes the object), or not
    /// taken at its last attempt with an error that may pass (``ObjectSyncState/retry``: sent
    /// again by itself). What ``SyncStatus/refusedUploads`` and ``SyncStatus/retryingUploads``
    /// count, less link changes (which are not objects). The CLI's `status --failed`.
    ///
    /// ```swift
    /// for state in try container.failedUploads() {
    ///     if let refusal = state.refusal {
    ///         print(state.id, "refused:", refusal.reason ?? refusal.code.rawValue)
    ///     } else if let retry = state.retry {
    ///         print(state.id, "retrying:", retry.error.code, "after", retry.attempts, "attempts")
    ///     }
    /// }
    /// ```
    public func failedUploads() throws -> [ObjectSyncState] {
        try Self.failedUploads(in: store, primaryZone: zoneID)
    }

    /// The objects of a store whose upload failed, refused or retrying (``failedUploads()``); the
    /// store may be opened for inspection. `primaryZone` is the zone the container mirrors to (by
    /// default the one named after the schema, as a container's).
    ///
    /// - Throws: ``StoreError/Code/needsUpgrade`` when a container has to bring the store's
    ///   mirroring metadata up to date first (``status(of:)``).
    public static func failedUploads(in store: PersistentStore, primaryZone: ZoneID? = nil) throws -> [ObjectSyncState] {
        try objectStates(in: store, primaryZone: primaryZone, MirrorStatus.failedUploads)
    }

    /// The states `query` reads from a store's metadata; none when the store never mirrored.
    /// Throws ``StoreError/Code/needsUpgrade`` when a container has to bring the metadata up to
    /// date first (``status(of:)``).
    private static func objectStates(
        in store: PersistentStore, primaryZone: ZoneID?, _ query: @escaping @Sendable (Database, ZoneID) throws -> [ObjectSyncState]
    ) throws -> [ObjectSyncState] {
        let primary = primaryZone ?? ZoneID(zoneName: store.schema.name)
        return try store.read { context in
            guard try MirrorTables.exists(context.db) else { return [] }
            try MirrorTables.checkReadable(context.db, path: store.url.path)
            return try query(context.db, primary)
        }
    }
}
