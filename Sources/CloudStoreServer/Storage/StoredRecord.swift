import CloudStoreWire
import Foundation

/// A zone as the storage keeps it.
///
/// `seq` is the zone's change sequence (the sequence of its last record write), `dbSeq` the
/// partition's database sequence when the zone last changed, `incarnation` tells a recreated zone
/// from the one deleted before it, and `purgedThrough` is the highest sequence of a purged
/// tombstone: a zone token below it has missed deletions.
///
/// In a user's shared database (WireProtocol.md §6) a zone is another user's private zone whose
/// share they accepted: `owner` names that user, `dbSeq` is the shared database's sequence when the
/// zone last changed there, and `deleted` means the user's access ended (the zone is `unshared`).
struct StoredZone: Hashable, Sendable {
    var name: String
    var seq: Int64
    var dbSeq: Int64
    var incarnation: Int64
    var purgedThrough: Int64
    var deleted: Bool
    /// For a zone of a shared database: the owner of the private zone it is.
    var owner: String? = nil

    /// The default zone before anything was written to it.
    static func pristineDefaultZone() -> StoredZone {
        StoredZone(
            name: ZoneID.defaultZoneName, seq: 0, dbSeq: 0, incarnation: 0, purgedThrough: 0, deleted: false)
    }

    /// A zone of a shared database as changes/database lists it: the owner's zone while the user
    /// has access (`live`), else deleted (`unshared`).
    static func shared(
        owner: String, name: String, dbSeq: Int64, live: Bool, seq: Int64, incarnation: Int64, purgedThrough: Int64
    ) -> StoredZone {
        live
            ? StoredZone(
                name: name, seq: seq, dbSeq: dbSeq, incarnation: incarnation, purgedThrough: purgedThrough, deleted: false,
                owner: owner)
            : StoredZone(name: name, seq: 0, dbSeq: dbSeq, incarnation: 0, purgedThrough: 0, deleted: true, owner: owner)
    }

    /// A zone as reads see it: its row when live, the pristine default zone when the default zone
    /// has no row, nil otherwise.
    static func live(_ row: StoredZone?, name: String) -> StoredZone? {
        if let row, !row.deleted { return row }
        return name == ZoneID.defaultZoneName ? .pristineDefaultZone() : nil
    }

    /// The live zones of a partition as listed: the default zone first (pristine when it has no row).
    static func defaultZoneFirst(_ zones: [StoredZone]) -> [StoredZone] {
        let defaultZone = zones.first { $0.name == ZoneID.defaultZoneName } ?? .pristineDefaultZone()
        return [defaultZone] + zones.filter { $0.name != ZoneID.defaultZoneName }
    }
}

/// What a live record holds besides its identity: fields and who wrote it when.
struct RecordContent: Hashable, Sendable, Codable, JSONBytesWritable {
    var fields: [String: FieldValue]
    var created: Record.Stamp
    var modified: Record.Stamp

    func write(to json: inout JSONBytes) throws {
        try json.object { json in
            try json.member("created", value: created)
            try json.member("fields", value: fields)
            try json.member("modified", value: modified)
        }
    }
}

/// A live record's content as the storage keeps it: its canonical JSON
/// (`{"created":…,"fields":…,"modified":…}`, keys sorted), encoded once when the record is
/// written. Responses splice it as it is (``RecordJSON``); the server decodes it only to look
/// inside (an update's merge, the public database's creator rule, a query, the console).
struct StoredContent: Hashable, Sendable {
    let json: String
    /// Where `created`, `fields` and `modified` are in ``json``, found once; nil when it is not
    /// laid out as this server writes it.
    let parts: RecordJSON.ContentParts?

    /// Content read from storage.
    init(json: String) {
        self.json = json
        parts = RecordJSON.ContentParts(json)
    }

    /// Encodes new content, the one time it is encoded.
    init(_ content: RecordContent) throws {
        self.init(json: String(decoding: try WireCoding.encodedBytes(content), as: UTF8.self))
    }

