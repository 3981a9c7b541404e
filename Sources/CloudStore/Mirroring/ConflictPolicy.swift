import Foundation

/// How a field that both this device and another changed since they last agreed is resolved.
///
/// Fields only one side changed never conflict: the change is kept. Only fields both sides changed
/// to different values follow the policy, and every value that loses is written to the conflict log
/// (``PersistentCloudContainer/conflicts(after:limit:)``), so nothing is silently gone.
///
/// ```swift
/// let options = PersistentCloudContainer.Options(conflictPolicy: .lastWriterWins)
/// ```
public enum ConflictPolicy: Sendable {
    /// The server's value wins (the default, as in the WWDC23 CKSyncEngine talk's test).
    case serverWins
    /// This device's value wins and is uploaded again.
    case localWins
    /// The value written last wins, comparing this device's edit time with the server record's
    /// modification time.
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
    public enum Resolution: Sendable, Equatable {
        /// Keep this device's value (it is uploaded).
        case local
        /// Take the server's value.
        case server
        /// Use another value, such as a merge of both (it is uploaded); both sides' values are logged.
        case value(AttributeValue)
    }

    public var entityName: String
    public var objectID: UUID
    public var property: String
    /// The value both sides last agreed on, if known.
    public var ancestorValue: AttributeValue?
    public var localValue: AttributeValue
    public var serverValue: AttributeValue
    /// When this device changed the field.
    public var localModified: Date?
    /// When the server record was last modified.
    public var serverModified: Date?
}

/// A value that lost a conflict, kept in the conflict log.
public struct ConflictRecord: Hashable, Sendable, Codable {
    /// Which side's value lost.
    public enum Side: String, Hashable, Sendable, Codable {
        case local, server
    }

    /// The log's sequence number (0 until stored).
    public var sequence: Int64
    public var date: Date
    public var entityName: String
    public var objectID: UUID
    /// The attribute or relationship; `*` when a whole object lost (an edit against a delete).
    public var property: String
    public var losingSide: Side
    public var losingValue: AttributeValue
    public var winningValue: AttributeValue
    /// The policy that decided: `serverWins`, `localWins`, `lastWriterWins`, `custom`.
    public var policy: String

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
