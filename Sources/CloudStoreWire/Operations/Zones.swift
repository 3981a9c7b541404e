/// A zone as the zone endpoints and `changes/database` report it.
///
/// `{"zoneID": {...}, "syncToken": "..."}` for a live zone, and
/// `{"zoneID": {...}, "deleted": true, "reason": "deleted"}` for one that is gone.
public struct Zone: Hashable, Sendable, Codable {
    /// Why a zone disappeared (ext), as CloudKit's zone deletion reasons.
    public enum DeletionReason: String, Hashable, Sendable, Codable {
        /// Deleted by an app (another device reset its data, say): re-upload or wipe per policy.
        case deleted
        /// The user purged the data: wipe the local copy and do not re-upload.
        case purged
        /// The caller no longer has access to a zone shared with them: the owner removed them or
        /// stopped sharing, they left, or the zone was deleted. Remove the local copy; do not re-upload.
        case unshared
    }

    public var zoneID: ZoneID
    public var syncToken: String?
    public var atomic: Bool?
    public var deleted: Bool?
    public var reason: DeletionReason?

    public init(
        zoneID: ZoneID, syncToken: String? = nil, atomic: Bool? = nil, deleted: Bool? = nil,
        reason: DeletionReason? = nil
    ) {
        self.zoneID = zoneID
        self.syncToken = syncToken
        self.atomic = atomic
        self.deleted = deleted
        self.reason = reason
    }

    public var isDeleted: Bool { deleted == true }
}

/// `POST /{db}/zones/modify`.
public struct ZonesModifyRequest: Hashable, Sendable, Codable {
    public enum OperationType: String, Hashable, Sendable, Codable {
        case create, delete
    }

    public struct Operation: Hashable, Sendable, Codable {
        public struct ZoneDescriptor: Hashable, Sendable, Codable {
            public var zoneID: ZoneID
            public init(zoneID: ZoneID) { self.zoneID = zoneID }
        }

        public var operationType: OperationType
        public var zone: ZoneDescriptor

        public init(_ operationType: OperationType, _ zoneID: ZoneID) {
            self.operationType = operationType
            self.zone = ZoneDescriptor(zoneID: zoneID)
        }
    }

    public var operations: [Operation]

    public init(operations: [Operation]) { self.operations = operations }
}

/// `POST /{db}/zones/lookup`.
public struct ZonesLookupRequest: Hashable, Sendable, Codable {
    public var zones: [ZoneID]
    public init(zones: [ZoneID]) { self.zones = zones }
}

/// The response of `zones/modify`, `zones/list` and `zones/lookup`.
public struct ZonesResponse: Hashable, Sendable, Codable {
    public var zones: [ZoneResult]
    public init(zones: [ZoneResult]) { self.zones = zones }
}
