/// The record types and field types the server knows for a container and environment (ext).
///
/// `POST /schema/modify` takes `{"recordTypes": [...]}` and answers with the whole schema and its
/// version; `GET /schema` answers the same.
public struct CloudSchema: Hashable, Sendable, Codable {
    public struct RecordType: Hashable, Sendable, Codable {
        public var name: String
        public var fields: [Field]
        /// (ext) Sets of field names whose values together are unique within a zone: a save that
        /// would give a second live record of the zone the same values fails with
        /// ``ServerErrorCode/uniqueFieldError``. A record missing a field of a set, or holding
        /// null there, is not constrained by that set. Nil (absent on the wire) when the type has none
        /// (<doc:WireProtocol> §3, "Uniqueness constraints").
        ///
        /// ```swift
        /// CloudSchema.RecordType(name: "List", fields: [.init(name: "title", type: .string)], uniquenessConstraints: [["title"]])
        /// ```
        public var uniquenessConstraints: [[String]]?

        public init(name: String, fields: [Field], uniquenessConstraints: [[String]]? = nil) {
            self.name = name
            self.fields = fields
            self.uniquenessConstraints = uniquenessConstraints
        }

        public func field(named name: String) -> Field? { fields.first { $0.name == name } }

        /// This type's uniqueness constraints that `other` (the same type elsewhere, nil when it
        /// has none) lacks; a constraint is a set of fields, whatever their order.
        public func uniquenessConstraints(missingFrom other: RecordType?) -> [[String]] {
            let theirs = Set((other?.uniquenessConstraints ?? []).map(Set.init))
            return (uniquenessConstraints ?? []).filter { !theirs.contains(Set($0)) }
        }
    }

    public struct Field: Hashable, Sendable, Codable {
        public var name: String
        public var type: FieldType
        public var queryable: Bool?

        public init(name: String, type: FieldType, queryable: Bool? = nil) {
            self.name = name
            self.type = type
            self.queryable = queryable
        }
    }

    public var recordTypes: [RecordType]
    /// Increases on every change; absent in requests.
    public var version: Int?

    public init(recordTypes: [RecordType], version: Int? = nil) {
        self.recordTypes = recordTypes
        self.version = version
    }

    public func recordType(named name: String) -> RecordType? { recordTypes.first { $0.name == name } }
}

/// `GET /public/users/caller`: who the request's credentials belong to.
public struct CallerResponse: Hashable, Sendable, Codable {
    public struct User: Hashable, Sendable, Codable {
        public var userRecordName: String
        public init(userRecordName: String) { self.userRecordName = userRecordName }
    }

    public var userRecordName: String
    public var users: [User]

    public init(userRecordName: String) {
        self.userRecordName = userRecordName
        self.users = [User(userRecordName: userRecordName)]
    }
}
