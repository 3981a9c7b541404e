import CloudStoreWire
import Foundation

/// Where the server keeps zones, records, change sequences and schemas.
///
/// The contract is semantic, so that every rule of the protocol (tag checks, batches, tokens,
/// result shapes) lives once, above it, and both backends (SQLite and PostgreSQL) only read and
/// write rows. The guarantees each implementation gives:
///
/// - Every method that writes runs in one transaction: a crash leaves all of it or none.
/// - Writes to one partition are serialized, and sequences are assigned inside that serialization,
///   so a change becomes visible only after every change with a lower sequence: a reader holding a
///   token never misses a change committed later with a lower sequence.
/// - Reads that return a page and the sequence it ends at (``zoneChanges(in:after:limit:recordTypes:purgingTombstonesBefore:)``,
///   ``databaseChanges(in:after:limit:)``) read one consistent snapshot.
/// - The default zone always exists; before its first write it reads as ``StoredZone/pristineDefaultZone()``.
/// - Identifiers from requests reach SQL only as bound parameters.
///
/// The web console's reads are those of ``ConsoleStorage``, assets those of ``AssetStorage``, and
/// subscriptions those of ``SubscriptionStorage``, which every backend implements too.
protocol ServerStorage: ConsoleStorage, AssetStorage, SubscriptionStorage {
    /// Creates what is missing (files, tables) or upgrades it. Runs before the server accepts
    /// requests; on storage another instance is serving, it must not get in that instance's way
    /// (PostgreSQL: ``PostgresLayout``).
    func prepare() async throws

    /// A random secret of 32 bytes by name, made and kept the first time it is asked for, so that
    /// every instance on the same storage answers the same bytes (what signs asset download URLs,
    /// ``AssetDownloadURLs``); nil only from storage that plays a release before secrets (tests).
    func secret(_ name: String, container: String) async throws -> [UInt8]?

    /// Throws when the storage cannot be reached now (the data directory is gone or not writable,
    /// PostgreSQL does not answer): what `GET /readyz` reports.
    func checkReachable() async throws

    /// The read replicas and their state, for `GET /readyz` (PostgreSQL with `--postgres-replica`);
    /// none for SQLite.
    var replicaStatuses: [ReplicaStatus] { get }

    /// Runs the storage's background work until the task is cancelled or the server shuts down:
    /// for PostgreSQL, the connection pool and the listener (or poller) that hears other servers'
    /// commits and publishes their partitions to `changes`.
    func run(changes: ChangeBroker) async throws

    /// Live zones of a partition, the default zone first (pristine when never written).
    func zones(in partition: DatabasePartition) async throws -> [StoredZone]

    /// Live zones by name (the default zone always); a missing or deleted zone is absent.
    func zones(named names: [String], in partition: DatabasePartition) async throws -> [String: StoredZone]

    /// Creates and deletes zones, in order, in one transaction. Creating a live zone changes
    /// nothing; deleting removes its records and leaves a deleted zone row, and stops the zone's
    /// share (``ShareRules/stopped(_:)``), raising the shared database of every user who had
    /// access. Answers each zone's state after its operation, or nil when a deleted zone did not
    /// exist, and the users whose shared database changed.
    func modifyZones(_ changes: [ZoneChange], in partition: DatabasePartition) async throws -> ZonesModification

    /// Reads the rows a plan needs under the partition's write lock, lets `decide` plan the writes,
    /// and applies them with consecutive sequences, all in one transaction: every backend runs
    /// ``RecordWriteScript``, which holds the order of the reads and writes and what each write
    /// means in rows, and answers its reads and applies its row operations in its own SQL. Answers nil (without
    /// calling `decide`) when the zone does not exist, else the decision and the rows as written, in
    /// order. `decide` is pure: a backend may call it again when a concurrent schema change made
    /// its snapshot stale. When it throws ``RecordSnapshot/MissingUniqueKeys``, the backend reads
    /// the holders of those keys (and their rows) into the snapshot and calls it again; any other
    /// error it throws rolls everything back and is rethrown as is.
    ///
    /// Each write with ``RecordWrite/uniqueKeys`` replaces its record's rows of unique keys
    /// (`cloudstore_record_key`, one per key: zone, key, the record's type and name); a deletion
    /// removes them, as deleting a zone removes its zone's.
    ///
    /// The snapshot holds the zone's share (WireProtocol.md §6); when the plan writes anything,
    /// its ``RecordWritePlan/share`` is stored and each user of ``RecordWritePlan/sharedDatabases``
    /// gets the next sequence of their shared database, which becomes the zone's position there,
    /// in the same transaction (after the owner's partition, in order of user: writers of
    /// different zones never wait on each other in a cycle).
    func modifyRecords<Decision: Sendable>(
        in zone: ZoneAddress, loading request: RecordSnapshotRequest,
        decide: @Sendable (RecordSnapshot) throws -> (RecordWritePlan, Decision)
    ) async throws -> (Decision, [StoredRecord])?

