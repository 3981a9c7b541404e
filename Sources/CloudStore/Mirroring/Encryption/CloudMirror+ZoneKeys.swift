import CloudStoreSync
import CloudStoreWire
import Crypto
import Foundation

/// What a change of a share this user owns does to the zone's key, when the schema has encrypted
/// attributes (<doc:EndToEndEncryption>): a pure decision, driven by tests directly.
///
/// The participants a change keeps are granted the zone's current key; a change that removes
/// anyone (or stops sharing) rotates it first: a new random key, granted to those who stay only,
/// seals every later write, so a removed participant's devices cannot read what is written after.
enum ZoneKeyPlan: Equatable, Sendable {
    /// Grant the current key to these participants (none removed).
    case grant([String])
    /// A new key for the zone, granted to these participants (possibly none).
    case rotate(grantedTo: [String])

    /// The plan for a change from the participants the share has (`current`, the owner left out)
    /// to `next` (nil: the share ends).
    static func plan(current: Set<String>, next: Set<String>?) -> ZoneKeyPlan {
        guard let next else { return .rotate(grantedTo: []) }
        return current.isSubset(of: next) ? .grant(next.sorted()) : .rotate(grantedTo: next.sorted())
    }

    var participants: [String] {
        switch self {
        case .grant(let users), .rotate(let users): users
        }
    }
}

extension CloudMirror {
    /// Learns the keys of the zone key records the store keeps (``ZoneKeyRecord``): those fetched
    /// before this device had the account key, or before it restarted.
    func learnStoredZoneKeys(_ keyring: EncryptionKeyring) async throws {
        for (zoneID, record) in try await store.read({ try $0.db.zoneKeyRecords() }) {
            _ = keyring.learn(record, in: zoneID, logger: logger)
        }
    }

    /// Publishes the user's identity public key (``UserKeyRecord``) unless the key directory holds
    /// it already, so owners of shares can grant this user their zone keys.
    func publishIdentityKey(_ keyring: EncryptionKeyring) async throws {
        guard let directory = keyDirectory else { return }
        let publicKey = keyring.identity.publicKey
        if try await publishedKey(of: keyring.user)?.rawRepresentation == publicKey.rawRepresentation { return }
        let answer = try await directory.modifyRecords(
            RecordsModifyRequest(
                zoneID: .publicDefault,
                operations: [.init(.forceReplace, UserKeyRecord.record(user: keyring.user, publicKey: publicKey))]))
        if case .error(let error)? = answer.records.first {
            throw ContainerError.syncFailed(PersistentCloudContainer.SyncFailure(error))
        }
        logger.notice("published the identity key for sharing", metadata: ["user": "\(keyring.user)"])
    }

    /// The identity public key `user` published, or nil.
    private func publishedKey(of user: String) async throws -> Curve25519.KeyAgreement.PublicKey? {
        guard let directory = keyDirectory else { return nil }
        let answer = try await directory.lookupRecords(
            RecordsLookupRequest(zoneID: .publicDefault, recordNames: [UserKeyRecord.recordName(user)]))
        guard case .value(let record)? = answer.records.first else { return nil }
        return UserKeyRecord.publicKey(in: record)
    }