    func decoded() throws -> RecordContent {
        try WireCoding.decode(RecordContent.self, from: Data(json.utf8))
    }
}

/// A record row: its latest state, or a tombstone.
struct StoredRecord: Hashable, Sendable {
    var name: String
    var type: String
    /// The zone sequence of the record's last write; its change tag derives from it.
    var seq: Int64
    /// Nil for a tombstone.
    var content: StoredContent?
    /// When the record was deleted, for tombstones.
    var deletedAt: Date?

    var isDeleted: Bool { content == nil }

    /// A zone's live share record (WireProtocol.md §6), whose answers carry the share.
    var isLiveShareRecord: Bool {
        !isDeleted && name == ShareMetadata.zoneShareRecordName && ShareMetadata.isShareType(type)
    }

    /// The change tag: the write's sequence in base 36, unique per write of a zone.
    var changeTag: String { String(seq, radix: 36) }

    /// The row as the wire shows it: a record with its tag and zone (only `desiredKeys` of its
    /// fields when given), or a tombstone. Responses write rows with ``RecordWriter``, which
    /// splices the stored JSON instead when it can.
    func presented(in zone: ZoneAddress, desiredKeys: [String]? = nil) throws -> Record {
        guard let content = try content?.decoded() else {
            return Record(recordName: name, recordType: type, recordChangeTag: changeTag, zoneID: zone.zoneID, deleted: true)
        }
        var fields = content.fields
        if let desiredKeys {
            let wanted = Set(desiredKeys)
            fields = fields.filter { wanted.contains($0.key) }
        }
        return Record(
            recordName: name, recordType: type, recordChangeTag: changeTag, zoneID: zone.zoneID, fields: fields,
            created: content.created, modified: content.modified, deleted: false)
    }
}

/// One write of a records/modify plan, applied in order with consecutive zone sequences.
struct RecordWrite: Hashable, Sendable {
    enum Change: Hashable, Sendable {
        /// Saves the record's new state; `deleteSelfTargets` are the records whose deletion deletes it.
        /// `content` is encoded once, when the plan is made; `fields` are its fields, for the
        /// plan's reference checks.
        case save(content: StoredContent, fields: [String: FieldValue], deleteSelfTargets: Set<String>)
        case delete
    }

    var name: String
    var type: String
    var change: Change
    /// When the write happens: a tombstone's deletion time.
    var time: Date
    /// When the record's type has uniqueness constraints, the keys (``UniqueKey/text``) the record
    /// holds after the write: the storage replaces the record's key rows with them (a delete
    /// leaves none). Nil when the type has none: such a record has no key rows, and the storage
    /// spends no statement on them.
    var uniqueKeys: [String]? = nil

    /// Whether the record may have references, saved assets and unique keys to drop before this
    /// write: it is live in `stored`, the rows the plan read, or its name is not among the names
    /// `read` (whose rows, where they exist, are in `stored`). A record read absent or deleted
    /// has none (a delete removes them), so a create skips those statements.
    func mayReplaceLive(_ stored: [String: StoredRecord], read: Set<String>) -> Bool {
        if let row = stored[name] { return !row.isDeleted }
        return !read.contains(name)
    }
}

/// Which rows a records/modify plan needs to see.
struct RecordSnapshotRequest: Hashable, Sendable {
    /// Records named by operations and by validating references.
    var names: Set<String>
    /// Records an operation may delete: the snapshot includes every live record that would be
    /// deleted with them through `DELETE_SELF` references, transitively.
    var cascadeRoots: Set<String>
    /// The asset receipts the operations send (WireProtocol.md §7).
    var receipts: Set<String> = []
}

