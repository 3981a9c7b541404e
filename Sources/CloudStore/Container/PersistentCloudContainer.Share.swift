import CloudStoreSync
import Foundation

extension PersistentCloudContainer {
    /// A share as this store knows it: one that this user owns (an object graph moved into a zone
    /// of its own) or one another user shared with this user (a zone mirrored through the `shared`
    /// database). See <doc:Sharing>.
    ///
    /// ```swift
    /// let share = try await container.share(folder, with: [.init(user: "_bob", permission: .readWrite)])
    /// print("send this to bob:", share.shortGUID ?? "not on the server yet")
    /// for participant in share.participants { print(participant.user, participant.permission, participant.status) }
    /// ```
    public struct Share: Sendable, Hashable, CustomStringConvertible {
        /// The zone the shared objects live in, as this user names it: without an owner for a share
        /// this user owns, with its owner for one shared with this user.
        public var zoneID: ZoneID
        /// The owner's user record name (for an object of the public database, its creator); nil
        /// when it is the current user.
        public var owner: String?
        /// The title the owner gave the share (``PersistentCloudContainer/share(_:with:publicPermission:title:timeout:)``).
        public var title: String?
        /// What a participant accepts the share by (``PersistentCloudContainer/acceptShare(shortGUID:timeout:)``);
        /// nil until the server saved the share.
        public var shortGUID: String?
        /// Who may join with the short GUID alone, uninvited: `SharePermission.none` for invited
        /// users only.
        public var publicPermission: SharePermission
        /// The owner first, then every invited user, with their permission and status.
        public var participants: [Participant]
        /// What the current user may do with the shared objects.
        public var currentUserPermission: SharePermission
        /// The entity of the shared object the share was made from, on the device that made it.
        public var rootEntityName: String?
        /// The id of the shared object the share was made from, on the device that made it.
        public var rootID: UUID?
        /// Whether a change of the share made here has not reached the server yet.
        public var hasPendingChanges: Bool

        /// Whether the current user owns the share.
        public var isOwnedByCurrentUser: Bool { owner == nil }

        /// The zone, the owner and each participant with permission and status, for logs.
        public var description: String {
            let who = participants.map { "\($0.user) (\($0.permission.rawValue), \($0.status.rawValue))" }.joined(separator: ", ")
            return "share of \(zoneID) owned by \(owner ?? "me"): \(who)"
        }
    }

    /// One person in a share.
    public struct Participant: Sendable, Hashable {
        /// The participant's user record name on the server (`_bob`).
        public var user: String
        /// What the participant may do with the shared objects.
        public var permission: SharePermission
        /// Whether the participant was invited, joined, or was removed.
        public var status: ShareParticipant.AcceptanceStatus
        /// Whether this is the share's owner.
        public var isOwner: Bool
    }

    /// A user to share with, and what they may do.
    ///
    /// ```swift
    /// let bob = PersistentCloudContainer.Invitation(user: "_bob", permission: .readWrite)
    /// ```
    public struct Invitation: Sendable, Hashable {
        /// The user's record name on the server (`_bob`).
        public var user: String
        /// `SharePermission.readOnly` or `SharePermission.readWrite`.
        public var permission: SharePermission

        /// An invitation for `user` with `permission`.
        public init(user: String, permission: SharePermission) {
            self.user = user
            self.permission = permission
        }
    }

    /// Where an object lives and what the current user may do with it.
    ///
    /// ```swift
    /// let sharing = try container.sharing(of: Note.self, id: note.id)
    /// if sharing.permission == .readOnly { disableEditing() }
    /// ```
    public struct ObjectSharing: Sendable, Hashable {
        /// The object's zone, as this user names it.
        public var zoneID: ZoneID
        /// The owner's user record name (for an object of the public database, its creator); nil
        /// when it is the current user.
        public var owner: String?
        /// What the current user may do with the object (`SharePermission.readWrite` for their own).
        public var permission: SharePermission
        /// Whether the object is in a shared zone (owned by this user or another).
        public var isShared: Bool
    }

    /// Something that happened to a share: a participant invited, joining, leaving or removed, a
    /// permission changed, the share stopped, or this user's access ended. Kept in the store's share
    /// activity log (``PersistentCloudContainer/shareActivity(after:)``) and sent as a
    /// ``Event/Kind/sharing`` event, as the "Activity" list of a shared shopping list shows it.
    public struct ShareActivity: Sendable, Hashable, CustomStringConvertible {
        /// What happened.
        public enum Change: String, Sendable, Hashable {
            /// A user was invited (not joined yet).
            case invited
            /// A user accepted the share.
            case joined
            /// A user left, or the owner removed them on another device.
            case left
            /// The owner removed the user from this device.
            case removed
            /// A participant's permission changed.
            case permissionChanged
            /// The owner stopped sharing.
            case stopped
            /// The current user can no longer use a zone shared with them: removed, the share
            /// stopped, or they left; the local copy was removed.
            case accessEnded
        }

        /// The log's sequence number (0 until stored).
        public var sequence: Int64
        /// When this store recorded it: when the change was made here or arrived from the server.
        public var date: Date
        /// The shared zone, as this user names it.
        public var zoneID: ZoneID
        /// What happened.
        public var change: Change
        /// The user concerned (nil for ``Change/stopped``).
        public var user: String?
        /// The user's permission after the change, when it has one.
        public var permission: SharePermission?

        init(
            sequence: Int64 = 0, date: Date = Date(), zoneID: ZoneID = ZoneID(zoneName: ""), change: Change, user: String?,
            permission: SharePermission?
        ) {
            self.sequence = sequence
            self.date = date
            self.zoneID = zoneID
            self.change = change
            self.user = user
            self.permission = permission
        }

        /// One line for logs: who, what, with which permission, in which zone.
        public var description: String {
            "\(user ?? "the owner") \(change.rawValue)\(permission.map { " (\($0.rawValue))" } ?? "") in \(zoneID)"
        }
    }
}
