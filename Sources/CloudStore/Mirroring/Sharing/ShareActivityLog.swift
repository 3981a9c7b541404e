import CloudStoreSync
import Foundation
import GRDB

typealias ShareActivity = PersistentCloudContainer.ShareActivity

extension PersistentCloudContainer.ShareActivity {
    /// What changed between two versions of a share, participant by participant (the owner is left
    /// out): invited, joined, left (removed when `removedHere`: this device's own save removed them),
    /// a permission changed; a share that went away is ``Change/stopped``. Pure: the zone and date
    /// are set by the caller.
    static func changes(from old: ShareMetadata?, to new: ShareMetadata?, removedHere: Bool) -> [Self] {
        guard let new else {
            return old == nil ? [] : [Self(change: .stopped, user: nil, permission: nil)]
        }
        let owner = new.owner?.user ?? old?.owner?.user
        func byUser(_ share: ShareMetadata?) -> [String: ShareParticipant] {
            var participants: [String: ShareParticipant] = [:]
            for participant in share?.participants ?? [] where participant.role != .owner {
                guard let user = participant.user, user != owner else { continue }
                participants[user] = participant
            }
            return participants
        }
        let before = byUser(old)
        let after = byUser(new)
        var changes: [Self] = []
        for user in Set(before.keys).union(after.keys).sorted() {
            let was = before[user].map { $0.acceptanceStatus ?? .invited }
            let now = after[user].map { $0.acceptanceStatus ?? .invited }
            let permission = after[user]?.permission
            switch (was, now) {
            case (nil, .invited?), (.removed?, .invited?):
                changes.append(Self(change: .invited, user: user, permission: permission))
            case (nil, .accepted?), (.invited?, .accepted?), (.removed?, .accepted?):
                changes.append(Self(change: .joined, user: user, permission: permission))
            case (.invited?, .removed?), (.accepted?, .removed?), (.invited?, nil), (.accepted?, nil):
                changes.append(Self(change: removedHere ? .removed : .left, user: user, permission: nil))
            case (let status?, let same?) where status == same && status != .removed:
                if before[user]?.permission != permission {
                    changes.append(Self(change: .permissionChanged, user: user, permission: permission))
                }
            default:
                break
            }
        }
        return changes
    }
}

extension Database {
    /// Appends to the share activity log; answers the entry's sequence number.
    func log(_ activity: ShareActivity) throws -> Int64 {
        try execute(
            sql: """
                INSERT INTO cloudstore_mirror_share_activity (date, zone_name, zone_owner, user, change, permission)
                VALUES (?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                activity.date.millisecondsSince1970, activity.zoneID.zoneName, activity.zoneID.ownerRecordName, activity.user,
                activity.change.rawValue, activity.permission?.rawValue,
            ])
        return lastInsertedRowID
    }

    /// The share activity log after a sequence number, oldest first.
    func shareActivity(after sequence: Int64) throws -> [ShareActivity] {
        guard try tableExists("cloudstore_mirror_share_activity") else { return [] }
        return try Row.fetchAll(
            self,
            sql: "SELECT sequence, date, zone_name, zone_owner, user, change, permission FROM cloudstore_mirror_share_activity WHERE sequence > ? ORDER BY sequence",
            arguments: [sequence]
        ).map { row in
            ShareActivity(
                sequence: row[0], date: Date(millisecondsSince1970: row[1]), zoneID: ZoneID(zoneName: row[2], ownerRecordName: row[3]),
                change: ShareActivity.Change(rawValue: row[5]) ?? .left, user: row[4],
                permission: (row[6] as String?).flatMap(SharePermission.init(rawValue:)))
        }
    }
}
