import CloudStoreWire
import Foundation

/// What a ``RecordWriteScript`` asks a backend to read and write, and what the backend answers.
/// Identifiers in them reach SQL only as bound parameters.
extension RecordWriteScript {
    /// A read, in the zone of the script, answered with the ``Answer`` each case names.
    enum Read: Hashable, Sendable {
        /// The zone's row (``StoredZone/live(_:name:)``), the rows of `names` (live and
        /// tombstones), the container's schema in the environment, the receipts of `receipts` the
        /// storage knows (in any zone), and the zone's share with every participant row (nil
        /// unless the zone is a private database's and shared): ``Answer/snapshot(_:)``, nil when
        /// the zone does not exist.
        case snapshot(names: [String], receipts: [String])
        /// The live records that refer to any of `targets` with `DELETE_SELF`: ``Answer/referrers(_:)``.
        case deleteSelfReferrers(of: [String])
        /// Rows by name, live and tombstones: ``Answer/rows(_:)``.
        case rows(named: [String])
        /// The records holding these unique keys (`cloudstore_record_key`): ``Answer/uniqueKeyHolders(_:)``.
        case uniqueKeyHolders([String])
        /// Every user's query subscriptions to these record types in the public database of the
        /// zone's container and environment: ``Answer/subscriptions(_:)``.
        case publicSubscriptions(recordTypes: [String])
        /// Every subscription of each subscriber: ``Answer/subscriptions(_:)``.
        case subscriptions(of: [Subscriber])
    }

    /// A row operation, in the zone of the script, answered with ``Answer/applied`` unless its
    /// case names another answer. Each applies to the rows as the operations before it left them.
    enum Operation: Hashable, Sendable {
        /// Deletes the references whose source is one of these records (`cloudstore_reference`).
        case removeReferences(sources: [String])
        /// Deletes the unique keys these records hold (`cloudstore_record_key`).
        case removeUniqueKeys(sources: [String])
        /// Inserts unique keys.
        case insertUniqueKeys([UniqueKeyRow])
        /// Raises the partition's database sequence, then writes the rows at it: answers
        /// ``Answer/databaseSeq(_:)``, the new sequence.
        case writeRecords(RecordRows)
        /// Stores the schema (with its version) if the stored version is still `replacing`
        /// (0: none is stored): answers ``Answer/schemaStored(_:)``.
        case storeSchema(CloudSchema, replacing: Int)
        /// Stores the zone's share row (removes it for ``ShareChange/stop(_:)``) and every
        /// participant row, each with the participant's shared partition (created when missing).
        case applyShare(ShareChange)
        /// Raises the database sequence of each user's shared database, locking them in order of
        /// user, and stores it as the zone's position there (its participant row):
        /// answers ``Answer/sharedDatabaseSeqs(_:)``.
        case advanceSharedDatabases(Set<String>)
        /// Inserts notifications created at `createdAt`, in order (their IDs tell the order they
        /// are delivered in), each payload as its JSON (``NotificationPlan/encoded(_:)``).
        case insertNotifications([PlannedNotification], createdAt: Date)
        /// Deletes subscriptions (`firesOnce` subscriptions that fired).
        case deleteSubscriptions([SubscriptionKey])
        /// Deletes the notifications created before the date (of every user: what
        /// ``NotificationPlan/retention`` no longer keeps).
        case removeNotifications(createdBefore: Date)
    }

    /// What a backend answers to a ``Read`` or an ``Operation``.
    enum Answer: Sendable {
        /// A snapshot without referrers or unique keys (the script adds them); nil: no such zone.
        case snapshot(RecordSnapshot?)
        case referrers([(target: String, source: String)])
        case rows([String: StoredRecord])
        /// The holder of each key that has one, by key.
        case uniqueKeyHolders([String: String])
        case subscriptions([(subscriber: Subscriber, subscription: Subscription)])
        case databaseSeq(Int64)
        case schemaStored(Bool)
        /// Each user's new shared-database sequence, by user.
        case sharedDatabaseSeqs([String: Int64])
        case applied
    }

    /// The rows of a batch of writes, written at the partition's new database sequence
    /// (``Operation/writeRecords(_:)``).
    struct RecordRows: Hashable, Sendable {
        /// Each inserted, or replacing the row of its name.
        var records: [StoredRecord] = []
        /// References to insert (the records' old ones are removed first when they had any).
        var references: [ReferenceRow] = []
        /// The zone's sequence after the batch: its row's `seq`, its `db_seq` the partition's new one.
        var zoneSeq: Int64
        /// Records whose earlier version's saved assets are released.
        var releasedAssets: [AssetRelease] = []
        /// Assets the records' new versions reference, marked saved.
        var savedAssets: [AssetSave] = []
    }

    struct ReferenceRow: Hashable, Sendable {
        var source: String
        var target: String
    }

    struct UniqueKeyRow: Hashable, Sendable {
        /// ``UniqueKey/text``.
        var key: String
        /// The record type of the source.
        var type: String
        var source: String
    }

    /// The saved assets of a record's earlier version that its new version does not reference
    /// (its ``AssetSave``), released: removable at `removableAt`, never when nil (``AssetLifetime``).
    struct AssetRelease: Hashable, Sendable {
        var record: String
        var removableAt: Date?
    }

    /// The assets of a record (their upload bound them to it) that its new version references:
    /// saved, never removable while it does.
    struct AssetSave: Hashable, Sendable {
        var record: String
        var assetIDs: Set<String>
    }

    struct SubscriptionKey: Hashable, Sendable {
        var subscriber: Subscriber
        var id: String
    }

    /// The breadth-first search for the records a deletion reaches through `DELETE_SELF` references:
    /// the script reads the referrers of each ``frontier`` and hands them to ``advance(with:)``.
    struct CascadeSearch: Sendable {
        /// Target → live records referring to it with `DELETE_SELF`, for every target searched.
        private(set) var referrers: [String: Set<String>] = [:]
        /// The records whose referrers are still to be read.
        private(set) var frontier: [String]
        private var visited: Set<String>

        init(roots: Set<String>) {
            frontier = Array(roots)
            visited = roots
        }

        /// Records the referrers of the frontier; the new frontier is the referrers not seen before.
        mutating func advance(with pairs: [(target: String, source: String)]) {
            frontier = []
            for (target, source) in pairs {
                referrers[target, default: []].insert(source)
                if visited.insert(source).inserted { frontier.append(source) }
            }
        }
    }
}
