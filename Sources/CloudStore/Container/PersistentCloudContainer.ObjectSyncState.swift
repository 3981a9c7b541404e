import CloudStoreWire
import Foundation

extension PersistentCloudContainer {
    /// What mirroring knows of one object: where its record lives, which server version this
    /// device has, what is still to upload, and whether the server refused it. The per-object view
    /// of what ``SyncStatus`` counts, read from the store file in one transaction.
    ///
    /// ```swift
    /// if let state = try container.syncState(of: Note.self, id: note.id) {
    ///     if let refusal = state.refusal {
    ///         showError("Not uploaded: \(refusal.reason ?? refusal.code.rawValue)")
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
            guard try MirrorMetadata.exists(context.db) else { return nil }
            return try MirrorMetadata.syncState(context.db, entityName: entityName, id: id, primary: primary)
        }
    }

    /// Every object whose upload the server refused for good, with why (``ObjectSyncState/refusal``),
    /// in record-name order: what ``SyncStatus/refusedUploads`` counts, less refused link changes
    /// (which are not objects). The CLI's `status --failed`.
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
    public static func refusedUploads(in store: PersistentStore, primaryZone: ZoneID? = nil) throws -> [ObjectSyncState] {
        let primary = primaryZone ?? ZoneID(zoneName: store.schema.name)
        return try store.read { context in
            guard try MirrorMetadata.exists(context.db) else { return [] }
            return try MirrorMetadata.refusedUploads(context.db, primary: primary)
        }
    }
}
