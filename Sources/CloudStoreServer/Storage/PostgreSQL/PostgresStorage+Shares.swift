import CloudStoreWire
import Foundation
import PostgresNIO

/// Shares on PostgreSQL (WireProtocol.md §6), in the tables the SQLite backend has:
/// `cloudstore_share` and `cloudstore_share_participant`. A participant's shared partition is
/// locked (to raise its sequence) only after the owner's partition, in order of user.
extension PostgresStorage {
    static func participant(_ row: (String, String, String, String)) throws -> StoredParticipant {
        guard let permission = SharePermission(rawValue: row.2), let status = ShareParticipant.AcceptanceStatus(rawValue: row.3)
        else { throw PostgresStorageError("a participant row has an unknown permission or status") }
        return StoredParticipant(user: row.0, participantID: row.1, permission: permission, status: status)
    }

    func participants(_ connection: PostgresConnection, _ query: PostgresQuery) async throws -> [StoredParticipant] {
        var participants: [StoredParticipant] = []
        for try await row in try await self.run(query, on: connection).decode((String, String, String, String).self) {
            participants.append(try Self.participant(row))
        }
        return participants
    }

    /// The share of a zone and its participant rows; nil when the zone has no share row.
    func loadShare(_ connection: PostgresConnection, _ partitionID: Int64, _ zone: ZoneAddress) async throws -> StoredShare? {
        guard zone.partition.scope == .private else { return nil }
        var found: (String, String, String)?
        for try await row in try await self.run(
            """
            SELECT short_guid, owner_participant_id, public_permission FROM \(unescaped: table("share"))
            WHERE partition_id = \(partitionID) AND zone = \(zone.zoneName)
            """, on: connection
        ).decode((String, String, String).self) {
            found = row
        }
        guard let (shortGUID, ownerParticipantID, publicPermission) = found else { return nil }
        guard let permission = SharePermission(rawValue: publicPermission) else {
            throw PostgresStorageError("a share row has an unknown public permission")
        }
        let participants = try await self.participants(
            connection,
            """
            SELECT user_name, participant_id, permission, status FROM \(unescaped: table("share_participant"))
            WHERE partition_id = \(partitionID) AND zone = \(zone.zoneName)
            """)
        return StoredShare(
            shortGUID: shortGUID, owner: zone.partition.owner, ownerParticipantID: ownerParticipantID,
            publicPermission: permission, participants: Dictionary(participants.map { ($0.user, $0) }, uniquingKeysWith: { $1 }))
    }

    /// A partition's row ID, creating the row, without locking it.
    func partitionIDCreating(_ connection: PostgresConnection, _ partition: DatabasePartition) async throws -> Int64 {
        try await self.run(
            """
            INSERT INTO \(unescaped: table("partition")) (container, environment, scope, owner)
            VALUES (\(partition.container), \(partition.environment.rawValue), \(partition.scope.rawValue), \(partition.owner))
            ON CONFLICT DO NOTHING
            """, on: connection)
        guard let id = try await partitionID(connection, partition) else {
            throw PostgresStorageError("the row of partition \(partition) vanished")
        }
        return id
    }

    /// Stores what a write did to the zone's share.
    func applyShare(_ change: ShareChange, _ connection: PostgresConnection, _ partitionID: Int64, _ zone: ZoneAddress)
        async throws
    {
        let share: StoredShare
        switch change {
        case .save(let saved):
            share = saved
            try await self.run(
                """
                INSERT INTO \(unescaped: table("share")) (partition_id, zone, short_guid, owner_participant_id, public_permission)
                VALUES (\(partitionID), \(zone.zoneName), \(share.shortGUID), \(share.ownerParticipantID), \(share.publicPermission.rawValue))
                ON CONFLICT (partition_id, zone) DO UPDATE SET short_guid = excluded.short_guid,
                    owner_participant_id = excluded.owner_participant_id, public_permission = excluded.public_permission
                """, on: connection)
        case .stop(let stopped):
            share = stopped
            try await self.run(
                "DELETE FROM \(unescaped: table("share")) WHERE partition_id = \(partitionID) AND zone = \(zone.zoneName)",
                on: connection)
        }
        for participant in share.participants.values.sorted(by: { $0.user < $1.user }) {
            let sharedID = try await partitionIDCreating(connection, zone.partition.sharedDatabase(of: participant.user))
            try await self.run(
                """
                INSERT INTO \(unescaped: table("share_participant"))
                    (partition_id, zone, user_name, participant_id, permission, status, shared_partition_id)
                VALUES (\(partitionID), \(zone.zoneName), \(participant.user), \(participant.participantID),
                    \(participant.permission.rawValue), \(participant.status.rawValue), \(sharedID))
                ON CONFLICT (partition_id, zone, user_name) DO UPDATE SET participant_id = excluded.participant_id,
                    permission = excluded.permission, status = excluded.status
                """, on: connection)
        }
    }

    /// Gives each user's shared database its next sequence (telling every instance), and the zone
    /// that position there.
    @discardableResult
    func advanceSharedDatabases(
        _ users: Set<String>, _ connection: PostgresConnection, _ partitionID: Int64, _ zone: ZoneAddress
    ) async throws -> [String: Int64] {
        var seqs: [String: Int64] = [:]
        for user in users.sorted() {
            let shared = zone.partition.sharedDatabase(of: user)
            let sharedID = try await lockPartition(connection, shared)
            let seq = try await bumpDatabaseSeq(connection, sharedID, shared)
            try await self.run(
                """
                UPDATE \(unescaped: table("share_participant")) SET db_seq = \(seq)
                WHERE partition_id = \(partitionID) AND zone = \(zone.zoneName) AND user_name = \(user)
                """, on: connection)
            seqs[user] = seq
        }
        return seqs
    }

