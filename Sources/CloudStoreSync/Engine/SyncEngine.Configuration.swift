import CloudStoreWire
import Foundation
import Logging

extension SyncEngine {
    /// How to build a ``SyncEngine``: the database, the saved state, the delegate, and how it
    /// schedules work. As CKSyncEngine's `Configuration`, plus the knobs a server over HTTP needs.
    ///
    /// ```swift
    /// var configuration = SyncEngine.Configuration(
    ///     database: HTTPCloudDatabase(baseURL: serverURL, container: "iCloud.com.example.notes",
    ///                                 token: token, deviceID: deviceID),
    ///     stateSerialization: store.savedSyncState(),
    ///     delegate: self)
    /// configuration.logger = logger
    /// let engine = SyncEngine(configuration)
    /// ```
    public struct Configuration: Sendable {
        /// 200 operations: the most one `records/modify` request may carry, and the default and
        /// upper bound of ``maxBatchCount``.
        public static let defaultMaxBatchCount = 200
        /// 1.5 MiB: well under the server's 4 MiB request limit; the default of ``maxBatchBytes``.
        public static let defaultMaxBatchBytes = 1_572_864

        /// The database to sync with, usually an ``HTTPCloudDatabase`` for the user's private
        /// database.
        public var database: any CloudDatabase
        /// The last state the app saved, or nil on first launch.
        public var stateSerialization: State.Serialization?
        /// Held weakly by the engine: keep it alive.
        public weak var delegate: (any SyncEngineDelegate)?
        /// When true (the default) the engine sends and fetches by itself: after changes are added,
        /// when the server pushes, on a timer when push is unavailable, and again after failures.
        /// Turn it off in tests that need a fixed order of events, and call
        /// ``SyncEngine/sendChanges(_:)`` and ``SyncEngine/fetchChanges(_:)`` yourself.
        public var automaticallySync: Bool
        /// Whether the engine long-polls the server for changes when syncing automatically.
        public var listensForPush: Bool = true
        /// The clock the scheduler waits with. Tests inject a manual clock.
        public var clock: any Clock<Duration> = ContinuousClock()
        /// A source of random numbers in 0..<1 for back-off jitter. Tests inject a fixed one.
        public var jitter: @Sendable () -> Double = { Double.random(in: 0..<1) }
        /// Where the engine logs; by default warnings and errors only (CloudStore debug level 0).
        public var logger = Logger.quiet(label: "cloudstore.sync")
        /// Quiet time after the last added change before an automatic send.
        public var sendDebounce: Duration = .seconds(1)
        /// Longest an added change waits for an automatic send while changes keep coming.
        public var maxSendDelay: Duration = .seconds(5)
        /// Whether a change added while no send is in flight or waiting goes at once, the leading
        /// edge, instead of after ``sendDebounce``. An app that saves now and then gets each
        /// change to other devices as soon as it can go; changes that follow while a send is in
        /// flight (or waiting) are still gathered by the debounce, so a burst costs one send after
        /// the first. Off by default (CKSyncEngine waits); `PersistentCloudContainer` turns it on.
        public var sendsAtLeadingEdge = false
        /// How often to fetch when push is unavailable; nil never polls.
        public var pollInterval: Duration? = .seconds(60)
        /// How long each long poll waits on the server (the protocol allows up to 60 seconds).
        public var longPollTimeout: Duration = .seconds(50)
        /// The first back-off delay after a failure; it doubles with each further failure.
        public var backoffBase: Duration = .seconds(1)
        /// The longest back-off delay, however many failures came before (5 minutes by default); a
        /// server's `retryAfter` is waited for as it is.
        public var backoffMax: Duration = .seconds(300)
        /// At most this many operations per `records/modify` request (at most 200).
        public var maxBatchCount: Int = Configuration.defaultMaxBatchCount {
            didSet { maxBatchCount = min(max(maxBatchCount, 1), Configuration.defaultMaxBatchCount) }
        }
        /// About this many bytes of operations per `records/modify` request.
        public var maxBatchBytes: Int = Configuration.defaultMaxBatchBytes
        /// Records per `changes/zone` page to ask for; nil lets the server choose (200).
        public var fetchResultsLimit: Int?
        /// The record types the engine fetches; nil (the default) fetches every type.
        ///
        /// On the **public database**, which holds everyone's records, the engine also keeps a
        /// query subscription for each type (`cloudstore.<type>`, saved once per user and listed
        /// in the state), and its long poll wakes it only when one of them fired: a record of
        /// these types was created, changed or deleted. Writes of other types, however many, cost
        /// it nothing. A public database engine thus syncs by push, with no polling interval:
        ///
        /// ```swift
        /// var configuration = SyncEngine.Configuration(
        ///     database: HTTPCloudDatabase(baseURL: server, container: container, environment: .production,
        ///                                 scope: .public, token: userToken, deviceID: deviceID),
        ///     stateSerialization: savedPublicState, delegate: self)
        /// configuration.recordTypes = ["Announcement"]
        /// configuration.pollInterval = nil
        /// ```
        public var recordTypes: Set<String>?
        /// Where the engine downloads the assets of fetched records; nil (the default) downloads
        /// nothing: fetched assets then carry their `downloadURL` and no `fileURL`.
        ///
        /// When set, each ``SyncEngine/Event/fetchedRecordZoneChanges(_:)`` page arrives with every
        /// asset's `fileURL` set: a file the delegate already had
        /// (``SyncEngineDelegate/existingFile(for:syncEngine:)``) or one the engine downloaded and
        /// verified, named `<hex of the checksum>.asset`. Move (rename) the downloaded files you
        /// keep while handling the event: the engine deletes its own files once the event is handled,
        /// and when it starts. Interrupted downloads resume from their `.partial` files. Use a
        /// directory of its own, on the same volume as where the app keeps its files.
        ///
        /// ```swift
        /// configuration.assetDirectory = applicationSupport.appendingPathComponent("SyncAssets")
        /// ```
        public var assetDirectory: URL?

        /// A configuration with the defaults above: pass the state saved last time (nil on first
        /// launch) and the delegate, which the engine holds weakly.
        public init(
            database: any CloudDatabase, stateSerialization: State.Serialization?,
            delegate: any SyncEngineDelegate, automaticallySync: Bool = true
        ) {
            self.database = database
            self.stateSerialization = stateSerialization
            self.delegate = delegate
            self.automaticallySync = automaticallySync
        }

        var schedulerConfiguration: SyncScheduler.Configuration {
            SyncScheduler.Configuration(
                sendDebounce: sendDebounce, maxSendDelay: max(maxSendDelay, sendDebounce), pollInterval: pollInterval,
                backoffBase: backoffBase, backoffMax: max(backoffMax, backoffBase), sendsAtLeadingEdge: sendsAtLeadingEdge)
        }
    }
}

extension Logger {
    /// A logger that lets only warnings and errors through, the default when the app passes none.
    @usableFromInline static func quiet(label: String) -> Logger {
        var logger = Logger(label: label)
        logger.logLevel = .warning
        return logger
    }
}
