import CloudStoreWire
import Foundation

/// The decisions of `records/accept` and `records/resolve` (WireProtocol.md §6), pure.
///
/// - An invited or accepted participant accepts with their permission; accepting again changes
///   nothing.
/// - Anyone else (a removed participant included, ext) joins with the share's `publicPermission`
///   when it is not `NONE`, and is refused `ACCESS_DENIED` when it is.
/// - A short GUID no share has (never, or the share stopped) is `NOT_FOUND`.
/// - The owner accepting their own share changes nothing (their zone is in their private database).
/// - Joining by the link when the share holds ``ShareRules/maxParticipants`` is `LIMIT_EXCEEDED`.
struct ShareAcceptance: Sendable {
    var shortGUID: String
    /// The accepting user.
    var caller: String
    /// Now, the caller and their device: the share record's `modified` when accepting changes it.
    var stamp: Record.Stamp
    var makeParticipantID: @Sendable () -> String = ShareIdentifiers.newParticipantID

    /// The share after the caller accepts it, and the caller's participant in it.
    struct Joined: Hashable, Sendable {
        var share: StoredShare
        var participant: ShareParticipant
    }

    /// What accepting `share` gives the caller (what `records/resolve` previews).
    func decide(_ share: StoredShare?) -> Result<Joined, ServerError> {
        guard let share, share.shortGUID == shortGUID else {
            return .failure(
                ServerError(
                    .notFound,
                    reason: "no share has this short GUID (it never existed, or its owner stopped sharing): ask the owner for a new link"))
        }
        if caller == share.owner { return .success(Joined(share: share, participant: share.ownerAsParticipant)) }
        var after = share
        if let row = share.participants[caller], row.status != .removed {
            after.participants[caller]?.status = .accepted
        } else if share.publicPermission != .none {
            guard share.current.count < ShareRules.maxParticipants else {
                return .failure(
                    ServerError(
                        .limitExceeded,
                        reason: "the share already has \(ShareRules.maxParticipants) participants besides its owner: ask the owner to make room"))
            }
            after.participants[caller] = StoredParticipant(
                user: caller, participantID: share.participants[caller]?.participantID ?? makeParticipantID(),
                permission: share.publicPermission, status: .accepted)
        } else {
            return .failure(
                ServerError(
                    .accessDenied,
                    reason: "you are not invited to this share (or were removed from it), and it is not open to anyone with its link: ask its owner to invite you"))
        }
        return .success(Joined(share: after, participant: after.participants[caller]?.wire ?? after.ownerAsParticipant))
    }

    /// Accepting as a write of the share's zone: the participant row and the share record's new
    /// tag, or nothing when the caller takes part already.
    func plan(_ snapshot: RecordSnapshot) -> (RecordWritePlan, Result<Joined, ServerError>) {
        let empty = RecordWritePlan(writes: [], schema: nil)
        let decision = decide(snapshot.share)
        guard case .success(let joined) = decision, joined.share != snapshot.share else { return (empty, decision) }
        guard let live = snapshot.records[ShareMetadata.zoneShareRecordName], !live.isDeleted,
            let write = ShareRules.shareRecordRewrite(live, stamp: stamp)
        else {
            return (empty, .failure(ServerError(.internalError, reason: "the share's record cannot be read: try again later")))
        }
        var plan = RecordWritePlan(writes: [write], schema: nil)
        plan.share = .save(joined.share)
        plan.sharedDatabases = ShareRules.sharedDatabases(before: snapshot.share, after: joined.share)
        return (plan, decision)
    }

    /// The rows accepting needs to see.
    static let snapshotRequest = RecordSnapshotRequest(names: [ShareMetadata.zoneShareRecordName], cascadeRoots: [])
}
