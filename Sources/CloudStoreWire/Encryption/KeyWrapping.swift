import Crypto
import _CryptoExtras
import Foundation

/// A key sealed by another key, to travel through the server and rest there unreadable
/// (<doc:WireProtocol> §9): a zone key wrapped by its owner's account key, or an account key locked
/// by a passphrase.
///
/// `sealed` is ChaChaPoly's combined box of the key's 32 bytes; its authenticated data binds it to
/// its purpose, its key ID and what it is for (the zone, or the user), so a wrapped key cannot be
/// passed off as another.
public struct WrappedKey: Hashable, Sendable, Codable {
    /// The wrapped key's ID.
    public var keyID: KeyID
    /// The ID of the key that wrapped it (an account key), or nil for a passphrase.
    public var wrappingKeyID: KeyID?
    /// For a passphrase: how its key was derived.
    public var passphrase: PassphraseParameters?
    public var sealed: Data

    /// scrypt's salt and costs (`N` = `rounds`, `r` = `blockSize`, `p` = `parallelism`).
    public struct PassphraseParameters: Hashable, Sendable, Codable {
        public var salt: Data
        public var rounds: Int
        public var blockSize: Int
        public var parallelism: Int

        /// 2^15 rounds of 8 × 128-byte blocks: 32 MiB and about a tenth of a second per attempt,
        /// each guess of a passphrase costing an attacker as much.
        public static func standard() -> PassphraseParameters {
            PassphraseParameters(salt: Data(KeyID().bytes + KeyID().bytes), rounds: 1 << 15, blockSize: 8, parallelism: 1)
        }

        public init(salt: Data, rounds: Int, blockSize: Int, parallelism: Int) {
            self.salt = salt
            self.rounds = rounds
            self.blockSize = blockSize
            self.parallelism = parallelism
        }
    }
}

/// Wraps and unwraps keys: the key hierarchy of <doc:WireProtocol> §9.
///
/// ```swift
/// let account = EncryptionKey()                       // once per user, kept on the device
/// let locked = try KeyWrapping.lock(account, user: "_alice", passphrase: "correct horse")
/// let zone = EncryptionKey()                          // once per zone, and again on rotation
/// let wrapped = try KeyWrapping.wrap(zone, zoneName: "Notes", zoneOwner: "_alice", with: account)
/// // A second device: the passphrase unlocks the account key, which unwraps the zone key.
/// let unlocked = try KeyWrapping.unlock(locked, user: "_alice", passphrase: "correct horse")
/// let key = try KeyWrapping.unwrap(wrapped, zoneName: "Notes", zoneOwner: "_alice", with: unlocked)
/// ```
public enum KeyWrapping {
    /// Wraps a zone key with its owner's account key.
    public static func wrap(_ key: EncryptionKey, zoneName: String, zoneOwner: String, with account: EncryptionKey) throws -> WrappedKey {
        let box = try ChaChaPoly.seal(
            key.rawBytes, using: account.key, authenticating: zoneLabel(zoneName, zoneOwner, key.id, account.id))
        return WrappedKey(keyID: key.id, wrappingKeyID: account.id, passphrase: nil, sealed: box.combined)
    }

    /// Unwraps a zone key wrapped by ``wrap(_:zoneName:zoneOwner:with:)``.
    ///
    /// - Throws: ``EncryptionError`` `unknownKey` when `account` is not the key that wrapped it,
    ///   `authenticationFailed` when it was altered or is another zone's.
    public static func unwrap(_ wrapped: WrappedKey, zoneName: String, zoneOwner: String, with account: EncryptionKey) throws -> EncryptionKey {
        guard wrapped.wrappingKeyID == account.id else {
            throw EncryptionError(
                .unknownKey, "the key of zone \(zoneName) of \(zoneOwner) is wrapped by another account key", keyID: wrapped.wrappingKeyID)
        }
        return try open(wrapped, with: account.key, label: zoneLabel(zoneName, zoneOwner, wrapped.keyID, account.id)) {
            "the key \(wrapped.keyID) of zone \(zoneName) of \(zoneOwner) does not authenticate: altered, or another zone's"
        }
    }

