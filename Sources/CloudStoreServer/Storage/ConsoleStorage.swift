import CloudStoreWire
import Foundation

/// The reads the web console makes, besides those of ``ServerStorage``: overviews no API route
/// needs (the partitions of a container, zones with record counts, a zone's records by name).
///
/// Every method only reads, never creates a file, a table or a row, and stays off the API's hot
/// paths (no lock a write waits for). Identifiers reach SQL only as bound parameters.
protocol ConsoleStorage: Sendable {
    /// The partitions of a container and environment that hold anything, by scope and owner.
    func partitions(container: String, environment: CloudEnvironment) async throws -> [PartitionSummary]

    /// The partition's live zones, the default zone first (pristine when never written), with their
    /// live record counts, and the partition's database sequence.
    func databaseSummary(of partition: DatabasePartition) async throws -> DatabaseSummary

    /// Up to `limit + 1` live records of a zone ordered by name, from the first name after `name`
    /// (from the start when nil); nil when the zone does not exist.
    func records(in zone: ZoneAddress, after name: String?, limit: Int) async throws -> [StoredRecord]?
}

/// One partition of a container and environment as the console lists it.
struct PartitionSummary: Hashable, Sendable {
    var scope: DatabaseScope
    var owner: String
    /// Live zones, the default zone included (it always exists).
    var zoneCount: Int
}

/// A partition's zones as the console shows them.
struct DatabaseSummary: Hashable, Sendable {
    struct Zone: Hashable, Sendable {
        var zone: StoredZone
        var recordCount: Int
    }

    /// The partition's database sequence (0 when nothing was ever written).
    var dbSeq: Int64
    var zones: [Zone]

    /// The summary of live zone rows with their counts: the default zone first, pristine and empty
    /// when it has no row.
    init(dbSeq: Int64, zones: [Zone]) {
        self.dbSeq = dbSeq
        let defaultZone =
            zones.first { $0.zone.name == ZoneID.defaultZoneName }
            ?? Zone(zone: .pristineDefaultZone(), recordCount: 0)
        self.zones = [defaultZone] + zones.filter { $0.zone.name != ZoneID.defaultZoneName }
    }
}
