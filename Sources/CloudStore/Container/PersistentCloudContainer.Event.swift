import CloudStoreSync
import Foundation

extension PersistentCloudContainer {
    /// A piece of mirroring work, as `NSPersistentCloudKitContainer.Event`: delivered when it
    /// starts, after each batch it sends or page it applies (``phase`` `.progress`: long work
    /// reports as it goes), and when it ends (``endDate`` set), all with the same ``id``.
    ///
    /// ```swift
    /// for await event in container.events() {
    ///     switch event.phase {
    ///     case .progress: print("\(event.kind): \(event.completed) of \(event.total.map(String.init) ?? "?")")
    ///     case .ended: print(event.kind, event.succeeded, event.counts.saved)
    ///     case .started: break
    ///     }
    /// }
    /// ```
    public struct Event: Sendable, Hashable, Identifiable, CustomStringConvertible {
        /// Which work the event is about.
        public enum Kind: String, Sendable, Hashable {
            /// Opening the mirror: metadata, the sync engine, the first look at local history.
            case setup
            /// Fetching and applying changes from the server.
            case `import`
            /// Sending local changes to the server.
            case export
            /// Something happened to a share: participants joined, left or were invited, a
            /// permission changed, sharing stopped, or this user's access ended (``activity``).
            /// Delivered once, ended.
            case sharing
            /// Syncing stopped until the app decides what happens to the local data
            /// (``localDataDecision``): answer with ``PersistentCloudContainer/decide(_:zoneID:)``.
            /// Delivered once, ended.
            case localDataDecision
            /// Fetched records were refused because an encrypted field did not open: altered on
            /// the server, moved from another record or field, or plain where the schema says
            /// encrypted (``decryptionRefusals``). Nothing of them was applied; the rest synced.
            /// Delivered once, ended. See <doc:EndToEndEncryption>.
            case decryptionRefused
        }

        /// Where the work is: just started, under way with ``counts`` so far, or ended.
        public enum Phase: String, Sendable, Hashable {
            /// The work began; nothing is counted yet.
            case started
            /// The work sent a batch or applied a page; ``counts`` holds what it did so far.
            case progress
            /// The work is over: ``endDate``, ``succeeded`` and ``error`` say how it went.
            case ended
        }

        /// The same for every event of one piece of work, from `started` to `ended`.
        public let id: UUID
        /// Which work this is.
        public let kind: Kind
        /// Where the work is.
        public let phase: Phase
        /// When the work started.
        public let startDate: Date
        /// Nil while the work runs.
        public let endDate: Date?
        /// False when the work ended with an error.
        public let succeeded: Bool
        /// Why the work failed, once it ended without success; nil otherwise.
        public let error: SyncFailure?
        /// What the work did so far.
        public let counts: MirrorCounts
        /// How many records the work set out to handle, when known: an export knows the uploads
        /// pending when it starts (more may be saved meanwhile); an import learns nothing of the
        /// total from the server, so it is nil there.
        public let total: Int?

        /// For ``Kind/sharing``: what happened, in order.
        public let activity: [ShareActivity]
        /// For ``Kind/localDataDecision``: what the app is asked to decide.
        public let localDataDecision: LocalDataDecision?
        /// For ``Kind/decryptionRefused``: each refused record and the field that did not open.
        public internal(set) var decryptionRefusals: [DecryptionRefusal] = []

        /// Records handled so far: saved, deleted, or refused for good.
        public var completed: Int { counts.saved + counts.deleted + counts.failed }

        /// One line for logs: the kind, the phase and the counts (`export succeeded: 3 saved, …`),
        /// or what happened to a share.
        public var description: String {
            let state: String
            switch phase {
            case .started: state = "started"
            case .progress: state = "in progress (\(completed)\(total.map { " of \($0)" } ?? ""))"
            case .ended: state = succeeded ? "succeeded" : "failed (\(error?.description ?? "unknown error"))"
            }
            if kind == .sharing { return "sharing: " + activity.map(\.description).joined(separator: "; ") }
            if kind == .localDataDecision { return "local data decision needed: \(localDataDecision?.description ?? "")" }
            if kind == .decryptionRefused { return "decryption refused: " + decryptionRefusals.map(\.description).joined(separator: "; ") }
            return "\(kind.rawValue) \(state): \(counts.saved) saved, \(counts.deleted) deleted, \(counts.conflicts) conflicts"
        }
    }