    /// The first key of a zone its owner's account key derives (HKDF-SHA256): every device that
    /// holds the account key computes the same key and key ID, so none has to be stored or
    /// fetched, and two devices that start a zone at once cannot pick different keys. A key that
    /// replaces it (after a share ends, say) is random and travels wrapped
    /// (``wrap(_:zoneName:zoneOwner:with:)``).
    public static func derivedZoneKey(zoneName: String, zoneOwner: String, from account: EncryptionKey) -> EncryptionKey {
        func derive(_ purpose: String, _ count: Int) -> SymmetricKey {
            HKDF<SHA256>.deriveKey(
                inputKeyMaterial: account.key, salt: account.id.bytes,
                info: label(purpose, [zoneName, zoneOwner], [account.id]), outputByteCount: count)
        }
        let id = derive("cloudstore.zonekey.id.v1", KeyID.byteCount).withUnsafeBytes { Data($0) }
        return EncryptionKey(id: KeyID(bytes: id)!, key: derive("cloudstore.zonekey.derived.v1", 32))
    }

    /// The user's identity key for sharing, derived from their account key (HKDF-SHA256): every
    /// device holding the account key has it, none stores it. Its public half is published
    /// (<doc:WireProtocol> §9.4) so that owners of shares can grant zone keys to the user
    /// (``grant(_:zoneName:zoneOwner:to:publicKey:)``).
    public static func identityKey(user: String, from account: EncryptionKey) -> Curve25519.KeyAgreement.PrivateKey {
        let bytes = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: account.key, salt: account.id.bytes, info: label("cloudstore.identity.v1", [user], [account.id]),
            outputByteCount: 32)
        // Any 32 bytes are an X25519 private key (clamped when used).
        return bytes.withUnsafeBytes { try! Curve25519.KeyAgreement.PrivateKey(rawRepresentation: $0) }
    }

    /// Locks an account key with a passphrase the user holds, stretched with scrypt: what lets the
    /// user's next device read their encrypted fields.
    public static func lock(
        _ account: EncryptionKey, user: String, passphrase: String, parameters: WrappedKey.PassphraseParameters = .standard()
    ) throws -> WrappedKey {
        let key = try derive(passphrase, parameters)
        let box = try ChaChaPoly.seal(account.rawBytes, using: key, authenticating: accountLabel(user, account.id))
        return WrappedKey(keyID: account.id, wrappingKeyID: nil, passphrase: parameters, sealed: box.combined)
    }

    /// Unlocks an account key locked by ``lock(_:user:passphrase:parameters:)``.
    ///
    /// - Throws: ``EncryptionError`` `wrongPassphrase` when the passphrase is not the one it was
    ///   locked with (or the locked key was altered); nothing changes.
    public static func unlock(_ locked: WrappedKey, user: String, passphrase: String) throws -> EncryptionKey {
        guard let parameters = locked.passphrase else {
            throw EncryptionError(.malformed, "the account key of \(user) is not locked by a passphrase")
        }
        let key = try derive(passphrase, parameters)
        do {
            let box = try ChaChaPoly.SealedBox(combined: locked.sealed)
            let bytes = try ChaChaPoly.open(box, using: key, authenticating: accountLabel(user, locked.keyID))
            return EncryptionKey(id: locked.keyID, key: SymmetricKey(data: bytes))
        } catch {
            throw EncryptionError(.wrongPassphrase, "the passphrase does not unlock the account key of \(user): check it and try again")
        }
    }

    /// Seals a zone key for one participant of a share, to their published key agreement key
    /// (HPKE, X25519 with HKDF-SHA256 and ChaCha20-Poly1305): only their private key opens it.
    public static func grant(
        _ key: EncryptionKey, zoneName: String, zoneOwner: String, to participant: String,
        publicKey: Curve25519.KeyAgreement.PublicKey
    ) throws -> KeyGrant {
        var sender = try HPKE.Sender(
            recipientKey: publicKey, ciphersuite: .Curve25519_SHA256_ChachaPoly,
            info: grantInfo(zoneName, zoneOwner, participant, key.id))
        let sealed = try sender.seal(key.rawBytes)
        return KeyGrant(keyID: key.id, participant: participant, encapsulatedKey: sender.encapsulatedKey, sealed: sealed)
    }

    /// Opens a grant with the participant's private key.
    ///
    /// - Throws: ``EncryptionError`` `authenticationFailed` when the grant is not for this key,
    ///   this participant or this zone, or was altered.
    public static func accept(
        _ grant: KeyGrant, zoneName: String, zoneOwner: String, privateKey: Curve25519.KeyAgreement.PrivateKey
    ) throws -> EncryptionKey {
        do {
            var recipient = try HPKE.Recipient(
                privateKey: privateKey, ciphersuite: .Curve25519_SHA256_ChachaPoly,
                info: grantInfo(zoneName, zoneOwner, grant.participant, grant.keyID), encapsulatedKey: grant.encapsulatedKey)
            let bytes = try recipient.open(grant.sealed)
            return EncryptionKey(id: grant.keyID, key: SymmetricKey(data: bytes))
        } catch {
            throw EncryptionError(
                .authenticationFailed,
                "the grant of key \(grant.keyID) of zone \(zoneName) of \(zoneOwner) does not open for \(grant.participant): altered, or another's")
        }
    }

    private static func derive(_ passphrase: String, _ parameters: WrappedKey.PassphraseParameters) throws -> SymmetricKey {
        try KDF.Scrypt.deriveKey(
            from: Data(passphrase.utf8), salt: parameters.salt, outputByteCount: 32, rounds: parameters.rounds,
            blockSize: parameters.blockSize, parallelism: parameters.parallelism)
    }

    private static func open(_ wrapped: WrappedKey, with key: SymmetricKey, label: Data, _ failure: () -> String) throws -> EncryptionKey {
        do {
            let bytes = try ChaChaPoly.open(try ChaChaPoly.SealedBox(combined: wrapped.sealed), using: key, authenticating: label)
            return EncryptionKey(id: wrapped.keyID, key: SymmetricKey(data: bytes))
        } catch {
            throw EncryptionError(.authenticationFailed, failure())
        }
    }

    private static func zoneLabel(_ zoneName: String, _ zoneOwner: String, _ keyID: KeyID, _ accountID: KeyID) -> Data {
        label("cloudstore.zonekey.v1", [zoneName, zoneOwner], [keyID, accountID])
    }

    private static func accountLabel(_ user: String, _ keyID: KeyID) -> Data {
        label("cloudstore.accountkey.v1", [user], [keyID])
    }

    private static func grantInfo(_ zoneName: String, _ zoneOwner: String, _ participant: String, _ keyID: KeyID) -> Data {
        label("cloudstore.grant.v1", [zoneName, zoneOwner, participant], [keyID])
    }

    private static func label(_ purpose: String, _ parts: [String], _ ids: [KeyID]) -> Data {
        var data = Data(purpose.utf8)
        for part in parts { data.appendLengthPrefixed(part.utf8) }
        for id in ids { data.append(id.bytes) }
        return data
    }
}

/// A zone key sealed for one participant of a share (``KeyWrapping/grant(_:zoneName:zoneOwner:to:publicKey:)``).
public struct KeyGrant: Hashable, Sendable, Codable {
    public var keyID: KeyID
    /// The participant's user record name.
    public var participant: String
    /// HPKE's encapsulated key.
    public var encapsulatedKey: Data
    public var sealed: Data
}
