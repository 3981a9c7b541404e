import CloudStoreWire

/// One database of one owner in one container and environment: everything the server stores is
/// partitioned by it, and one user's partition is never reachable from another user's requests.
struct DatabasePartition: Hashable, Sendable, CustomStringConvertible {
    /// The owner of the public database's zones, as CloudKit names it.
    static let publicOwner = ZoneID.publicDatabaseOwner

    var container: String
    var environment: CloudEnvironment
    var scope: DatabaseScope
    /// The user whose database this is, or ``publicOwner``.
    var owner: String

    /// A stable text key, used to name the partition in change notifications.
    var key: String { "\(container)/\(environment.rawValue)/\(scope.rawValue)/\(owner)" }

    var description: String { key }

    func zone(_ zoneName: String) -> ZoneAddress {
        ZoneAddress(partition: self, zoneName: zoneName)
    }

    /// The zone ID as responses carry it: with its owner.
    func zoneID(_ zoneName: String) -> ZoneID {
        ZoneID(zoneName: zoneName, ownerRecordName: owner)
    }

    /// A user's shared database in the same container and environment.
    func sharedDatabase(of user: String) -> DatabasePartition {
        DatabasePartition(container: container, environment: environment, scope: .shared, owner: user)
    }

    /// A user's private database in the same container and environment.
    func privateDatabase(of user: String) -> DatabasePartition {
        DatabasePartition(container: container, environment: environment, scope: .private, owner: user)
    }

    /// Where a zone this partition lists lives: in this partition, or for a shared database's zone
    /// in its owner's private database.
    func address(of zone: StoredZone) -> ZoneAddress {
        guard scope == .shared, let owner = zone.owner else { return self.zone(zone.name) }
        return privateDatabase(of: owner).zone(zone.name)
    }
}

extension DatabasePartition {
    /// The partition a ``key`` names; nil for text that is not one. Container IDs, environments
    /// and scopes hold no `/`; the owner comes last, whatever it holds.
    init?(key: String) {
        let parts = key.split(separator: "/", maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 4, let environment = CloudEnvironment(rawValue: String(parts[1])),
            let scope = DatabaseScope(rawValue: String(parts[2]))
        else { return nil }
        self.init(container: String(parts[0]), environment: environment, scope: scope, owner: String(parts[3]))
    }
}

/// A zone of a partition.
struct ZoneAddress: Hashable, Sendable, CustomStringConvertible {
    var partition: DatabasePartition
    var zoneName: String

    var isDefaultZone: Bool { zoneName == ZoneID.defaultZoneName }
    var zoneID: ZoneID { partition.zoneID(zoneName) }
    var description: String { "\(zoneName)@\(partition.key)" }
}
