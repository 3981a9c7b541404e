import CloudStoreWire
import Foundation

extension PersistentCloudContainer {
    /// Something on the server put this device's mirrored data in question, and the container
    /// waits for the app to say what happens to it (``decide(_:zoneID:)``). Until then the affected
    /// database does not sync and nothing local is deleted: not the objects, not the changes not
    /// uploaded yet. The container announces it with an event of kind
    /// ``Event/Kind/localDataDecision`` and keeps it in ``SyncStatus/localDataDecision`` (also
    /// after a restart) until the app decides.
    ///
    /// ```swift
    /// if let decision = try await container.status().localDataDecision {
    ///     // "Your notes were deleted on another device. Upload this device's 12 notes again?"
    ///     try await container.decide(userWantsThemBack ? .uploadAgain : .deleteLocalData)
    /// }
    /// ```
    public struct LocalDataDecision: Sendable, Hashable, Codable, CustomStringConvertible {
        /// What happened.
        public enum Reason: Sendable, Hashable, Codable {
            /// The zone the store mirrors to was deleted on the server (on another device of
            /// the user, or by an app that reset its data).
            case zoneDeleted
            /// The zone was purged on the server: its data deleted for good, as the user or the
            /// operator asked.
            case zonePurged
            /// The server says the credentials belong to `currentUser`, not to `previousUser`,
            /// whose data the store holds (a sign-out followed by another user's sign-in).
            case accountChanged(previousUser: String, currentUser: String)
            /// A share's zone went away (`zoneID`: the owner stopped sharing or removed this
            /// user, or deleted the zone; or, for a share this user owns, another of their devices
            /// deleted it) while this device held changes of its objects not uploaded yet. Only
            /// that zone waits; the rest syncs on.
            case shareEnded
        }

        /// What happened.
        public var reason: Reason
        /// The zone concerned: the primary zone (for an account change, every zone of the store
        /// is the previous user's).
        public var zoneID: ZoneID
        /// How many mirrored objects this device holds that the decision is about.
        public var localObjects: Int
        /// How many of their changes were not uploaded yet (records, deletes and links).
        public var unsentChanges: Int
        /// When the container learned it.
        public var date: Date

        /// A decision about `localObjects` objects, `unsentChanges` of their changes not
        /// uploaded, for tests and tools; the container makes its own.
        public init(reason: Reason, zoneID: ZoneID, localObjects: Int, unsentChanges: Int, date: Date) {
            self.reason = reason
            self.zoneID = zoneID
            self.localObjects = localObjects
            self.unsentChanges = unsentChanges
            self.date = date
        }

        /// What happened and what it concerns, in one line.
        public var description: String {
            let what =
                switch reason {
                case .zoneDeleted: "zone \(zoneID.zoneName) was deleted on the server"
                case .zonePurged: "zone \(zoneID.zoneName) was purged on the server"
                case .accountChanged(let previous, let current): "the server says this is user \(current), not \(previous)"
                case .shareEnded: "the share of zone \(zoneID.zoneName)\(zoneID.ownerRecordName.map { " (owner \($0))" } ?? "") ended"
                }
            return "\(what); this device holds \(localObjects) object(s) and \(unsentChanges) change(s) not uploaded"
        }
    }

    /// What the app decides for the local data a ``LocalDataDecision`` is about.
    public enum LocalDataChoice: String, Sendable, Hashable, Codable {
        /// Upload the local data again: the zone is created again (for an account change, in the
        /// new user's account) and every object goes up whole, unsent changes included. Shares of
        /// the previous user are left. For a share that ended, its objects become this user's own,
        /// in the primary zone.
        case uploadAgain
        /// Keep the objects on this device without uploading them: they are no longer mirrored
        /// (one that the app changes later is uploaded with that change), and syncing resumes
        /// (for an account change, with the new user's data).
        case keepLocalOnly
        /// Delete the local copy of the mirrored data, unsent changes included (for an account
        /// change, every zone's, shares too); syncing resumes.
        case deleteLocalData
    }

    /// Where ``purgeMirroredData(_:)`` deletes.
    public enum PurgeScope: String, Sendable, Hashable {
        /// This device's copy only; the server keeps its data. Syncing stops until the container
        /// is opened again, which fetches the signed-in user's data from the start: what an app
        /// does when a user signs out, before it opens the next user's container.
        case thisDevice
        /// The primary zone on the server and this device's copy of it: the user's data
        /// everywhere (other devices are asked what to do with theirs, ``LocalDataDecision``).
        /// Syncing goes on; the next save creates the zone again.
        case everywhere
    }

    /// Deletes the mirrored data, unsent changes included, as NSPersistentCloudKitContainer's
    /// `purgeObjectsAndRecordsInZone` (`.everywhere`) or a local reset at sign-out (`.thisDevice`).
    /// The conflict log stays.
    ///
    /// ```swift
    /// // Sign-out: forget this user's data on this device; the server keeps it.
    /// try await container.purgeMirroredData(.thisDevice)
    /// try await container.close()
    /// ```
    ///
    /// - Throws: ``ContainerError/Code/localOnly`` without a server; for `.everywhere`, the server's or
    ///   the network's `CloudError` (nothing local is deleted then).
    public func purgeMirroredData(_ scope: PurgeScope) async throws {
        try await mirror.purge(scope)
    }

    /// Says what happens to the local data of a pending ``LocalDataDecision``, applies it in one
    /// transaction and resumes syncing. Without `zoneID`, the decision is the one that stops
    /// syncing (``SyncStatus/localDataDecision``), or else the oldest share that ended
    /// (``SyncStatus/endedShares``); name a share's zone to answer for that one.
    ///
    /// ```swift
    /// try await container.decide(.uploadAgain)
    /// try await container.sync()
    ///
    /// // A share ended while this device held edits of it: keep them, as this user's own.
    /// for ended in try await container.status().endedShares {
    ///     try await container.decide(.uploadAgain, zoneID: ended.zoneID)
    /// }
    /// ```
    ///
    /// - Throws: ``ContainerError/Code/noLocalDataDecision`` when nothing waits for a decision
    ///   (about `zoneID`); ``ContainerError/Code/localOnly`` without a server.
    public func decide(_ choice: LocalDataChoice, zoneID: ZoneID? = nil) async throws {
        try await mirror.decide(choice, zoneID: zoneID)
    }
}
