import Foundation

/// One committed unit of work, as persistent history keeps it (like `NSPersistentHistoryTransaction`).
///
/// ```swift
/// for transaction in try store.history(after: lastToken, matching: .init(entities: ["Note"])) {
///     for change in transaction.changes where change.changeType == .update {
///         print(change.objectID, change.updatedProperties)
///     }
///     lastToken = transaction.token
/// }
/// ```
public struct HistoryTransaction: Hashable, Sendable, Identifiable {
    /// The position just after this transaction; pass it to resume after it.
    public var token: HistoryToken
    /// When the transaction committed, to the millisecond.
    public var timestamp: Date
    /// Who wrote it: the `author` of the write (`"cloudstore.import"` for imported changes).
    public var author: String?
    /// The `contextName` of the write.
    public var contextName: String?
    /// The changes, one per object, in the order the unit of work first touched each object.
    public var changes: [HistoryChange]

    /// The transaction's token, which identifies it.
    public var id: HistoryToken { token }

    /// A transaction with these values, for tests; the store makes the real ones.
    public init(token: HistoryToken, timestamp: Date, author: String?, contextName: String?, changes: [HistoryChange]) {
        self.token = token
        self.timestamp = timestamp
        self.author = author
        self.contextName = contextName
        self.changes = changes
    }

    /// The entities the transaction changed.
    public var entityNames: Set<String> { Set(changes.map(\.entityName)) }
}

/// What one transaction did to one object (like `NSPersistentHistoryChange`).
public struct HistoryChange: Hashable, Sendable {
    /// Whether the object was inserted, updated or deleted.
    public enum ChangeType: String, Hashable, Sendable, Codable {
        /// The object was created.
        case insert
        /// Some of the object's attributes or relationships changed (``HistoryChange/updatedProperties``).
        case update
        /// The object was deleted, by the write itself or by a cascade.
        case delete
    }

    /// The entity of the changed object.
    public var entityName: String
    /// The changed object's id.
    public var objectID: UUID
    /// What happened to the object.
    public var changeType: ChangeType
    /// For an update: the attributes and relationships whose value changed. A to-many relationship
    /// is listed when its membership changed (for many-to-many links, on both objects).
    public var updatedProperties: Set<String>
    /// For a delete: the values of the attributes marked `preserveAfterDeletion`, as they were.
    public var tombstone: [String: AttributeValue]

    /// A change with these values, for tests; the store makes the real ones.
    public init(
        entityName: String, objectID: UUID, changeType: ChangeType, updatedProperties: Set<String> = [],
        tombstone: [String: AttributeValue] = [:]
    ) {
        self.entityName = entityName
        self.objectID = objectID
        self.changeType = changeType
        self.updatedProperties = updatedProperties
        self.tombstone = tombstone
    }
}

/// Which transactions and changes a history fetch returns.
///
/// ```swift
/// // Changes to notes written by anyone but the importer.
/// let filter = HistoryFilter(excludingAuthors: ["cloudstore.import"], entities: ["Note"])
/// ```
public struct HistoryFilter: Hashable, Sendable {
    /// Only transactions by one of these authors (nil: any author).
    public var authors: Set<String>?
    /// No transactions by these authors.
    public var excludingAuthors: Set<String>
    /// Only changes to these entities, and only transactions that changed one (nil: all entities).
    public var entities: Set<String>?
    /// At most this many transactions.
    public var limit: Int?

    /// A filter of the given conditions; the defaults let everything through.
    public init(
        authors: Set<String>? = nil, excludingAuthors: Set<String> = [], entities: Set<String>? = nil, limit: Int? = nil
    ) {
        self.authors = authors
        self.excludingAuthors = excludingAuthors
        self.entities = entities
        self.limit = limit
    }

    /// Every transaction and change.
    public static let all = HistoryFilter()
}
