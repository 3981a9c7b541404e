import Foundation

extension PersistentStore {
    /// How a store opens its file and commits.
    ///
    /// ```swift
    /// var configuration = PersistentStore.Configuration()
    /// configuration.synchronous = .normal   // faster commits, may lose the last ones on power loss
    /// let store = try PersistentStore(url: url, schema: schema, configuration: configuration)
    /// ```
    public struct Configuration: Sendable {
        /// SQLite's `synchronous` setting for the WAL file.
        public enum Synchronous: String, Sendable {
            /// Each commit is on disk before the write returns: an acknowledged save survives a
            /// power loss. Costs one fsync per commit (about 200 commits/s on a virtual disk).
            case full = "FULL"
            /// Commits are written but synced only at checkpoints: never corrupts the file, but
            /// the last commits before a power loss (not a crash of the app) can be lost.
            case normal = "NORMAL"
        }

        /// Default `.full`: a save the app acknowledged to its user is durable. Batch your
        /// writes (one unit of work per import batch) rather than lowering this.
        public var synchronous: Synchronous = .full
        /// Whether writes record persistent history (default true). Mirroring and observation
        /// read history: turn it off only for stores that are neither mirrored nor observed.
        public var recordsHistory = true
        /// How long a write waits for another process's write to finish before failing with
        /// SQLite's busy error.
        public var busyTimeout: Duration = .seconds(10)
        /// How many connections read at the same time.
        public var maximumReaderCount = 4
        /// How much of the store file, in bytes, the connection that writes keeps in memory
        /// (SQLite's page cache, `PRAGMA cache_size`); default 8 MiB. Readers keep SQLite's
        /// default (2 MB each).
        ///
        /// Mirroring imports and uploads in write transactions that touch pages all over the
        /// store's indexes (object ids are random): with 2 MB, a sync of 100,000 records read them
        /// back from the file again and again (8% more CPU per record, measured). Lower it for a
        /// store that must stay small in memory; raise it for stores of millions of objects.
        public var writerCacheSize = 8 << 20
        /// How often observation checks the file for transactions committed by other processes
        /// (commits of this store instance wake observers at once).
        public var observationPollInterval: Duration = .milliseconds(50)
        /// The clock history timestamps come from.
        public var now: @Sendable () -> Date = { Date() }

        /// The defaults: durable commits, history recorded, 4 readers, a 10-second busy timeout.
        public init() {}
    }
}