    /// A fetched record refused because one of its encrypted fields did not open
    /// (``Event/Kind/decryptionRefused``).
    public struct DecryptionRefusal: Sendable, Hashable, CustomStringConvertible {
        /// The record's entity.
        public var entityName: String
        /// The record's name: the object's id.
        public var recordName: String
        /// The encrypted attribute whose value did not open.
        public var field: String
        /// Why: altered or another record's, malformed, or plain.
        public var reason: String

        /// One line for logs.
        public var description: String { "\(entityName) \(recordName).\(field): \(reason)" }
    }

    /// Why mirroring failed, as the server or the network said.
    public struct SyncFailure: Error, Sendable, Hashable, CustomStringConvertible {
        /// The server's error code, when the server answered.
        public var code: ServerErrorCode?
        /// What went wrong, as the server or the network said it.
        public var message: String
        /// Seconds the server asked to wait (throttling).
        public var retryAfter: Double?
        /// The record concerned, for a refused upload.
        public var recordName: String?
        /// When the failure happened.
        public var date: Date

        /// A failure with `message`, for tests and tools; the container makes its own from the
        /// server's answers.
        public init(code: ServerErrorCode? = nil, message: String, retryAfter: Double? = nil, recordName: String? = nil, date: Date = Date()) {
            self.code = code
            self.message = message
            self.retryAfter = retryAfter
            self.recordName = recordName
            self.date = date
        }

        init(_ error: CloudError, date: Date = Date()) {
            self.init(code: error.code, message: error.description, retryAfter: error.retryAfter, date: date)
        }

        init(_ error: ServerError, date: Date = Date()) {
            self.init(
                code: error.serverErrorCode, message: error.description, retryAfter: error.retryAfter,
                recordName: error.recordName, date: date)
        }

        /// The message.
        public var description: String { message }
    }

    /// Where mirroring stands, as the store file records it.
    public struct SyncStatus: Sendable, Hashable {
        /// Whether a server is configured.
        public var isMirroring: Bool
        /// The user the mirrored data belongs to, once the server said.
        public var user: String?
        /// True after the server rejected the credentials; local data and pending changes are kept.
        public var isSignedOut: Bool
        /// Records waiting to be uploaded (objects and links), not counting refused ones.
        public var pendingUploads: Int
        /// Uploads the server refused for good (too large, say); they stay local until the app
        /// changes those objects again. ``PersistentCloudContainer/waitUntilSynced(timeout:)``
        /// throws ``ContainerError/Code/uploadsRefused`` naming them.
        public var refusedUploads: Int
        /// Uploads the server did not take at their last attempt, with an error that may pass
        /// (``ObjectSyncState/UploadRetry``): they are counted in ``pendingUploads`` too, and
        /// go again by themselves. ``PersistentCloudContainer/failedUploads()`` lists them.
        public var retryingUploads: Int = 0
        /// The server's database token this device has fetched up to.
        public var serverChangeToken: String?
        /// When an import last finished without error; nil before the first.
        public var lastImport: Date?
        /// When an export last finished without error; nil before the first.
        public var lastExport: Date?
        /// The last failure, as the store file recorded it in the transaction that learned it
        /// (code, message, date, and the record for a refused upload); nil once it is past: an
        /// import ended without a failure since, and an export did too or nothing waits to go up.
        public var lastError: SyncFailure?
        /// Entries in the conflict log.
        public var conflictCount: Int
        /// What the app is asked to decide about the local data before syncing resumes; nil
        /// when nothing waits (``PersistentCloudContainer/decide(_:zoneID:)``).
        public var localDataDecision: LocalDataDecision? = nil
        /// The shares that ended while this device held unsent changes of them, each waiting for
        /// the app (``LocalDataDecision/Reason/shareEnded``): answer each with
        /// ``PersistentCloudContainer/decide(_:zoneID:)``. The rest syncs meanwhile.
        public var endedShares: [LocalDataDecision] = []

        /// Whether this device has nothing left to upload (it says nothing about the server having
        /// newer changes: ``PersistentCloudContainer/waitUntilSynced(timeout:)`` checks both).
        public var hasNothingToUpload: Bool { pendingUploads == 0 }
    }
}
