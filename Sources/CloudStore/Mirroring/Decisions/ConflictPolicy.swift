import Foundation

/// How a field that both this device and another changed since they last agreed is resolved.
///
/// Fields only one side changed never conflict: the change is kept. Only fields both sides changed
/// to different values follow the policy, and every value that loses is written to the conflict log
/// (``PersistentCloudContainer/conflicts(after:limit:)``), so nothing is silently gone.
///
/// ```swift
/// let options = PersistentCloudContainer.Options(conflictPolicy: .lastWriterWins)
///
/// // Or decide per field: keep the longer body, let the server win everything else.
/// let merging = PersistentCloudContainer.Options(conflictPolicy: .custom { conflict in
///     guard conflict.property == "body", case .string(let local) = conflict.localValue,
///           case .string(let server) = conflict.serverValue else { return .server }
///     return local.count > server.count ? .local : .server
/// })
/// ```
public enum ConflictPolicy: Sendable {
    /// The server's value wins (the default, as in the WWDC23 CKSyncEngine talk's test).
    case serverWins
    /// This device's value wins and is uploaded again.
    case localWins
    /// The value written last wins, comparing this device's edit time with the server's (the
    /// field's edit time when the record carries one, else the record's modification time). A
    /// side without a time loses; a tie goes to the server.
    case lastWriterWins
    /// Your function decides each field.
    case custom(@Sendable (FieldConflict) -> FieldConflict.Resolution)

    var name: String {
        switch self {
        case .serverWins: "serverWins"
        case .localWins: "localWins"
        case .lastWriterWins: "lastWriterWins"
        case .custom: "custom"
        }
    }
}

/// One field both sides changed to different values.
public struct FieldConflict: Sendable {
    /// Which value the field keeps.
    public enum Resolution: Sendable, Equatable {
        /// Keep this device's value (it is uploaded).
        case local
        /// Take the server's value.
        case server
        /// Use another value, such as a merge of both (it is uploaded); both sides' values are logged.
        case value(AttributeValue)
    }

    /// The entity of the object in conflict.
    public var entityName: String
    /// The id of the object in conflict.
    public var objectID: UUID
    /// The attribute or to-one relationship both sides changed.
    public var property: String
    /// The value both sides last agreed on, if known.
    public var ancestorValue: AttributeValue?
    /// This device's value.
    public var localValue: AttributeValue
    /// The server's value.
    public var serverValue: AttributeValue
    /// When this device changed the field.
    public var localModified: Date?
    /// When the server's value was written: the field's edit time when the record carries one,
    /// else the record's modification time.
    public var serverModified: Date?
}

/// A value that lost a conflict, kept in the conflict log.
public struct ConflictRecord: Hashable, Sendable, Codable {
    /// Which side's value lost.
    public enum Side: String, Hashable, Sendable, Codable {
        /// This device's value lost.
        case local
        /// The server's value lost (this device's value, or a merge, was uploaded over it).
        case server
    }

    /// The log's sequence number (0 until stored).
    public var sequence: Int64
    /// When the conflict was resolved.
    public var date: Date
    /// The entity of the object in conflict.
    public var entityName: String
    /// The id of the object in conflict.
    public var objectID: UUID
    /// The attribute or relationship; `*` when a whole object lost (an edit against a delete).
    public var property: String
    /// Whose value lost.
    public var losingSide: Side
    /// The value that lost; `.null` when the losing side had deleted the object or link.
    public var losingValue: AttributeValue
    /// The value kept; `.null` when the winning side deleted the object or link.
    public var winningValue: AttributeValue
    /// The policy that decided: `serverWins`, `localWins`, `lastWriterWins`, `custom`,
    /// `accessEnded` for a change lost because access to a shared zone ended, or
    /// `waitingReference` for a fetched reference whose target had not arrived yet, replaced by
    /// a local edit before it did.
    public var policy: String

    /// A log entry with these values, for tests and tools; mirroring writes the real ones.
    public init(
        sequence: Int64 = 0, date: Date, entityName: String, objectID: UUID, property: String, losingSide: Side,
        losingValue: AttributeValue, winningValue: AttributeValue, policy: String
    ) {
        self.sequence = sequence
        self.date = date
        self.entityName = entityName
        self.objectID = objectID
        self.property = property
        self.losingSide = losingSide
        self.losingValue = losingValue
        self.winningValue = winningValue
        self.policy = policy
    }
}