    /// Stops the share of a zone being deleted; answers the users who had access.
    func stopShare(_ connection: PostgresConnection, _ partitionID: Int64, _ zone: ZoneAddress) async throws -> Set<String> {
        guard let share = try await loadShare(connection, partitionID, zone) else { return [] }
        try await applyShare(.stop(ShareRules.stopped(share)), connection, partitionID, zone)
        try await advanceSharedDatabases(share.acceptedUsers, connection, partitionID, zone)
        return share.acceptedUsers
    }

    func share(in zone: ZoneAddress) async throws -> StoredShare? {
        try await snapshot { connection in
            guard let id = try await self.partitionID(connection, zone.partition) else { return nil }
            return try await self.loadShare(connection, id, zone)
        }
    }

    func sharedZone(shortGUID: String, container: String, environment: CloudEnvironment) async throws -> ZoneAddress? {
        try await snapshot { connection in
            for try await (owner, zone) in try await self.run(
                """
                SELECT owner_partition.owner, share.zone FROM \(unescaped: self.table("share")) AS share
                JOIN \(unescaped: self.table("partition")) AS owner_partition ON owner_partition.id = share.partition_id
                WHERE share.short_guid = \(shortGUID) AND owner_partition.container = \(container)
                    AND owner_partition.environment = \(environment.rawValue)
                """, on: connection
            ).decode((String, String).self) {
                return DatabasePartition(container: container, environment: environment, scope: .private, owner: owner).zone(zone)
            }
            return nil
        }
    }

    func participant(_ user: String, in zone: ZoneAddress) async throws -> StoredParticipant? {
        try await snapshot { connection in
            guard let id = try await self.partitionID(connection, zone.partition) else { return nil }
            return try await self.participants(
                connection,
                """
                SELECT user_name, participant_id, permission, status FROM \(unescaped: self.table("share_participant"))
                WHERE partition_id = \(id) AND zone = \(zone.zoneName) AND user_name = \(user)
                """
            ).first
        }
    }

    func sharedZones(in partition: DatabasePartition) async throws -> [SharedZone] {
        try await snapshot { connection in
            guard let id = try await self.partitionID(connection, partition) else { return [] }
            var zones: [SharedZone] = []
            for try await (owner, name, seq, dbSeq, incarnation, purged, permission) in try await self.run(
                """
                SELECT owner_partition.owner, zone.name, zone.seq, zone.db_seq, zone.incarnation, zone.purged_through,
                    participant.permission
                FROM \(unescaped: self.table("share_participant")) AS participant
                JOIN \(unescaped: self.table("partition")) AS owner_partition ON owner_partition.id = participant.partition_id
                JOIN \(unescaped: self.table("zone")) AS zone
                    ON zone.partition_id = participant.partition_id AND zone.name = participant.zone
                WHERE participant.shared_partition_id = \(id) AND participant.status = 'ACCEPTED' AND NOT zone.deleted
                ORDER BY owner_partition.owner, zone.name
                """, on: connection
            ).decode((String, String, Int64, Int64, Int64, Int64, String).self) {
                guard let permission = SharePermission(rawValue: permission) else {
                    throw PostgresStorageError("a participant row has an unknown permission")
                }
                let stored = StoredZone(
                    name: name, seq: seq, dbSeq: dbSeq, incarnation: incarnation, purgedThrough: purged, deleted: false,
                    owner: owner)
                zones.append(
                    SharedZone(zone: partition.privateDatabase(of: owner).zone(name), stored: stored, permission: permission))
            }
            return zones
        }
    }

    /// changes/database of a shared partition: the memberships whose position is above `dbSeq`.
    func sharedDatabaseChanges(_ connection: PostgresConnection, _ partitionID: Int64, after dbSeq: Int64, limit: Int)
        async throws -> [StoredZone]
    {
        var zones: [StoredZone] = []
        for try await (owner, name, status, position, seq, incarnation, purged, deleted) in try await self.run(
            """
            SELECT owner_partition.owner, participant.zone, participant.status, participant.db_seq,
                zone.seq, zone.incarnation, zone.purged_through, zone.deleted
            FROM \(unescaped: table("share_participant")) AS participant
            JOIN \(unescaped: table("partition")) AS owner_partition ON owner_partition.id = participant.partition_id
            LEFT JOIN \(unescaped: table("zone")) AS zone
                ON zone.partition_id = participant.partition_id AND zone.name = participant.zone
            WHERE participant.shared_partition_id = \(partitionID) AND participant.db_seq > \(dbSeq)
            ORDER BY participant.db_seq LIMIT \(limit + 1)
            """, on: connection
        ).decode((String, String, String, Int64, Int64?, Int64?, Int64?, Bool?).self) {
            zones.append(
                StoredZone.shared(
                    owner: owner, name: name, dbSeq: position,
                    live: status == ShareParticipant.AcceptanceStatus.accepted.rawValue && deleted == false,
                    seq: seq ?? 0, incarnation: incarnation ?? 0, purgedThrough: purged ?? 0))
        }
        return zones
    }
}