    /// Live records by name; nil when the zone does not exist.
    func records(named names: [String], in zone: ZoneAddress) async throws -> [String: StoredRecord]?

    /// Every live record of a type; nil when the zone does not exist.
    func records(ofType recordType: String, in zone: ZoneAddress) async throws -> [StoredRecord]?

    /// Purges tombstones deleted before the horizon (raising the zone's `purgedThrough`), then reads
    /// up to `limit + 1` rows with a sequence above `seq` whose type is in `recordTypes` (all when
    /// nil). Nil when the zone does not exist.
    func zoneChanges(
        in zone: ZoneAddress, after seq: Int64, limit: Int, recordTypes: [String]?, purgingTombstonesBefore: Date
    ) async throws -> ZoneChangesPage?

    /// Up to `limit + 1` zones whose database sequence is above `dbSeq`. For a shared database,
    /// the zones of the shares its user accepted (with their ``StoredZone/owner``) or lost access
    /// to (deleted), by the position each last took in it.
    func databaseChanges(in partition: DatabasePartition, after dbSeq: Int64, limit: Int) async throws
        -> DatabaseChangesPage

    // MARK: Sharing (WireProtocol.md §6)

    /// The share of a zone of a private database, with every participant row; nil when the zone
    /// is not shared (never, or its share stopped).
    func share(in zone: ZoneAddress) async throws -> StoredShare?

    /// The zone of the share with this short GUID in a container and environment; nil when no
    /// live share has it.
    func sharedZone(shortGUID: String, container: String, environment: CloudEnvironment) async throws -> ZoneAddress?

    /// A user's row in the share of a zone of a private database; nil when they never took part.
    func participant(_ user: String, in zone: ZoneAddress) async throws -> StoredParticipant?

    /// The zones of a user's shared database (`partition`): the live zones whose share they
    /// accepted, by owner and zone name.
    func sharedZones(in partition: DatabasePartition) async throws -> [SharedZone]

    /// The container's schema in an environment; version 0 and no record types when never set.
    func schema(container: String, environment: CloudEnvironment) async throws -> CloudSchema

    /// Replaces the schema with what `change` answers for the current one (nil: keep it), with a
    /// version one higher, atomically. Answers the schema stored afterwards and the decision.
    ///
    /// For each record type whose uniqueness constraints change
    /// (``UniqueKey/typesWithChangedConstraints(from:to:)``), the same transaction rebuilds the
    /// type's unique keys in every zone of the container and environment from its live records
    /// (``UniqueKeyRebuild``), and concurrent record writes of those zones see either the old
    /// schema and keys or the new ones: when two records of a zone hold one key, the rebuild's
    /// error is thrown and nothing is stored.
    func updateSchema<Decision: Sendable>(
        container: String, environment: CloudEnvironment,
        _ change: @Sendable (CloudSchema) throws -> (CloudSchema?, Decision)
    ) async throws -> (CloudSchema, Decision)
}

/// What zones/modify did: each zone's state after its operation (nil when a deleted zone did not
/// exist), and the users whose shared database changed because a shared zone was deleted.
struct ZonesModification: Sendable {
    var zones: [StoredZone?]
    var sharedDatabases: Set<String> = []
}

/// Thrown inside a backend when an optimistic check failed and the transaction must run again.
struct StorageRetry: Error {}

extension CloudSchema {
    /// The schema before anything was declared.
    static let empty = CloudSchema(recordTypes: [], version: 0)
}
