import CloudStoreSync
import Foundation
import GRDB

extension CloudMirror {
    /// Shares an object's graph: one transaction moves it into a zone of its own and records the
    /// share's save; then the private engine sends until the server saved the share.
    func share(
        _ root: ObjectKey, with participants: [String: SharePermission], publicPermission: SharePermission, title: String?,
        timeout: Duration
    ) async throws -> MirrorZone {
        guard engine != nil else { throw ContainerError.localOnly }
        let zoneID = ZoneID(zoneName: MirrorZone.shareZoneName(root: root.id, primary: self.zoneID))
        guard !publicEntities.contains(root.entityName) else {
            throw ContainerError.sharing(
                "\(root.entityName) \(root.id.uuidString) is in the public database, where every user reads it already: share private objects only")
        }
        // With encrypted attributes, the participants get the zone's key: checked before anything
        // moves; a change that removes someone rotates the key before the server removes them.
        let existing = try await store.read { try Ledger($0.db).zone(zoneID) }
        let keys = try await zoneKeyPlan(for: existing, participants: Set(participants.keys), publicPermission: publicPermission)
        let rotatesFirst = existing?.serverState == .saved && keys.map { if case .rotate = $0.plan { true } else { false } } == true
        if let keys, rotatesFirst { try await applyZoneKeyPlan(keys.plan, keys: keys.keys, in: zoneID) }
        let schema = schema
        let change = PendingShareChange.save(participants: participants, publicPermission: publicPermission, title: title)
        try await perform { write, effects in
            let context = write.context
            guard try context.exists(entityName: root.entityName, id: root.id) else {
                throw ContainerError.sharing(
                    "\(root.entityName) \(root.id.uuidString) does not exist in this store: save it before sharing it")
            }
            let graph = try context.shareGraph(of: root, in: schema)
            for member in graph {
                let zone = try write.ledger.find(member.id.uuidString)?.zone ?? .primary
                if let owner = zone.owner {
                    throw ContainerError.sharing(
                        "\(member.entityName) \(member.id.uuidString) is shared with you by \(owner): only its owner can share it")
                }
                if !zone.isPrimary, zone.name != zoneID.zoneName {
                    throw ContainerError.sharing(
                        "\(member.entityName) \(member.id.uuidString) is already in another share (zone \(zone.name ?? "")): a share holds its object graph whole; share that object's root, or stop that share first")
                }
            }
            var zone =
                try write.ledger.zone(zoneID)
                ?? MirrorZone(zoneID: zoneID, role: .ownedShare, permission: .readWrite, serverState: .unsaved, root: root)
            zone.pendingShare = change
            try write.save(zone, &effects)
            try write.move(graph, to: zone.key, &effects)
        }
        logger.notice("sharing an object", metadata: ["zone": "\(zoneID)", "record": "\(root.id)", "count": "\(participants.count)"])
        let zone = try await sendShareChange(in: zoneID, scope: .private, timeout: timeout)
        // The zone exists on the server now: its key record goes into it.
        if let keys, !rotatesFirst { try await applyZoneKeyPlan(keys.plan, keys: keys.keys, in: zoneID) }
        return zone
    }

    /// Records a change of a share this user owns (participants, public permission) or its end,
    /// and sends it.
    func changeShare(
        _ zoneID: ZoneID, timeout: Duration, _ change: @escaping @Sendable (MirrorZone) throws -> PendingShareChange
    ) async throws -> MirrorZone {
        guard engine != nil else { throw ContainerError.localOnly }
        if zoneID.ownerRecordName == nil, let zone = try await store.read({ try Ledger($0.db).zone(zoneID) }) {
            // With encrypted attributes: the key is granted, or rotated, before the server
            // removes anyone, so what is written after the removal is sealed with a key they lack.
            let (next, publicPermission): (Set<String>?, SharePermission) =
                switch try change(zone) {
                case .save(let participants, let publicPermission, _): (Set(participants.keys), publicPermission)
                case .delete: (nil, .none)
                }
            if let keys = try await zoneKeyPlan(for: zone, participants: next, publicPermission: publicPermission) {
                try await applyZoneKeyPlan(keys.plan, keys: keys.keys, in: zoneID)
            }
        }
        try await perform { write, effects in
            guard var zone = try write.ledger.zone(zoneID) else {
                throw ContainerError.sharing("this store has no share in zone \(zoneID): list its shares with shares()")
            }
            zone.pendingShare = try change(zone)
            zone.shareRefusal = nil
            try write.save(zone, &effects)
        }
        return try await sendShareChange(in: zoneID, scope: zoneID.ownerRecordName == nil ? .private : .shared, timeout: timeout)
    }