/// The rows of one zone a records/modify plan decides on, read under the zone's write lock
/// (``RecordWriteScript``).
struct RecordSnapshot: Sendable {
    var zone: StoredZone
    /// Rows (live or tombstones) of every requested name that exists, and of the cascade closure.
    var records: [String: StoredRecord]
    /// Target → live records referring to it with `DELETE_SELF`, for every target in the closure.
    var deleteSelfReferrers: [String: Set<String>] = [:]
    /// The container's schema for the environment, and its version.
    var schema: CloudSchema
    /// The requested receipts the storage knows, by receipt (in any zone: the plan tells why one
    /// does not fit).
    var receipts: [String: AssetReceipt] = [:]
    /// The zone's share, with every participant row; nil when the zone is not shared.
    var share: StoredShare? = nil
    /// Every unique key read for the plan (``MissingUniqueKeys``), held by a live record or not.
    var uniqueKeysRead: Set<String> = []
    /// Of ``uniqueKeysRead``, those a live record holds, with its name; that record is in ``records``.
    var uniqueKeyHolders: [String: String] = [:]

    /// What a plan throws when records it saves hold unique keys the snapshot did not read: the
    /// storage reads them (``add(uniqueKeys:holders:rows:)``) and calls the plan again. A plan
    /// learns its keys only once it knows the schema and each record's final fields (an update
    /// keeps stored fields, a value sent without a type takes the schema's), so the first
    /// snapshot reads none, and a request that saves no record of a constrained type costs no
    /// read of them.
    struct MissingUniqueKeys: Error, Hashable, Sendable {
        var keys: Set<String>
    }

    /// What `decide` answers for this snapshot, or the unique keys it asks for first: the
    /// ``RecordWriteScript`` reads them (``add(uniqueKeys:holders:rows:)``) and asks again. Any
    /// other error is thrown.
    func decision<Decision>(
        _ decide: (RecordSnapshot) throws -> (RecordWritePlan, Decision)
    ) throws -> Result<(RecordWritePlan, Decision), MissingUniqueKeys> {
        do {
            return .success(try decide(self))
        } catch let missing as MissingUniqueKeys {
            return .failure(missing)
        }
    }

    /// Adds the unique keys the plan asked for: the live records holding them by key, and those
    /// records' rows (live records that are already in ``records`` may be left out of `rows`).
    mutating func add(uniqueKeys keys: Set<String>, holders: [String: String], rows: [String: StoredRecord]) {
        precondition(!keys.isSubset(of: uniqueKeysRead), "a plan asked again for unique keys it was given")
        uniqueKeysRead.formUnion(keys)
        uniqueKeyHolders.merge(holders) { $1 }
        records.merge(rows) { stored, _ in stored }
    }
}

/// What a plan decided: writes in order, and a schema to store instead of the snapshot's (its
/// version one above the snapshot's: stored only while the snapshot's version is still current).
struct RecordWritePlan: Sendable {
    var writes: [RecordWrite]
    var schema: CloudSchema?
    /// What the writes do to the zone's share (WireProtocol.md §6).
    var share: ShareChange? = nil
    /// The users whose shared database the writes change: the storage raises each one's database
    /// sequence and the position of the zone in it, in the same transaction.
    var sharedDatabases: Set<String> = []

    /// The zone's share once the plan is applied, given the share before it.
    func share(after before: StoredShare?) -> StoredShare? {
        switch share {
        case .save(let share)?: share
        case .stop?: nil
        case nil: before
        }
    }
}

/// A page of changes of one zone, read in one consistent snapshot.
struct ZoneChangesPage: Sendable {
    var zone: StoredZone
    /// Rows with a sequence above the token's, in sequence order; one more than the limit when
    /// more follow.
    var records: [StoredRecord]
}

/// A page of zones that changed in a partition, read in one consistent snapshot.
struct DatabaseChangesPage: Sendable {
    /// The partition's database sequence.
    var dbSeq: Int64
    /// Zones (live or deleted) with a database sequence above the token's, in that order; one more
    /// than the limit when more follow.
    var zones: [StoredZone]
}

/// One operation of zones/modify.
enum ZoneChange: Hashable, Sendable {
    case create(String)
    case delete(String)
}
