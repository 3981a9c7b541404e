import CloudStoreSync
import Foundation
import GRDB

extension PersistentCloudContainer {
    /// Shares an object and what belongs to it with other users, as
    /// `NSPersistentCloudKitContainer.share(_:to:)` does: the object and the destinations of its
    /// cascade relationships (a `Folder` and its `notes`, recursively) move into a zone of their
    /// own, with a zone-wide share, in one unit of work that changes no object (history records
    /// nothing); then the share is sent and this returns once the server saved it, with its short
    /// GUID for the people invited. Objects added to the graph later (a new note in the folder) are
    /// shared too. See <doc:Sharing>.
    ///
    /// ```swift
    /// let share = try await container.share(folder, with: [
    ///     .init(user: "_bob", permission: .readWrite),
    ///     .init(user: "_carol", permission: .readOnly),
    /// ])
    /// sendInvitation(share.shortGUID!)   // bob and carol accept it with acceptShare(shortGUID:)
    /// ```
    ///
    /// Sharing an object already shared updates that share's participants.
    ///
    /// - Parameters:
    ///   - object: the object to share; it must be saved in this store and not be part of another share.
    ///   - participants: the users to invite, by user record name, each `READ_ONLY` or `READ_WRITE`.
    ///   - publicPermission: what anyone holding the short GUID may do without an invitation
    ///     (`.none`: invited users only).
    ///   - title: stored in the share record, for invitees to see before joining.
    ///   - timeout: how long to retry a server that cannot be reached.
    /// With encrypted attributes (<doc:EndToEndEncryption>), each participant is granted the zone's
    /// key; a change that removes a participant rotates it.
    ///
    /// - Throws: ``ContainerError/Code/sharing`` for bad input (no such object, a user named twice,
    ///   permission `NONE`, part of another share) or a refusal by the server (an unknown user);
    ///   with encrypted attributes, for a participant who has not set up encryption or a public
    ///   permission, and ``ContainerError/Code/encryptionKeyNeeded`` before this device has;
    ///   ``ContainerError/Code/timedOut`` when the server stayed unreachable: the graph
    ///   is in its zone and the share is sent when the server can be reached
    ///   (``shares()`` shows it with ``Share/hasPendingChanges``).
    public func share<E: Entity>(
        _ object: E, with participants: [Invitation], publicPermission: SharePermission = .none, title: String? = nil,
        timeout: Duration = .seconds(60)
    ) async throws -> Share {
        try await share(
            entityName: E.entityName, id: object.id, with: participants, publicPermission: publicPermission, title: title,
            timeout: timeout)
    }

    /// Shares the object `id` of `entityName` and its graph; see ``share(_:with:publicPermission:title:timeout:)``.
    public func share(
        entityName: String, id: UUID, with participants: [Invitation], publicPermission: SharePermission = .none,
        title: String? = nil, timeout: Duration = .seconds(60)
    ) async throws -> Share {
        guard let entity = schema.entity(named: entityName), entity.isMirrored else {
            throw ContainerError.sharing(
                "\(entityName) is not a mirrored entity of schema \(schema.name): share objects of an entity the server mirrors")
        }
        let invitations = try Self.checkedInvitations(participants)
        let zone = try await mirror.share(
            ObjectKey(entityName: entityName, id: id), with: invitations, publicPermission: publicPermission, title: title,
            timeout: timeout)
        return try await publicShare(zone)
    }

    /// Replaces a share's participants (those left out are removed) and, when given, its public
    /// permission; only its owner can. Returns once the server saved the change.
    ///
    /// ```swift
    /// let updated = try await container.updateShare(share, participants: [.init(user: "_carol", permission: .readOnly)])
    /// ```
    @discardableResult
    public func updateShare(
        _ share: Share, participants: [Invitation], publicPermission: SharePermission? = nil, timeout: Duration = .seconds(60)
    ) async throws -> Share {
        guard share.isOwnedByCurrentUser else {
            throw ContainerError.sharing(
                "the share of zone \(share.zoneID) belongs to \(share.owner ?? "another user"): only its owner can change its participants")
        }
        let invitations = try Self.checkedInvitations(participants)
        let zone = try await mirror.changeShare(share.zoneID, timeout: timeout) { zone in
            let current: SharePermission = zone.share?.share?.publicPermission ?? .none
            var title: String?
            if case .string(let value)? = zone.share?.fields["title"] { title = value }
            return .save(participants: invitations, publicPermission: publicPermission ?? current, title: title)
        }
        return try await publicShare(zone)
    }

    /// Removes one participant from a share this user owns; their copy goes from their devices.
    /// With encrypted attributes the zone's key rotates first: what is written afterwards is sealed
    /// with a key they never receive.
    ///
    /// ```swift
    /// try await container.removeParticipant("_bob", from: share)
    /// ```
    @discardableResult
    public func removeParticipant(_ user: String, from share: Share, timeout: Duration = .seconds(60)) async throws -> Share {
        let remaining = share.participants.filter { !$0.isOwner && $0.user != user && $0.status != .removed }
        return try await updateShare(
            share, participants: remaining.map { Invitation(user: $0.user, permission: $0.permission) }, timeout: timeout)
    }

    /// Stops sharing: every participant loses access at once and their copies go. The objects stay
    /// in this store, in their zone.
    public func stopSharing(_ share: Share, timeout: Duration = .seconds(60)) async throws {
        guard share.isOwnedByCurrentUser else {
            throw ContainerError.sharing(
                "the share of zone \(share.zoneID) belongs to \(share.owner ?? "another user"): leave it with leaveShare instead")
        }
        _ = try await mirror.changeShare(share.zoneID, timeout: timeout) { _ in .delete }
    }