    /// The zone key plan for a change of a share this user owns, checked before anything changes:
    /// nil when the schema has no encrypted attributes.
    ///
    /// - Throws: ``ContainerError`` `encryptionKeyNeeded` before encryption is set up on this
    ///   device; `sharing` for a public permission (a user with only the link has no key) or a
    ///   participant who has published no identity key yet.
    func zoneKeyPlan(
        for zone: MirrorZone?, participants next: Set<String>?, publicPermission: SharePermission
    ) async throws -> (plan: ZoneKeyPlan, keys: [String: Curve25519.KeyAgreement.PublicKey])? {
        guard !entitiesNeedingKey.isEmpty else { return nil }
        // The keyring must be the current user's (a store that has not synced yet knows no user:
        // the keyring is the one setUpEncryption made for the caller).
        let user = try await store.read { try Ledger($0.db).state(.userRecordName, as: String.self) }
        guard let keyring, keyring.user == user ?? keyring.user else {
            throw ContainerError(
                .encryptionKeyNeeded,
                "schema \(schema.name) has encrypted attributes: call setUpEncryption(passphrase:) on this device before sharing, so the participants can be given the key")
        }
        if next != nil, publicPermission != .none {
            throw ContainerError.sharing(
                "schema \(schema.name) has encrypted attributes, which a user holding only the link could not read: share with publicPermission .none and invite each participant by name")
        }
        let current = Set(zone?.participants.filter { $0.role != .owner && $0.acceptanceStatus != .removed }.compactMap(\.user) ?? [])
        let plan = ZoneKeyPlan.plan(current: current, next: next.map { $0.subtracting([keyring.user]) })
        var keys: [String: Curve25519.KeyAgreement.PublicKey] = [:]
        var missing: [String] = []
        for user in plan.participants {
            if let key = try await publishedKey(of: user) { keys[user] = key } else { missing.append(user) }
        }
        guard missing.isEmpty else {
            throw ContainerError.sharing(
                "\(missing.joined(separator: ", ")) \(missing.count == 1 ? "has" : "have") not set up encryption yet, so the encrypted attributes could not be shared with them: ask them to call setUpEncryption(passphrase:) once, then share again (nothing changed)")
        }
        return (plan, keys)
    }

    /// Carries out a zone key plan in a zone of this user's: saves the zone key record (a new key
    /// when rotating, wrapped by the account key for the user's other devices) with a grant for
    /// each participant, keeps it and learns it; from then on this device seals the zone's values
    /// with that key.
    func applyZoneKeyPlan(_ plan: ZoneKeyPlan, keys: [String: Curve25519.KeyAgreement.PublicKey], in zoneID: ZoneID) async throws {
        guard let keyring, let database = databases[.private] else { throw ContainerError.localOnly }
        let owner = keyring.owner(of: zoneID)
        let key: EncryptionKey
        var generation = keyring.generation(zoneID)
        var wrapped: WrappedKey?
        switch plan {
        case .grant:
            // A zone of this user's always has one: its derived key, or the newest learned.
            guard let current = keyring.sealingKey(zoneID) else {
                throw ContainerError(.encryptionKeyNeeded, "this device has no key for zone \(zoneID): it is not this user's")
            }
            key = current
            if key.id != keyring.derivedKey(zoneID)?.id {
                wrapped = try KeyWrapping.wrap(key, zoneName: zoneID.zoneName, zoneOwner: owner, with: keyring.account)
            }
        case .rotate:
            key = EncryptionKey()
            generation += 1
            wrapped = try KeyWrapping.wrap(key, zoneName: zoneID.zoneName, zoneOwner: owner, with: keyring.account)
        }
        let grants = try plan.participants.compactMap { user in
            try keys[user].map { try KeyWrapping.grant(key, zoneName: zoneID.zoneName, zoneOwner: owner, to: user, publicKey: $0) }
        }
        let value = ZoneKeyRecord(keyID: key.id, generation: generation, wrapped: wrapped, grants: grants)
        let record = try value.record(in: zoneID)
        let answer = try await database.modifyRecords(RecordsModifyRequest(zoneID: zoneID, operations: [.init(.forceReplace, record)]))
        switch answer.records.first {
        case .value(let saved)?:
            try await perform { write, _ in try write.db.saveZoneKeyRecord(saved, in: zoneID) }
        case .error(let error)?:
            throw ContainerError.syncFailed(PersistentCloudContainer.SyncFailure(error))
        case nil:
            throw ContainerError(.encryptionKeyStore, "the server did not answer the save of the key of zone \(zoneID); try again")
        }
        try keyring.learn(value, in: zoneID)
        let rotated = if case .rotate = plan { true } else { false }
        logger.notice(
            rotated ? "rotated a share's zone key" : "granted a share's zone key",
            metadata: ["zone": "\(zoneID)", "key": "\(key.id)", "generation": "\(generation)", "count": "\(grants.count)"])
    }
}
