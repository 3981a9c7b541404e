import CloudStoreWire
import Foundation
import GRDB

/// Shares on SQLite (WireProtocol.md §6): `cloudstore_share` holds a shared zone's settings,
/// `cloudstore_share_participant` one row per user and zone, with the participant's shared
/// partition and the zone's position (`db_seq`) in that shared database.
extension SQLiteStorage {
    static func registerShareMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v3-shares") { db in
            try db.execute(
                sql: """
                    CREATE TABLE cloudstore_share (
                        partition_id INTEGER NOT NULL,
                        zone TEXT NOT NULL,
                        short_guid TEXT NOT NULL UNIQUE,
                        owner_participant_id TEXT NOT NULL,
                        public_permission TEXT NOT NULL,
                        PRIMARY KEY (partition_id, zone));
                    CREATE TABLE cloudstore_share_participant (
                        partition_id INTEGER NOT NULL,
                        zone TEXT NOT NULL,
                        user_name TEXT NOT NULL,
                        participant_id TEXT NOT NULL,
                        permission TEXT NOT NULL,
                        status TEXT NOT NULL,
                        shared_partition_id INTEGER NOT NULL,
                        db_seq INTEGER NOT NULL DEFAULT 0,
                        PRIMARY KEY (partition_id, zone, user_name));
                    CREATE INDEX cloudstore_share_participant_by_db_seq
                        ON cloudstore_share_participant (shared_partition_id, db_seq);
                    """)
        }
    }

    static func participant(_ row: Row) throws -> StoredParticipant {
        guard let permission = SharePermission(rawValue: row["permission"]),
            let status = ShareParticipant.AcceptanceStatus(rawValue: row["status"])
        else { throw DatabaseError(message: "a participant row has an unknown permission or status") }
        return StoredParticipant(user: row["user_name"], participantID: row["participant_id"], permission: permission, status: status)
    }

    /// The share of a zone and its participant rows; nil when the zone has no share row.
    func loadShare(_ db: Database, _ partitionID: Int64, _ zone: ZoneAddress) throws -> StoredShare? {
        guard zone.partition.scope == .private,
            let row = try Row.fetchOne(
                db.cachedStatement(
                    sql: "SELECT short_guid, owner_participant_id, public_permission FROM cloudstore_share WHERE partition_id = ? AND zone = ?"),
                arguments: [partitionID, zone.zoneName])
        else { return nil }
        guard let permission = SharePermission(rawValue: row["public_permission"]) else {
            throw DatabaseError(message: "a share row has an unknown public permission")
        }
        let participants = try Row.fetchAll(
            db,
            sql: """
                SELECT user_name, participant_id, permission, status FROM cloudstore_share_participant
                WHERE partition_id = ? AND zone = ?
                """,
            arguments: [partitionID, zone.zoneName]
        ).map(Self.participant)
        return StoredShare(
            shortGUID: row["short_guid"], owner: zone.partition.owner, ownerParticipantID: row["owner_participant_id"],
            publicPermission: permission, participants: Dictionary(participants.map { ($0.user, $0) }, uniquingKeysWith: { $1 }))
    }

    /// Stores what a write did to the zone's share.
    func applyShare(_ change: ShareChange, _ db: Database, _ partitionID: Int64, _ zone: ZoneAddress) throws {
        let share: StoredShare
        switch change {
        case .save(let saved):
            share = saved
            try db.execute(
                sql: """
                    INSERT INTO cloudstore_share (partition_id, zone, short_guid, owner_participant_id, public_permission)
                    VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT (partition_id, zone) DO UPDATE SET short_guid = excluded.short_guid,
                        owner_participant_id = excluded.owner_participant_id, public_permission = excluded.public_permission
                    """,
                arguments: [partitionID, zone.zoneName, share.shortGUID, share.ownerParticipantID, share.publicPermission.rawValue])
        case .stop(let stopped):
            share = stopped
            try db.execute(
                sql: "DELETE FROM cloudstore_share WHERE partition_id = ? AND zone = ?", arguments: [partitionID, zone.zoneName])
        }
        for participant in share.participants.values.sorted(by: { $0.user < $1.user }) {
            let sharedID = try ensurePartition(db, zone.partition.sharedDatabase(of: participant.user))
            try db.execute(
                sql: """
                    INSERT INTO cloudstore_share_participant
                        (partition_id, zone, user_name, participant_id, permission, status, shared_partition_id)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (partition_id, zone, user_name) DO UPDATE SET participant_id = excluded.participant_id,
                        permission = excluded.permission, status = excluded.status
                    """,
                arguments: [
                    partitionID, zone.zoneName, participant.user, participant.participantID, participant.permission.rawValue,
                    participant.status.rawValue, sharedID,
                ])
        }
    }

    /// Gives each user's shared database its next sequence, and the zone that position there.
    @discardableResult
    func advanceSharedDatabases(_ users: Set<String>, _ db: Database, _ partitionID: Int64, _ zone: ZoneAddress) throws
        -> [String: Int64]
    {
        var seqs: [String: Int64] = [:]
        for user in users.sorted() {
            let sharedID = try ensurePartition(db, zone.partition.sharedDatabase(of: user))
            let seq = try bumpDatabaseSeq(db, sharedID)
            try db.execute(
                sql: "UPDATE cloudstore_share_participant SET db_seq = ? WHERE partition_id = ? AND zone = ? AND user_name = ?",
                arguments: [seq, partitionID, zone.zoneName, user])
            seqs[user] = seq
        }
        return seqs
    }

    /// Stops the share of a zone being deleted; answers the users who had access.
    func stopShare(_ db: Database, _ partitionID: Int64, _ zone: ZoneAddress) throws -> Set<String> {
        guard let share = try loadShare(db, partitionID, zone) else { return [] }
        try applyShare(.stop(ShareRules.stopped(share)), db, partitionID, zone)
        try advanceSharedDatabases(share.acceptedUsers, db, partitionID, zone)
        return share.acceptedUsers
    }

    func share(in zone: ZoneAddress) async throws -> StoredShare? {
        try await pool(zone.partition.container).read { db in
            guard let id = try self.partitionID(db, zone.partition) else { return nil }
            return try self.loadShare(db, id, zone)
        }
    }

    func sharedZone(shortGUID: String, container: String, environment: CloudEnvironment) async throws -> ZoneAddress? {
        try await pool(container).read { db in
            try Row.fetchOne(
                db,
                sql: """
                    SELECT owner_partition.owner, share.zone FROM cloudstore_share AS share
                    JOIN cloudstore_partition AS owner_partition ON owner_partition.id = share.partition_id
                    WHERE share.short_guid = ? AND owner_partition.environment = ?
                    """,
                arguments: [shortGUID, environment.rawValue]
            ).map { row in
                DatabasePartition(container: container, environment: environment, scope: .private, owner: row["owner"])
                    .zone(row["zone"])
            }
        }
    }

    func participant(_ user: String, in zone: ZoneAddress) async throws -> StoredParticipant? {
        try await pool(zone.partition.container).read { db in
            guard let id = try self.partitionID(db, zone.partition) else { return nil }
            return try Row.fetchOne(
                db,
                sql: """
                    SELECT user_name, participant_id, permission, status FROM cloudstore_share_participant
                    WHERE partition_id = ? AND zone = ? AND user_name = ?
                    """,
                arguments: [id, zone.zoneName, user]
            ).map(Self.participant)
        }
    }

    func sharedZones(in partition: DatabasePartition) async throws -> [SharedZone] {
        try await pool(partition.container).read { db in
            guard let id = try self.partitionID(db, partition) else { return [] }
            return try Row.fetchAll(
                db,
                sql: """
                    SELECT owner_partition.owner, zone.name, zone.seq, zone.db_seq, zone.incarnation, zone.purged_through,
                        zone.deleted, participant.permission
                    FROM cloudstore_share_participant AS participant
                    JOIN cloudstore_partition AS owner_partition ON owner_partition.id = participant.partition_id
                    JOIN cloudstore_zone AS zone ON zone.partition_id = participant.partition_id AND zone.name = participant.zone
                    WHERE participant.shared_partition_id = ? AND participant.status = 'ACCEPTED' AND zone.deleted = 0
                    ORDER BY owner_partition.owner, zone.name
                    """,
                arguments: [id]
            ).map { row in
                guard let permission = SharePermission(rawValue: row["permission"]) else {
                    throw DatabaseError(message: "a participant row has an unknown permission")
                }
                var stored = Self.zone(row)
                stored.owner = row["owner"]
                return SharedZone(
                    zone: partition.privateDatabase(of: row["owner"]).zone(stored.name), stored: stored, permission: permission)
            }
        }
    }

    /// changes/database of a shared partition: the memberships whose position is above `dbSeq`.
    func sharedDatabaseChanges(_ db: Database, _ partitionID: Int64, after dbSeq: Int64, limit: Int) throws -> [StoredZone] {
        try Row.fetchAll(
            db,
            sql: """
                SELECT owner_partition.owner, participant.zone, participant.status, participant.db_seq,
                    zone.seq, zone.incarnation, zone.purged_through, zone.deleted
                FROM cloudstore_share_participant AS participant
                JOIN cloudstore_partition AS owner_partition ON owner_partition.id = participant.partition_id
                LEFT JOIN cloudstore_zone AS zone ON zone.partition_id = participant.partition_id AND zone.name = participant.zone
                WHERE participant.shared_partition_id = ? AND participant.db_seq > ?
                ORDER BY participant.db_seq LIMIT ?
                """,
            arguments: [partitionID, dbSeq, limit + 1]
        ).map { row in
            let status: String = row["status"]
            let seq: Int64? = row["seq"]
            let incarnation: Int64? = row["incarnation"]
            let purgedThrough: Int64? = row["purged_through"]
            let zoneDeleted: Bool? = row["deleted"]
            return StoredZone.shared(
                owner: row["owner"], name: row["zone"], dbSeq: row["db_seq"],
                live: status == ShareParticipant.AcceptanceStatus.accepted.rawValue && zoneDeleted == false,
                seq: seq ?? 0, incarnation: incarnation ?? 0, purgedThrough: purgedThrough ?? 0)
        }
    }
}
