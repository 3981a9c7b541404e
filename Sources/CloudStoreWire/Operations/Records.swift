/// `POST /{db}/records/modify`.
///
/// ```json
/// {"zoneID": {"zoneName": "Notes"}, "atomic": true,
///  "operations": [{"operationType": "create", "record": {"recordType": "Note", "recordName": "N-1", "fields": {...}}}]}
/// ```
public struct RecordsModifyRequest: Hashable, Sendable, Codable {
    public enum OperationType: String, Hashable, Sendable, Codable, CaseIterable {
        /// Fails with `EXISTS` if the name exists.
        case create
        /// Changes only the fields sent; needs the change tag.
        case update
        /// Changes only the fields sent, without a tag check; creates the record if missing.
        case forceUpdate
        /// Fields not sent become null; needs the change tag.
        case replace
        /// Fields not sent become null, without a tag check; creates the record if missing.
        case forceReplace
        /// Needs the change tag.
        case delete
        /// Deletes without a tag check.
        case forceDelete

        /// Whether the operation checks the record's change tag.
        public var checksChangeTag: Bool { self == .update || self == .replace || self == .delete }
        public var isDelete: Bool { self == .delete || self == .forceDelete }
    }

    public struct Operation: Hashable, Sendable, Codable {
        public var operationType: OperationType
        public var record: Record
        public var desiredKeys: [String]?

        public init(_ operationType: OperationType, _ record: Record, desiredKeys: [String]? = nil) {
            self.operationType = operationType
            self.record = record
            self.desiredKeys = desiredKeys
        }
    }

    public var zoneID: ZoneID?
    /// Default true: all-or-nothing.
    public var atomic: Bool?
    public var operations: [Operation]
    public var desiredKeys: [String]?
    public var numbersAsStrings: Bool?
    /// **(ext)** The zone's sync token the client holds (from `changes/zone` or a previous
    /// `records/modify`); nil when it holds none. When nothing but this request changed the zone
    /// since that token (with none: the zone was never written), the
    /// answer's ``RecordsResponse/syncToken`` is the zone's token after this request: the client
    /// already knows everything up to it and need not fetch its own writes back.
    public var syncToken: String?

    public init(
        zoneID: ZoneID? = nil, atomic: Bool? = nil, operations: [Operation], desiredKeys: [String]? = nil,
        numbersAsStrings: Bool? = nil, syncToken: String? = nil
    ) {
        self.zoneID = zoneID
        self.atomic = atomic
        self.operations = operations
        self.desiredKeys = desiredKeys
        self.numbersAsStrings = numbersAsStrings
        self.syncToken = syncToken
    }
}

/// The response of `records/modify` and `records/lookup`: one result per operation, in order.
public struct RecordsResponse: Hashable, Sendable, Codable {
    public var records: [RecordResult]
    /// **(ext)** Only in a `records/modify` answer, and only when nothing but this request changed
    /// the zone after the request's ``RecordsModifyRequest/syncToken`` (without one: the zone was
    /// never written):
    /// the zone's token after this request's writes, which the records of this answer bring the
    /// client up to. Absent otherwise (real CloudKit never sends it); the client then fetches.
    public var syncToken: String?

    public init(records: [RecordResult], syncToken: String? = nil) {
        self.records = records
        self.syncToken = syncToken
    }
}

/// `POST /{db}/records/lookup`.
public struct RecordsLookupRequest: Hashable, Sendable, Codable {
    public struct Item: Hashable, Sendable, Codable {
        public var recordName: String
        public var desiredKeys: [String]?
        public init(recordName: String, desiredKeys: [String]? = nil) {
            self.recordName = recordName
            self.desiredKeys = desiredKeys
        }
    }

    public var zoneID: ZoneID?
    public var records: [Item]
    public var desiredKeys: [String]?
    public var numbersAsStrings: Bool?

    public init(zoneID: ZoneID? = nil, recordNames: [String], desiredKeys: [String]? = nil) {
        self.zoneID = zoneID
        self.records = recordNames.map { Item(recordName: $0) }
        self.desiredKeys = desiredKeys
    }
}

/// `POST /{db}/records/query`. Not a sync mechanism: use the changes endpoints to sync.
public struct RecordsQueryRequest: Hashable, Sendable, Codable {
    public struct Query: Hashable, Sendable, Codable {
        public var recordType: String
        public var filterBy: [Filter]?
        public var sortBy: [Sort]?

        public init(recordType: String, filterBy: [Filter]? = nil, sortBy: [Sort]? = nil) {
            self.recordType = recordType
            self.filterBy = filterBy
            self.sortBy = sortBy
        }
    }

    public struct Filter: Hashable, Sendable, Codable {
        public enum Comparator: String, Hashable, Sendable, Codable, CaseIterable {
            case equals = "EQUALS"
            case notEquals = "NOT_EQUALS"
            case lessThan = "LESS_THAN"
            case lessThanOrEquals = "LESS_THAN_OR_EQUALS"
            case greaterThan = "GREATER_THAN"
            case greaterThanOrEquals = "GREATER_THAN_OR_EQUALS"
            case `in` = "IN"
            case notIn = "NOT_IN"
            case beginsWith = "BEGINS_WITH"
            case notBeginsWith = "NOT_BEGINS_WITH"
            case listContains = "LIST_CONTAINS"
        }

        public var comparator: Comparator
        public var fieldName: String?
        /// `recordName`, `createdTimestamp`, `modifiedTimestamp`, … instead of a field.
        public var systemFieldName: String?
        public var fieldValue: FieldValue

        public init(_ fieldName: String, _ comparator: Comparator, _ fieldValue: FieldValue) {
            self.fieldName = fieldName
            self.comparator = comparator
            self.fieldValue = fieldValue
        }

        public init(systemFieldName: String, _ comparator: Comparator, _ fieldValue: FieldValue) {
            self.systemFieldName = systemFieldName
            self.comparator = comparator
            self.fieldValue = fieldValue
        }
    }

    public struct Sort: Hashable, Sendable, Codable {
        public var fieldName: String?
        public var systemFieldName: String?
        public var ascending: Bool?

        public init(fieldName: String, ascending: Bool = true) {
            self.fieldName = fieldName
            self.ascending = ascending
        }

        public init(systemFieldName: String, ascending: Bool = true) {
            self.systemFieldName = systemFieldName
            self.ascending = ascending
        }
    }

    public var zoneID: ZoneID?
    public var query: Query
    public var resultsLimit: Int?
    public var continuationMarker: String?
    public var desiredKeys: [String]?
    public var numbersAsStrings: Bool?

    public init(
        zoneID: ZoneID? = nil, query: Query, resultsLimit: Int? = nil, continuationMarker: String? = nil,
        desiredKeys: [String]? = nil
    ) {
        self.zoneID = zoneID
        self.query = query
        self.resultsLimit = resultsLimit
        self.continuationMarker = continuationMarker
        self.desiredKeys = desiredKeys
    }
}

public struct RecordsQueryResponse: Hashable, Sendable, Codable {
    public var records: [RecordResult]
    /// Present when more results follow: pass it back to continue.
    public var continuationMarker: String?

    public init(records: [RecordResult], continuationMarker: String? = nil) {
        self.records = records
        self.continuationMarker = continuationMarker
    }
}