    /// Joins a share by its short GUID: the server adds this user, the zone is mirrored through the
    /// shared database from now on, and its objects are fetched before this returns.
    func acceptShare(shortGUID: String) async throws -> MirrorZone {
        try await checkCanSync()
        guard let shared = engines[.shared]?.engine else { throw ContainerError.localOnly }
        let answer = try await shared.database.acceptShares(ShareAcceptRequest(shortGUIDs: [shortGUID]))
        guard let result = answer.results.first else {
            throw ContainerError.sharing("the server answered no result for share \(shortGUID); try again")
        }
        guard let zoneID = result.zoneID, let record = result.share else {
            throw ContainerError.sharing(
                "the share \(shortGUID) could not be accepted: \(result.reason ?? result.serverErrorCode?.rawValue ?? "no reason given")")
        }
        try await perform { write, effects in
            try write.adoptZone(zoneID, &effects)
            var share = record
            share.recordName = ShareMetadata.zoneShareRecordName
            share.zoneID = zoneID
            try write.applyShareRecord(share, &effects)
        }
        logger.notice("accepted a share", metadata: ["zone": "\(zoneID)"])
        try await fetchNow()
        guard let zone = try await store.read({ try Ledger($0.db).zone(zoneID) }) else {
            throw ContainerError.sharing("the share \(shortGUID) was accepted but its zone \(zoneID) went away meanwhile")
        }
        return zone
    }

    /// Leaves a share another user owns: the server ends this user's access, and the local copy
    /// goes (with any change not uploaded logged in the conflict log).
    func leaveShare(_ zoneID: ZoneID, timeout: Duration) async throws {
        guard zoneID.ownerRecordName != nil else {
            throw ContainerError.sharing(
                "zone \(zoneID) is a share you own: stop sharing it (stopSharing) instead of leaving it")
        }
        _ = try await changeShare(zoneID, timeout: timeout) { _ in .delete }
        try await fetchNow()
    }

    /// Sends until the share change of `zoneID` is on the server, retrying transient failures
    /// until `timeout`; answers the zone as it is then.
    private func sendShareChange(in zoneID: ZoneID, scope: DatabaseScope, timeout: Duration) async throws -> MirrorZone {
        try await checkCanSync()
        guard let engine = engines[scope]?.engine else { throw ContainerError.localOnly }
        return try await retrying(timeout: timeout) {
            try await self.containerErrors { try await engine.sendChanges(SyncEngine.SendChangesOptions()) }
            let zone = try await self.store.read { try Ledger($0.db).zone(zoneID) }
            if let refusal = zone?.shareRefusal {
                // Read once: the zone's row forgets it.
                try await self.perform { write, _ in
                    guard var row = try write.ledger.zone(zoneID) else { return }
                    row.shareRefusal = nil
                    try write.ledger.save(row)
                }
                throw ContainerError.sharing(
                    "the server refused the share of zone \(zoneID): \(refusal.reason ?? refusal.serverErrorCode.rawValue)")
            }
            guard let zone else { throw ContainerError.sharing("zone \(zoneID) is no longer mirrored by this store") }
            return zone.pendingShare == nil ? zone : nil
        }
    }
}
