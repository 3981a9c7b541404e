import CloudStoreSync
import Foundation

extension PersistentCloudContainer {
    /// The cloud server a container mirrors to.
    ///
    /// ```swift
    /// let server = PersistentCloudContainer.Server(
    ///     url: URL(string: "http://127.0.0.1:8080")!, containerIdentifier: "iCloud.com.example.notes",
    ///     token: "alice-token")
    /// ```
    public struct Server: Sendable {
        /// The server's base URL, e.g. `http://127.0.0.1:8080`.
        public var url: URL
        /// The container identifier, e.g. `iCloud.com.example.notes`.
        public var containerIdentifier: String
        /// The container's environment: `development` (the default; the server's schema grows as
        /// records arrive) or `production`.
        public var environment: CloudEnvironment
        /// The user's bearer token.
        public var token: String
        /// This device's identifier, sent with every request; nil uses one the store keeps (a
        /// UUID made when the store first mirrored). Set it only to a value no other device of the
        /// user has: a record last written by this ID is taken for this device's own write.
        public var deviceID: String?

        /// The server at `url`, as the user whose bearer token is `token`.
        public init(
            url: URL, containerIdentifier: String, environment: CloudEnvironment = .development, token: String,
            deviceID: String? = nil
        ) {
            self.url = url
            self.containerIdentifier = containerIdentifier
            self.environment = environment
            self.token = token
            self.deviceID = deviceID
        }
    }

    /// What to do with local data when the store's zone disappears from the server.
    public enum ZoneDeletionPolicy: String, Sendable, Hashable {
        /// Delete the local copy of the mirrored data, changes not uploaded included (also when
        /// the zone was purged).
        case deleteLocalData
        /// Recreate the zone and upload the local data again (a purged zone's local data is
        /// deleted instead: a purge is a deliberate erase).
        case reupload
        /// Stop syncing the private database and ask the app (``PersistentCloudContainer/LocalDataDecision``,
        /// answered with ``PersistentCloudContainer/decide(_:zoneID:)``). The default: nothing this
        /// device did not upload is deleted without a call the app made.
        case ask
    }

    /// What to do with local data when the server reports a different user than the store's.
    public enum AccountChangePolicy: String, Sendable, Hashable {
        /// Delete the previous user's local copy (including changes it had not uploaded) and import
        /// the new user's data: one user's data never reaches another's account.
        case replaceLocalData
        /// Keep the local data and upload all of it to the new user's account.
        case keepLocalData
        /// Stop syncing and ask the app (``PersistentCloudContainer/LocalDataDecision``), keeping
        /// the previous user's data and unsent changes; if that user signs in again before the
        /// app decides, syncing resumes and the changes go up. The default: nothing of either
        /// user is lost or mixed without a call the app made.
        case ask
    }

    /// How a container mirrors.
    ///
    /// ```swift
    /// var options = PersistentCloudContainer.Options(server: server)
    /// options.conflictPolicy = .lastWriterWins
    /// options.automaticallySync = false   // tests: call sync() yourself
    /// ```
    public struct Options: Sendable {
        /// The server to mirror to; nil keeps the store local only.
        public var server: Server?
        /// How fields both sides changed are resolved; every losing value is logged.
        public var conflictPolicy: ConflictPolicy = .serverWins
        /// The zone the store's records live in; nil uses the schema's name.
        public var zoneName: String?
        /// Sync by itself: export shortly after local saves, import when the server pushes. Turn it
        /// off in tests that need a fixed order, and call ``PersistentCloudContainer/sync()``.
        public var automaticallySync = true
        /// How automatic exports gather saves: a save while nothing is being exported (or waiting
        /// to be) goes at once; saves during an export go this long after the first of them,
        /// together.
        ///
        /// A person's edits, one after another, each go as soon as the export before ended; a
        /// burst of saves costs one export after the first, at most one every `exportDebounce`
        /// while it lasts. Raise it to trade latency for fewer requests.
        public var exportDebounce: Duration = .milliseconds(10)
        /// How often to fetch when the server's push does not answer.
        public var pollInterval: Duration = .seconds(60)
        /// What to do when the store's zone is deleted or purged on the server (`ask` by default).
        public var zoneDeletionPolicy: ZoneDeletionPolicy = .ask
        /// What to do when the server reports another user (`ask` by default).
        public var accountChangePolicy: AccountChangePolicy = .ask
        /// Entities mirrored in the server's **public database** instead of the user's private
        /// one: every user's objects of them are read into the store and kept current by push (a
        /// query subscription per entity, no polling interval), and this user's own are uploaded
        /// there. Only an object's creator may change or delete it (``ContainerError/Code/notCreator``).
        /// A public entity relates only to public entities. See <doc:PublicDatabase>.
        ///
        /// ```swift
        /// options.publicEntities = ["Announcement"]
        /// ```
        public var publicEntities: Set<String> = []
        /// Where this device keeps the user's account key for encrypted attributes; nil: a file
        /// beside the store, readable by its owner only (``FileEncryptionKeyStore``). See
        /// <doc:EndToEndEncryption>.
        public var encryptionKeyStore: (any EncryptionKeyStore)?
        /// Records per fetched page (at most 200).
        public var fetchPageSize: Int?
        /// How the local store opens and commits (`synchronous`, reader count, the clock its
        /// history timestamps, and so the edit times `lastWriterWins` compares, come from).
        public var storeConfiguration = PersistentStore.Configuration()
        /// Changes the sync engine; applied last, for settings these options do not cover.
        public var configureEngine: (@Sendable (inout SyncEngine.Configuration) -> Void)?

        /// Options that mirror to `server` (none: a local store only) with `conflictPolicy`, and
        /// the defaults above for the rest.
        public init(server: Server? = nil, conflictPolicy: ConflictPolicy = .serverWins) {
            self.server = server
            self.conflictPolicy = conflictPolicy
        }
    }
}
