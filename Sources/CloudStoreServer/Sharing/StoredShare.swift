import CloudStoreWire
import Foundation

/// A zone-wide share (WireProtocol.md §6) as the storage keeps it: the settings of the share row
/// and the zone's participant rows. The share record `cloudkit.zoneshare` itself is an ordinary
/// record of the zone (its fields, tag and place in the zone's changes); who takes part, with which
/// permission, lives here, so that an access check is one indexed row.
struct StoredShare: Hashable, Sendable {
    /// What `records/accept` names the share by: 128 random bits, URL-safe base64 without padding.
    var shortGUID: String
    /// The zone's owner: the user whose private database holds the zone.
    var owner: String
    var ownerParticipantID: String
    var publicPermission: SharePermission
    /// Every user other than the owner who was ever invited to the zone's shares or joined one,
    /// by user; removed ones stay (with status ``ShareParticipant/AcceptanceStatus/removed``) so
    /// that their shared database can report the zone `unshared`.
    var participants: [String: StoredParticipant]

    /// Users who have access now.
    var acceptedUsers: Set<String> {
        Set(participants.values.filter { $0.status == .accepted }.map(\.user))
    }

    /// Participants other than removed ones: those the share's answers list and its limit counts.
    var current: [StoredParticipant] {
        participants.values.filter { $0.status != .removed }.sorted { $0.user < $1.user }
    }

    /// The share as a record's `shortGUID`, `publicPermission`, `owner`, `participants` and
    /// `currentUserParticipant` for `caller`: the owner first among the participants, removed
    /// users left out. `currentUser` overrides the caller's participant (a preview of accepting).
    func metadata(for caller: String, currentUser: ShareParticipant? = nil) -> ShareMetadata {
        let ownerParticipant = ownerAsParticipant
        let others = current.map(\.wire)
        let callerParticipant =
            currentUser
            ?? (caller == owner ? ownerParticipant : participants[caller].flatMap { $0.status == .removed ? nil : $0.wire })
        return ShareMetadata(
            shortGUID: shortGUID, publicPermission: publicPermission, owner: ownerParticipant,
            participants: [ownerParticipant] + others, currentUserParticipant: callerParticipant)
    }

    var ownerAsParticipant: ShareParticipant {
        StoredParticipant(user: owner, participantID: ownerParticipantID, permission: .readWrite, status: .accepted)
            .wire(role: .owner)
    }
}

/// One user's row in a zone's share.
struct StoredParticipant: Hashable, Sendable {
    var user: String
    var participantID: String
    /// `READ_ONLY` or `READ_WRITE`.
    var permission: SharePermission
    var status: ShareParticipant.AcceptanceStatus

    /// The participant as the wire shows it.
    var wire: ShareParticipant { wire(role: .user) }

    func wire(role: ShareParticipant.Role) -> ShareParticipant {
        ShareParticipant(
            participantID: participantID, role: role, permission: permission, acceptanceStatus: status,
            userIdentity: .init(userRecordName: user, lookupInfo: .init(userRecordName: user)))
    }
}

/// What a write does to a zone's share, applied in the transaction of the records it writes.
enum ShareChange: Hashable, Sendable {
    /// Stores the share row and every participant row of the share.
    case save(StoredShare)
    /// Removes the share row (its short GUID finds nothing any more) and stores the participant
    /// rows, every one of them removed.
    case stop(StoredShare)
}

/// A zone of a user's shared database: a zone of another user's private database whose share the
/// user accepted.
struct SharedZone: Hashable, Sendable {
    /// The owner's zone, where the data lives.
    var zone: ZoneAddress
    var stored: StoredZone
    var permission: SharePermission
}

/// Short GUIDs and participant IDs.
enum ShareIdentifiers {
    /// 128 random bits as URL-safe base64 without padding (22 characters).
    static func newShortGUID() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Whether text could be a short GUID this server made; anything else finds no share without
    /// reaching the storage.
    static func isShortGUID(_ text: String) -> Bool {
        text.utf8.count == 22
            && text.utf8.allSatisfy { byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                    || byte == 0x2D || byte == 0x5F
            }
    }

    /// A new participant ID: 128 random bits in hex.
    static func newParticipantID() -> String {
        AssetLocation.newIdentifier()
    }
}
