import CloudStoreWire
import Foundation

/// The decisions about a zone's share (WireProtocol.md §6), pure: what the owner's save of the
/// share record makes of it, what stopping and leaving do, who may use the zone through the
/// shared database, and whose shared database a write changes.
///
/// - Users are named by `userRecordName` only, and must be users of this server (from its tokens
///   file): another lookup key, or a name the server does not know, is a per-record `BAD_REQUEST`
///   naming it.
/// - A new participant is `INVITED`; one already invited or accepted keeps its status and ID and
///   takes the permission sent; a participant the owner leaves out of `participants` is
///   `REMOVED` (and must be invited and accept again to come back).
/// - At most ``maxParticipants`` participants besides the owner: over it, per-record `LIMIT_EXCEEDED`.
struct ShareRules: Sendable {
    /// How many users besides the owner a share may hold (invited or accepted).
    static let maxParticipants = 100

    /// Whether the server knows a user (its tokens file names them).
    var isKnownUser: @Sendable (String) -> Bool = { _ in false }
    var makeShortGUID: @Sendable () -> String = ShareIdentifiers.newShortGUID
    var makeParticipantID: @Sendable () -> String = ShareIdentifiers.newParticipantID

    /// Why a save of the share record is refused.
    struct Problem: Error, Hashable {
        var code: ServerErrorCode
        var reason: String
    }

    /// The share after its owner saves the share record with `sent` (nil: the record carried no
    /// share metadata) over `current` (nil: the zone has no share yet, which this save creates).
    /// `publicPermission` and `participants` left out of `sent` keep their values.
    func saved(_ sent: ShareMetadata?, over current: StoredShare?, owner: String) -> Result<StoredShare, Problem> {
        var share =
            current
            ?? StoredShare(
                shortGUID: makeShortGUID(), owner: owner, ownerParticipantID: makeParticipantID(), publicPermission: .none,
                participants: [:])
        if let permission = sent?.publicPermission { share.publicPermission = permission }
        guard let list = sent?.participants else { return .success(share) }

        var listed: [String: SharePermission] = [:]
        for (index, participant) in list.enumerated() {
            if participant.role == .owner || participant.user == owner { continue }
            guard let user = participant.user else {
                let lookup = participant.userIdentity.lookupInfo
                let key = lookup?.emailAddress != nil ? "emailAddress" : lookup?.phoneNumber != nil ? "phoneNumber" : nil
                return .failure(
                    Problem(
                        code: .badRequest,
                        reason: key.map {
                            "participant \(index + 1) is looked up by \($0), which this server does not support: name users by userIdentity.lookupInfo.userRecordName"
                        } ?? "participant \(index + 1) names no user: set userIdentity.lookupInfo.userRecordName"))
            }
            guard isKnownUser(user) else {
                return .failure(
                    Problem(
                        code: .badRequest,
                        reason: "user \(user.prefix(255)) is not known to this server: invite users by the userRecordName their token maps to"))
            }
            guard participant.acceptanceStatus != .removed else { continue }
            guard participant.permission != .none else {
                return .failure(
                    Problem(code: .badRequest, reason: "participant \(user) needs permission READ_ONLY or READ_WRITE"))
            }
            guard listed.updateValue(participant.permission, forKey: user) == nil else {
                return .failure(Problem(code: .badRequest, reason: "participant \(user) appears twice: name each user once"))
            }
        }
        guard listed.count <= Self.maxParticipants else {
            return .failure(
                Problem(
                    code: .limitExceeded,
                    reason: "the share names \(listed.count) participants; the limit is \(Self.maxParticipants) besides its owner: remove some"))
        }
        for user in share.participants.keys where listed[user] == nil {
            share.participants[user]?.status = .removed
        }
        for (user, permission) in listed {
            if var row = share.participants[user], row.status != .removed {
                row.permission = permission
                share.participants[user] = row
            } else {
                share.participants[user] = StoredParticipant(
                    user: user, participantID: share.participants[user]?.participantID ?? makeParticipantID(),
                    permission: permission, status: .invited)
            }
        }
        return .success(share)
    }

    /// The share once it stops (its record or zone deleted): every participant removed.
    static func stopped(_ share: StoredShare) -> StoredShare {
        var share = share
        for user in share.participants.keys { share.participants[user]?.status = .removed }
        return share
    }

    /// The share once `user` left it.
    static func leaving(_ share: StoredShare, user: String) -> StoredShare {
        var share = share
        share.participants[user]?.status = .removed
        return share
    }

    /// What a user may do in a zone through the shared database: nil unless they accepted its
    /// share and still take part.
    static func permission(of participant: StoredParticipant?) -> SharePermission? {
        guard let participant, participant.status == .accepted else { return nil }
        return participant.permission
    }

    /// The users whose shared database a write to the zone changes: those with access before or
    /// after it (who lost access learn it there: the zone is `unshared`).
    static func sharedDatabases(before: StoredShare?, after: StoredShare?) -> Set<String> {
        (before?.acceptedUsers ?? []).union(after?.acceptedUsers ?? [])
    }

    /// 403 for a zone of the shared database the caller may not use, the same whether the zone
    /// exists, was never shared with them, or their access ended, so that the answer tells
    /// nothing about another user's zones.
    static func notShared(_ zoneID: ZoneID) -> ServerError {
        ServerError(
            .accessDenied,
            reason: "zone \(zoneID.zoneName) of \(zoneID.ownerRecordName ?? "(no owner named)") is not shared with you, or your access ended: accept its share with records/accept; name shared zones with their ownerRecordName",
            zoneID: zoneID)
    }
}

extension ShareRules {
    /// The write that records a change of the share's participants in its record: the record's
    /// content as stored, `modified` by `stamp`, under a new change tag, so that the owner and
    /// every participant see the share change in the zone's changes. Nil when the record cannot be
    /// read (then the change is refused).
    static func shareRecordRewrite(_ live: StoredRecord, stamp: Record.Stamp) -> RecordWrite? {
        guard var content = try? live.content?.decoded() else { return nil }
        content.modified = stamp
        guard let stored = try? StoredContent(content) else { return nil }
        return RecordWrite(
            name: live.name, type: live.type, change: .save(content: stored, fields: content.fields, deleteSelfTargets: []),
            time: stamp.timestamp)
    }
}