    /// Joins the share a short GUID names (the link its owner sent), as `acceptShareInvitations`:
    /// its zone is mirrored through the shared database from now on, and its objects are in this
    /// store when this returns.
    ///
    /// ```swift
    /// let share = try await container.acceptShare(shortGUID: guid)
    /// let folders = try await container.store.read { try $0.fetch(Folder.self) }   // alice's folder is here
    /// ```
    ///
    /// - Throws: ``ContainerError/Code/sharing`` with the server's reason when the short GUID names
    ///   no share or this user may not join it.
    /// `shortGUID` may also be a link that carries it, as apps send them: its last path component
    /// (`https://example.com/share/Xq3…`) or a `shortGUID` query item (`…?shortGUID=Xq3…`).
    public func acceptShare(shortGUID: String, timeout: Duration = .seconds(60)) async throws -> Share {
        let guid = Self.shortGUID(fromLink: shortGUID)
        guard !guid.isEmpty else { throw ContainerError.sharing("the short GUID is empty: pass the one the share's owner sent") }
        let zone = try await mirror.acceptShare(shortGUID: guid)
        return try await publicShare(zone)
    }

    /// Leaves a share another user owns: this user's access ends at once and the local copy goes;
    /// changes not uploaded yet are logged in the conflict log.
    public func leaveShare(_ share: Share, timeout: Duration = .seconds(60)) async throws {
        try await mirror.leaveShare(share.zoneID, timeout: timeout)
    }

    /// The shares of this store: those this user owns and those shared with this user.
    ///
    /// ```swift
    /// for share in try container.shares() { print(share) }
    /// ```
    public func shares() throws -> [Share] {
        try Self.shares(in: store)
    }

    /// The shares a store holds (the CLI's `shares`); the store may be opened for inspection.
    public static func shares(in store: PersistentStore) throws -> [Share] {
        try store.read { context in
            guard try context.db.tableExists("cloudstore_mirror_zone") else { return [] }
            let ledger = Ledger(context.db)
            let user = try ledger.state(.userRecordName, as: String.self)
            return try ledger.sharedZones().map { Share($0, currentUser: user) }
        }
    }

    /// Where an object lives and what the current user may do with it.
    public func sharing<E: Entity>(of type: E.Type, id: UUID) throws -> ObjectSharing {
        try sharing(entityName: E.entityName, id: id)
    }

    /// Where the object `id` of `entityName` lives and what the current user may do with it.
    public func sharing(entityName: String, id: UUID) throws -> ObjectSharing {
        let (primary, initial) = (zoneID, mirror.setup.publicEntities.initialZone(of: entityName))
        return try store.read { context in
            let zone = try Ledger(context.db).find(id.uuidString)?.zone ?? initial
            return try MirrorStatus.sharing(context.db, of: zone, recordName: id.uuidString, primary: primary)
        }
    }

    /// Who joined, left, was invited or removed, oldest first, after a sequence number: the
    /// "Activity" list of a shared list. Each entry was also sent as a ``Event/Kind/sharing`` event.
    public func shareActivity(after sequence: Int64 = 0) throws -> [ShareActivity] {
        try Self.shareActivity(in: store, after: sequence)
    }

    /// The share activity log of a store (the CLI's `shares`).
    public static func shareActivity(in store: PersistentStore, after sequence: Int64 = 0) throws -> [ShareActivity] {
        try store.read { try $0.db.shareActivity(after: sequence) }
    }

    private func publicShare(_ zone: MirrorZone) async throws -> Share {
        let user = try await store.read { try Ledger($0.db).state(.userRecordName, as: String.self) }
        return Share(zone, currentUser: user)
    }

    /// The short GUID a link carries (its `shortGUID` query item, else its last path component), or
    /// the text itself when it is not a link.
    static func shortGUID(fromLink text: String) -> String {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard trimmed.contains("/"), let components = URLComponents(string: trimmed) else { return trimmed }
        if let item = components.queryItems?.first(where: { $0.name == "shortGUID" })?.value, !item.isEmpty {
            return item
        }
        return components.path.split(separator: "/").last.map(String.init) ?? trimmed
    }

    /// The invitations as the share record names them, refusing what the server would refuse.
    static func checkedInvitations(_ participants: [Invitation]) throws -> [String: SharePermission] {
        var invitations: [String: SharePermission] = [:]
        for participant in participants {
            let user = participant.user.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !user.isEmpty else {
                throw ContainerError.sharing("a participant names no user: invite users by their user record name (\"_bob\")")
            }
            guard participant.permission != .none else {
                throw ContainerError.sharing("participant \(user) needs permission readOnly or readWrite, not none")
            }
            guard invitations.updateValue(participant.permission, forKey: user) == nil else {
                throw ContainerError.sharing("participant \(user) is named twice: name each user once")
            }
        }
        return invitations
    }
}

extension PersistentCloudContainer.Share {
    init(_ zone: MirrorZone, currentUser: String?) {
        let metadata = zone.share?.share
        zoneID = zone.zoneID
        owner = zone.zoneID.ownerRecordName
        shortGUID = metadata?.shortGUID
        if case .string(let value)? = zone.share?.fields["title"] { title = value }
        publicPermission = metadata?.publicPermission ?? .none
        participants = zone.participants.compactMap { participant in
            guard let user = participant.user else { return nil }
            return PersistentCloudContainer.Participant(
                user: user, permission: participant.permission, status: participant.acceptanceStatus ?? .invited,
                isOwner: participant.role == .owner || user == metadata?.owner?.user)
        }
        currentUserPermission = zone.role == .ownedShare ? .readWrite : zone.permission ?? .readOnly
        rootEntityName = zone.root?.entityName
        rootID = zone.root?.id
        hasPendingChanges = zone.pendingShare != nil
    }
}
