/// What a share lets its participants do (<doc:WireProtocol> §6): a participant's `permission`, or
/// the share's `publicPermission` for anyone holding its link.
public enum SharePermission: String, Hashable, Sendable, Codable, CaseIterable {
    /// No access: as `publicPermission`, only invited users may join.
    case none = "NONE"
    case readOnly = "READ_ONLY"
    case readWrite = "READ_WRITE"
}

/// One person in a share: its owner or a user invited to it (or who joined by its link).
///
/// On the wire:
/// ```json
/// {"participantID": "p-…", "type": "USER", "permission": "READ_WRITE", "acceptanceStatus": "ACCEPTED",
///  "userIdentity": {"userRecordName": "_bob", "lookupInfo": {"userRecordName": "_bob"}}}
/// ```
/// A request that invites someone needs only `userIdentity.lookupInfo.userRecordName` and
/// `permission`; the server fills in the rest.
public struct ShareParticipant: Hashable, Sendable, Codable {
    public enum Role: String, Hashable, Sendable, Codable {
        case owner = "OWNER"
        case user = "USER"
    }

    public enum AcceptanceStatus: String, Hashable, Sendable, Codable {
        case invited = "INVITED"
        case accepted = "ACCEPTED"
        /// Removed by the owner or left: no longer has access.
        case removed = "REMOVED"
    }

    /// How a user is named. CloudStore's server looks users up by `userRecordName` only (ext);
    /// the other keys exist so that a server can refuse them by name.
    public struct LookupInfo: Hashable, Sendable, Codable {
        public var userRecordName: String?
        public var emailAddress: String?
        public var phoneNumber: String?

        public init(userRecordName: String? = nil, emailAddress: String? = nil, phoneNumber: String? = nil) {
            self.userRecordName = userRecordName
            self.emailAddress = emailAddress
            self.phoneNumber = phoneNumber
        }
    }

    public struct UserIdentity: Hashable, Sendable, Codable {
        public var userRecordName: String?
        public var lookupInfo: LookupInfo?

        public init(userRecordName: String? = nil, lookupInfo: LookupInfo? = nil) {
            self.userRecordName = userRecordName
            self.lookupInfo = lookupInfo
        }

        /// The user this identity names: the record name, else the lookup's record name.
        public var user: String? { userRecordName ?? lookupInfo?.userRecordName }
    }

    public var participantID: String?
    /// `type` on the wire.
    public var role: Role?
    public var permission: SharePermission
    public var acceptanceStatus: AcceptanceStatus?
    public var userIdentity: UserIdentity

    public init(
        participantID: String? = nil, role: Role? = nil, permission: SharePermission,
        acceptanceStatus: AcceptanceStatus? = nil, userIdentity: UserIdentity
    ) {
        self.participantID = participantID
        self.role = role
        self.permission = permission
        self.acceptanceStatus = acceptanceStatus
        self.userIdentity = userIdentity
    }

    /// An invitation of a user by record name, as a request to create or update a share carries it.
    public static func invite(_ userRecordName: String, permission: SharePermission) -> ShareParticipant {
        ShareParticipant(
            permission: permission, userIdentity: UserIdentity(lookupInfo: LookupInfo(userRecordName: userRecordName)))
    }

    /// The user this participant is.
    public var user: String? { userIdentity.user }

    enum CodingKeys: String, CodingKey {
        case participantID
        case role = "type"
        case permission, acceptanceStatus, userIdentity
    }
}

/// What a share record (`cloudkit.share`, named `cloudkit.zoneshare`) carries besides its fields,
/// flat on the record's dictionary on the wire: `shortGUID`, `publicPermission`, `owner`,
/// `participants` and `currentUserParticipant` (<doc:WireProtocol> §6).
public struct ShareMetadata: Hashable, Sendable {
    /// The record type of a share; matched case-insensitively (Apple's docs spell it `cloudKit.share`).
    public static let recordType = "cloudkit.share"
    /// The name of the share record of a zone-wide share.
    public static let zoneShareRecordName = "cloudkit.zoneshare"

    /// At least 128 random bits, URL-safe: what a participant accepts the share by. Set by the server.
    public var shortGUID: String?
    public var publicPermission: SharePermission?
    public var owner: ShareParticipant?
    public var participants: [ShareParticipant]?
    /// The caller as a participant, in answers.
    public var currentUserParticipant: ShareParticipant?

    public init(
        shortGUID: String? = nil, publicPermission: SharePermission? = nil, owner: ShareParticipant? = nil,
        participants: [ShareParticipant]? = nil, currentUserParticipant: ShareParticipant? = nil
    ) {
        self.shortGUID = shortGUID
        self.publicPermission = publicPermission
        self.owner = owner
        self.participants = participants
        self.currentUserParticipant = currentUserParticipant
    }

    /// Whether a record type names a share.
    public static func isShareType(_ recordType: String?) -> Bool {
        recordType?.lowercased() == Self.recordType
    }

    var isEmpty: Bool {
        shortGUID == nil && publicPermission == nil && owner == nil && participants == nil
            && currentUserParticipant == nil
    }
}

/// `{"value": "<shortGUID>"}`, as `records/accept` and `records/resolve` name a share.
public struct ShortGUID: Hashable, Sendable, Codable {
    public var value: String

    public init(_ value: String) { self.value = value }
}

/// `POST /public/records/accept` (join) and `POST /public/records/resolve` (preview without joining).
///
/// ```json
/// {"shortGUIDs": [{"value": "Xq3…"}]}
/// ```
public struct ShareAcceptRequest: Hashable, Sendable, Codable {
    public var shortGUIDs: [ShortGUID]

    public init(shortGUIDs: [String]) {
        self.shortGUIDs = shortGUIDs.map(ShortGUID.init)
    }
}

/// The answer to ``ShareAcceptRequest``: one result per short GUID, in order, each the share and its
/// zone or an error.
public struct ShareAcceptResponse: Hashable, Sendable, Codable {
    public struct Result: Hashable, Sendable, Codable {
        public var shortGUID: String
        /// The shared zone, with its owner: how the participant's `shared` database names it.
        public var zoneID: ZoneID?
        /// The share record, as the caller would see it after accepting.
        public var share: Record?
        public var serverErrorCode: ServerErrorCode?
        public var reason: String?

        public init(
            shortGUID: String, zoneID: ZoneID? = nil, share: Record? = nil, serverErrorCode: ServerErrorCode? = nil,
            reason: String? = nil
        ) {
            self.shortGUID = shortGUID
            self.zoneID = zoneID
            self.share = share
            self.serverErrorCode = serverErrorCode
            self.reason = reason
        }
    }

    public var results: [Result]

    public init(results: [Result]) {
        self.results = results
    }
}

extension ShareMetadata {
    /// Whether this share (as the server answers it) grants what `sent` (as a save sends it) asks:
    /// its public permission when sent, and when participants are sent, the same users besides the
    /// owner with the same permissions (removed users left out on both sides).
    public func grantsTheAccess(of sent: ShareMetadata) -> Bool {
        if let permission = sent.publicPermission, permission != (publicPermission ?? .none) { return false }
        guard let wanted = sent.participants else { return true }
        let ownerName = owner?.user
        func access(_ list: [ShareParticipant]) -> [String: SharePermission] {
            var access: [String: SharePermission] = [:]
            for participant in list where participant.role != .owner && participant.acceptanceStatus != .removed {
                if let user = participant.user, user != ownerName { access[user] = participant.permission }
            }
            return access
        }
        return access(wanted) == access(participants ?? [])
    }
}

