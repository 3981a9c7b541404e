import CloudStoreSync
import CloudStoreWire
import Foundation
import Synchronization

/// The keys this device holds to seal and open encrypted attributes: the user's account key,
/// from which each zone's key derives (``KeyWrapping/derivedZoneKey(zoneName:zoneOwner:from:)``).
/// A copy of what the key store keeps (``EncryptionKeyStore``), handed to each mirroring
/// transaction.
struct EncryptionKeyring: Sendable {
    /// The user the account key belongs to; the key serves no other (an account change).
    var user: String
    var account: EncryptionKey

    /// The owner a zone's values are bound to: always a user record name (<doc:WireProtocol>
    /// §9), this user's for a zone the device names without an owner (its own zones).
    func owner(of zoneID: ZoneID) -> String {
        zoneID.ownerRecordName ?? user
    }

    /// Zone keys derived so far: HKDF runs once per zone, not once per record.
    private let derived = ZoneKeyCache()

    init(user: String, account: EncryptionKey) {
        self.user = user
        self.account = account
    }

    /// The key of a zone of this user's, by the zone's ID as this device names it.
    func zoneKey(_ zoneID: ZoneID) -> EncryptionKey {
        derived.key(zoneID) { KeyWrapping.derivedZoneKey(zoneName: zoneID.zoneName, zoneOwner: owner(of: zoneID), from: account) }
    }
}

/// The zone keys an ``EncryptionKeyring`` derived, shared by its copies.
final class ZoneKeyCache: Sendable {
    private let keys = Mutex<[ZoneID: EncryptionKey]>([:])

    func key(_ zoneID: ZoneID, derive: () -> EncryptionKey) -> EncryptionKey {
        if let key = keys.withLock({ $0[zoneID] }) { return key }
        let key = derive()
        keys.withLock { $0[zoneID] = key }
        return key
    }
}

/// Seals the encrypted attributes of a record before upload, and opens them in a fetched record,
/// with the zone keys of an ``EncryptionKeyring``: the one place mirroring touches ciphertext
/// (<doc:EndToEndEncryption>). A pure value, driven by tests directly.
///
/// Each value is bound to its zone, record name, record type and field name
/// (``EncryptedFieldContext``): a ciphertext moved to another record or field, or altered, does not
/// open. A plain value where the schema says encrypted is refused too (an operator cannot put
/// a value of their own in). A null clears the field, as for any attribute.
struct RecordSealing: Sendable {
    /// The keys; nil before the user set up encryption on this device (or for another user).
    var keyring: EncryptionKeyring?

    static let none = RecordSealing(keyring: nil)

    /// Why a fetched record does not open.
    enum Failure: Error, Hashable, Sendable {
        /// This device does not have the key yet: the record waits for it.
        case missingKey(KeyID?)
        /// A field does not authenticate, is malformed, or is plain where the schema says
        /// encrypted: the record is refused.
        case refused(field: String, EncryptionError)

        /// One line for logs and the store: the key or field, and why.
        var problem: String {
            switch self {
            case .missingKey(let id?): "waiting for key \(id)"
            case .missingKey(nil): "waiting for the account key: set up encryption on this device"
            case .refused(let field, let error): "\(field): \(error.message)"
            }
        }
    }


    /// Whether records of `entity` need a key to upload.
    static func needsKey(_ entity: EntityDescription) -> Bool {
        entity.attributes.contains(where: \.isEncrypted)
    }

    /// Whether this device can seal records of `entity`.
    func canSeal(_ entity: EntityDescription) -> Bool {
        keyring != nil || !Self.needsKey(entity)
    }

    /// A value this device sealed: its ciphertext, and the value it holds.
    struct SealedValue: Equatable, Sendable {
        var ciphertext: Data
        var value: FieldValue
    }

    /// Replaces each encrypted attribute's value in `record` by its ciphertext, and answers what
    /// it sealed by field name (the acknowledgement reads the server's copy with it, ``open(_:of:sealedHere:)``).
    ///
    /// - Throws: ``Failure/missingKey(_:)`` without a keyring (the caller holds such records back,
    ///   ``canSeal(_:)``).
    @discardableResult
    func seal(_ record: inout Record, of entity: EntityDescription) throws -> [String: SealedValue] {
        guard Self.needsKey(entity) else { return [:] }
        guard let keyring else { throw Failure.missingKey(nil) }
        let key = keyring.zoneKey(record.recordID.zoneID)
        var sealedValues: [String: SealedValue] = [:]
        for attribute in entity.attributes where attribute.isEncrypted {
            guard let value = record.fields[attribute.name], !value.isNull else { continue }
            let sealed = try FieldEncryption.seal(value, with: key, for: context(record, attribute.name, keyring))
            record.fields[attribute.name] = .encryptedBytes(sealed)
            sealedValues[attribute.name] = SealedValue(ciphertext: sealed, value: value)
        }
        return sealedValues
    }

    /// `record` with each encrypted attribute's ciphertext replaced by its value. A ciphertext
    /// this device sealed itself (`sealedHere`, byte for byte the same) is not opened again: its
    /// value is the one sealed.
    ///
    /// - Throws: a ``Failure``: the key is missing, or a field is refused.
    func open(_ record: Record, of entity: EntityDescription, sealedHere: [String: SealedValue] = [:]) throws(Failure) -> Record {
        guard Self.needsKey(entity) else { return record }
        var opened = record
        for attribute in entity.attributes where attribute.isEncrypted {
            guard let value = record.fields[attribute.name], !value.isNull else { continue }
            guard case .encryptedBytes(let sealed) = value else {
                throw .refused(
                    field: attribute.name,
                    EncryptionError(.malformed, "the field is \(value.typeName ?? "plain") but the schema says encrypted: refused"))
            }
            if let known = sealedHere[attribute.name], known.ciphertext == sealed {
                opened.fields[attribute.name] = known.value
                continue
            }
            guard let keyring else {
                throw .missingKey((try? FieldEncryption.keyID(of: sealed)) ?? nil)
            }
            let key = keyring.zoneKey(record.recordID.zoneID)
            do {
                opened.fields[attribute.name] = try FieldEncryption.open(
                    sealed, keys: [key.id: key], for: context(record, attribute.name, keyring))
            } catch let error as EncryptionError where error.code == .unknownKey {
                throw .missingKey(error.keyID)
            } catch let error as EncryptionError {
                throw .refused(field: attribute.name, error)
            } catch {
                throw .refused(field: attribute.name, EncryptionError(.malformed, "\(error)"))
            }
        }
        return opened
    }

    /// What can be read of a record the server answered with (a save's acknowledgement): opened
    /// (its ciphertexts sent from here read as sealed, ``open(_:of:sealedHere:)``), or without its
    /// encrypted fields when they do not open (left out, as fields it does not carry).
    func readable(_ record: Record, of entity: EntityDescription, sealedHere: [String: SealedValue]) -> Record {
        guard Self.needsKey(entity) else { return record }
        if let opened = try? open(record, of: entity, sealedHere: sealedHere) { return opened }
        var readable = record
        for attribute in entity.attributes where attribute.isEncrypted { readable.fields[attribute.name] = nil }
        return readable
    }

    private func context(_ record: Record, _ field: String, _ keyring: EncryptionKeyring) -> EncryptedFieldContext {
        EncryptedFieldContext(
            zoneName: record.recordID.zoneID.zoneName, zoneOwner: keyring.owner(of: record.recordID.zoneID),
            recordName: record.recordName, recordType: record.recordType ?? "", fieldName: field)
    }
}
