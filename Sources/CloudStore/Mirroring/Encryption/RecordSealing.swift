import CloudStoreSync
import CloudStoreWire
import Crypto
import Foundation
import Logging
import Synchronization

/// The keys this device holds to seal and open encrypted attributes: the user's account key,
/// from which the first key of each of the user's zones derives
/// (``KeyWrapping/derivedZoneKey(zoneName:zoneOwner:from:)``) and their identity key for sharing
/// (``KeyWrapping/identityKey(user:from:)``), and the zone keys learned from zone key records
/// (``ZoneKeyRecord``: a share's rotated keys, and the keys of zones shared with the user).
/// A copy of what the key store keeps (``EncryptionKeyStore``), handed to each mirroring
/// transaction; the zone keys it learns are shared by its copies.
struct EncryptionKeyring: Sendable {
    /// The user the account key belongs to; the key serves no other (an account change).
    var user: String
    var account: EncryptionKey
    /// The private half of the key the user publishes (``UserKeyRecord``).
    let identity: Curve25519.KeyAgreement.PrivateKey

    private let keys = ZoneKeyCache()

    init(user: String, account: EncryptionKey) {
        self.user = user
        self.account = account
        self.identity = KeyWrapping.identityKey(user: user, from: account)
    }

    /// The owner a zone's values are bound to: always a user record name (<doc:WireProtocol>
    /// §9), this user's for a zone the device names without an owner (its own zones).
    func owner(of zoneID: ZoneID) -> String {
        zoneID.ownerRecordName ?? user
    }

    /// Whether the zone is one of this user's, whose first key the account key derives.
    func owns(_ zoneID: ZoneID) -> Bool { owner(of: zoneID) == user }

    /// The first key of a zone of this user's (derived once per zone, not once per record).
    func derivedKey(_ zoneID: ZoneID) -> EncryptionKey? {
        guard owns(zoneID) else { return nil }
        return keys.derived(zoneID) { KeyWrapping.derivedZoneKey(zoneName: zoneID.zoneName, zoneOwner: owner(of: zoneID), from: account) }
    }

    /// The key values of the zone are sealed with: the newest this device learned, else the
    /// derived one; nil in a zone shared with this user whose key has not arrived.
    func sealingKey(_ zoneID: ZoneID) -> EncryptionKey? {
        keys.newest(zoneID)?.key ?? derivedKey(zoneID)
    }

    /// The generation of ``sealingKey(_:)``: 0 for the derived key.
    func generation(_ zoneID: ZoneID) -> Int64 {
        keys.newest(zoneID)?.generation ?? 0
    }

    /// Every key of the zone this device holds, by ID: values sealed with any of them open.
    func openingKeys(_ zoneID: ZoneID) -> [KeyID: EncryptionKey] {
        var all = keys.learned(zoneID)
        if let derived = derivedKey(zoneID) { all[derived.id] = derived }
        return all
    }

    /// Learns the key a zone key record carries for this user: in a zone of this user's, unwrapped
    /// with the account key (the first key needs none); in a zone shared with this user, its grant
    /// opened with the identity key. Answers false when the record holds nothing for this user
    /// (a grant to another participant, or none yet).
    ///
    /// - Throws: ``EncryptionError`` when what is for this user does not open (altered).
    @discardableResult
    func learn(_ record: ZoneKeyRecord, in zoneID: ZoneID) throws -> Bool {
        let key: EncryptionKey
        if owns(zoneID) {
            if let wrapped = record.wrapped {
                key = try KeyWrapping.unwrap(wrapped, zoneName: zoneID.zoneName, zoneOwner: user, with: account)
            } else if let derived = derivedKey(zoneID), derived.id == record.keyID {
                key = derived
            } else {
                return false
            }
        } else {
            guard let grant = record.grants.first(where: { $0.participant == user }) else { return false }
            // Another participant could write a key record into the zone (a read-write share):
            // only the owner's count. (The operator could forge the stamp: see <doc:EndToEndEncryption>.)
            guard record.writer == owner(of: zoneID) else {
                throw EncryptionError(
                    .authenticationFailed,
                    "zone key record \(record.recordName) was written by \(record.writer ?? "an unknown user"), not the zone's owner \(owner(of: zoneID))")
            }
            key = try KeyWrapping.accept(grant, zoneName: zoneID.zoneName, zoneOwner: owner(of: zoneID), privateKey: identity)
        }
        guard key.id == record.keyID else {
            throw EncryptionError(.authenticationFailed, "zone key record \(record.recordName) holds key \(key.id): altered", keyID: key.id)
        }
        keys.learn(zoneID, key, generation: record.generation)
        return true
    }

    /// ``learn(_:in:)``, logging a key that does not open instead of throwing: the records sealed
    /// with it wait, and sync goes on.
    func learn(_ record: ZoneKeyRecord, in zoneID: ZoneID, logger: Logger) -> Bool {
        do {
            return try learn(record, in: zoneID)
        } catch {
            logger.error(
                "a zone key does not open for this user: altered, or not theirs; records sealed with it wait",
                metadata: ["zone": "\(zoneID)", "record": "\(record.recordName)", "reason": "\(error)"])
            return false
        }
    }
}

/// The zone keys an ``EncryptionKeyring`` derived and learned, shared by its copies.
final class ZoneKeyCache: Sendable {
    private struct Learned {
        var generation: Int64
        var key: EncryptionKey
    }
    private struct State {
        var derived: [ZoneID: EncryptionKey] = [:]
        var learned: [ZoneID: [KeyID: Learned]] = [:]
    }
    private let state = Mutex(State())

    func derived(_ zoneID: ZoneID, derive: () -> EncryptionKey) -> EncryptionKey {
        if let key = state.withLock({ $0.derived[zoneID] }) { return key }
        let key = derive()
        state.withLock { $0.derived[zoneID] = key }
        return key
    }

    func learn(_ zoneID: ZoneID, _ key: EncryptionKey, generation: Int64) {
        state.withLock { $0.learned[zoneID, default: [:]][key.id] = Learned(generation: generation, key: key) }
    }

    /// Whether a key is newer than another: a higher generation, or of the same one the greater
    /// key ID, so every device picks the same newest key.
    static func isNewer(_ key: (generation: Int64, id: KeyID), than other: (generation: Int64, id: KeyID)) -> Bool {
        (key.generation, key.id.description) > (other.generation, other.id.description)
    }

    /// The learned key of the highest generation (``isNewer(_:than:)``).
    func newest(_ zoneID: ZoneID) -> (generation: Int64, key: EncryptionKey)? {
        state.withLock { state in
            state.learned[zoneID]?.values.max { Self.isNewer(($1.generation, $1.key.id), than: ($0.generation, $0.key.id)) }
                .map { ($0.generation, $0.key) }
        }
    }

    func learned(_ zoneID: ZoneID) -> [KeyID: EncryptionKey] {
        state.withLock { $0.learned[zoneID]?.mapValues(\.key) ?? [:] }
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

    /// A value this device sealed: the field as sent (its ciphertext, or for an asset the
    /// sealed file's checksum and size), and the value it holds.
    struct SealedValue: Equatable, Sendable {
        var sealed: FieldValue
        var value: FieldValue

        /// Whether a field the server answered with is this value as sealed here, byte for byte.
        func isSealed(as field: FieldValue) -> Bool {
            switch (sealed, field) {
            case (.encryptedBytes(let sent), .encryptedBytes(let answered)): sent == answered
            case (.asset(let sent), .asset(let answered)): sent.fileChecksum == answered.fileChecksum && sent.size == answered.size
            default: false
            }
        }
    }

    /// Whether an attribute's value travels as an asset whose bytes are sealed (an encrypted
    /// external-storage attribute): ``sealAsset(from:to:field:of:)`` and ``openAsset(from:to:field:of:)``,
    /// with the file; ``seal(_:of:)`` and ``open(_:of:sealedHere:)`` leave it as it is.
    static func sealsFile(_ attribute: AttributeDescription) -> Bool {
        attribute.isEncrypted && attribute.allowsExternalStorage
    }

    /// Replaces each encrypted attribute's value in `record` by its ciphertext, and answers what
    /// it sealed by field name (the acknowledgement reads the server's copy with it, ``open(_:of:sealedHere:)``).
    ///
    /// - Throws: ``Failure/missingKey(_:)`` without a keyring (the caller holds such records back,
    ///   ``EncryptionKeyring/sealingKey(_:)``).
    @discardableResult
    func seal(_ record: inout Record, of entity: EntityDescription) throws -> [String: SealedValue] {
        guard Self.needsKey(entity) else { return [:] }
        guard let keyring else { throw Failure.missingKey(nil) }
        guard let key = keyring.sealingKey(record.recordID.zoneID) else { throw Failure.missingKey(nil) }
        var sealedValues = [String: SealedValue](minimumCapacity: entity.attributes.count)
        let place = context(record, keyring)
        // By index: an attribute is read in place, not copied, for each record sync seals.
        let attributes = entity.attributes
        for index in attributes.indices where attributes[index].isEncrypted && !Self.sealsFile(attributes[index]) {
            let name = attributes[index].name
            // One lookup per field: the value is replaced where it is.
            guard let slot = record.fields.index(forKey: name) else { continue }
            let value = record.fields.values[slot]
            guard !value.isNull else { continue }
            let sealed = FieldValue.encryptedBytes(try FieldEncryption.seal(value, with: key, in: place, field: name))
            record.fields.values[slot] = sealed
            sealedValues[name] = SealedValue(sealed: sealed, value: value)
        }
        return sealedValues
    }

    /// Seals the file of an encrypted asset (``sealsFile(_:)``) of `field` of `record` into a new
    /// file at `destination`, with the zone's sealing key (``AssetEncryption``): what is uploaded
    /// as the asset. Answers the sealed file's checksum and size.
    ///
    /// - Throws: ``Failure/missingKey(_:)`` without a key for the zone; the file system's errors.
    func sealAsset(from source: URL, to destination: URL, field: String, of record: Record) throws -> (fileChecksum: String, size: Int64) {
        guard let keyring, let key = keyring.sealingKey(record.recordID.zoneID) else { throw Failure.missingKey(nil) }
        return try AssetEncryption.seal(from: source, to: destination, with: key, for: context(record, keyring).field(field))
    }

    /// Opens the downloaded sealed file of an encrypted asset of `field` of `record` into a new
    /// file at `destination`, and answers the plain bytes' checksum and size.
    ///
    /// - Throws: a ``Failure``: the key is missing, or the file does not authenticate there (or
    ///   cannot be read or written: refused, its next version replaces it).
    func openAsset(from source: URL, to destination: URL, field: String, of record: Record) throws(Failure) -> (fileChecksum: String, size: Int64) {
        guard let keyring else { throw .missingKey(nil) }
        do {
            return try AssetEncryption.open(
                from: source, to: destination, keys: keyring.openingKeys(record.recordID.zoneID), for: context(record, keyring).field(field))
        } catch let error as EncryptionError {
            throw error.code == .unknownKey ? .missingKey(error.keyID) : .refused(field: field, error)
        } catch {
            throw .refused(field: field, EncryptionError(.malformed, "the asset's file could not be opened: \(error)"))
        }
    }

    /// The encrypted assets of a fetched record (``sealsFile(_:)``), still sealed: each is opened
    /// from its file (``openAsset(from:to:field:of:)``).
    ///
    /// - Throws: ``Failure/refused(field:_:)`` for a value that is not an asset where the schema
    ///   says an encrypted one.
    func sealedAssets(of record: Record, _ entity: EntityDescription) throws(Failure) -> [(field: String, asset: Asset)] {
        var assets: [(field: String, asset: Asset)] = []
        for attribute in entity.attributes where Self.sealsFile(attribute) {
            guard let value = record.fields[attribute.name], !value.isNull else { continue }
            guard case .asset(let asset) = value else {
                throw .refused(
                    field: attribute.name,
                    EncryptionError(.malformed, "the field is \(value.typeName ?? "plain") but the schema says an encrypted asset: refused"))
            }
            assets.append((attribute.name, asset))
        }
        return assets
    }

    /// `record` with each encrypted attribute's ciphertext replaced by its value. A ciphertext
    /// this device sealed itself (`sealedHere`, byte for byte the same) is not opened again: its
    /// value is the one sealed. An encrypted asset (``sealsFile(_:)``) not sealed here stays
    /// sealed: its bytes are in its file (``sealedAssets(of:_:)``).
    ///
    /// - Throws: a ``Failure``: the key is missing, or a field is refused.
    func open(_ record: Record, of entity: EntityDescription, sealedHere: [String: SealedValue] = [:]) throws(Failure) -> Record {
        guard Self.needsKey(entity) else { return record }
        var opened = record
        var keys: [KeyID: EncryptionKey]?  // the zone's keys, looked up once per record
        var place: EncryptedRecordContext?  // likewise
        let attributes = entity.attributes  // read by index, as in seal
        for index in attributes.indices where attributes[index].isEncrypted {
            let name = attributes[index].name
            // One lookup per field: the value is replaced where it is.
            guard let slot = opened.fields.index(forKey: name) else { continue }
            let value = opened.fields.values[slot]
            guard !value.isNull else { continue }
            if let known = sealedHere[name], known.isSealed(as: value) {
                opened.fields.values[slot] = known.value
                continue
            }
            if Self.sealsFile(attributes[index]) { continue }
            guard case .encryptedBytes(let sealed) = value else {
                throw .refused(
                    field: name,
                    EncryptionError(.malformed, "the field is \(value.typeName ?? "plain") but the schema says encrypted: refused"))
            }
            guard let keyring else {
                throw .missingKey((try? FieldEncryption.keyID(of: sealed)) ?? nil)
            }
            let zoneKeys = keys ?? keyring.openingKeys(record.recordID.zoneID)
            keys = zoneKeys
            let recordPlace = place ?? context(record, keyring)
            place = recordPlace
            do {
                opened.fields.values[slot] = try FieldEncryption.open(sealed, keys: zoneKeys, in: recordPlace, field: name)
            } catch let error as EncryptionError where error.code == .unknownKey {
                throw .missingKey(error.keyID)
            } catch let error as EncryptionError {
                throw .refused(field: name, error)
            } catch {
                throw .refused(field: name, EncryptionError(.malformed, "\(error)"))
            }
        }
        return opened
    }

    /// What can be read of a record the server answered with (a save's acknowledgement): opened
    /// (its ciphertexts sent from here read as sealed, ``open(_:of:sealedHere:)``), or without its
    /// encrypted fields when they do not open (left out, as fields it does not carry).
    func readable(_ record: Record, of entity: EntityDescription, sealedHere: [String: SealedValue]) -> Record {
        guard Self.needsKey(entity) else { return record }
        guard var opened = try? open(record, of: entity, sealedHere: sealedHere) else {
            var readable = record
            for attribute in entity.attributes where attribute.isEncrypted { readable.fields[attribute.name] = nil }
            return readable
        }
        // An asset sealed elsewhere is read from its file, which an answer does not bring.
        let attributes = entity.attributes  // read by index, as in seal
        for index in attributes.indices where Self.sealsFile(attributes[index]) {
            let name = attributes[index].name
            if case .asset? = record.fields[name], opened.fields[name] == record.fields[name] { opened.fields[name] = nil }
        }
        return opened
    }

    /// Where the record's values belong: what their authenticated data binds them to.
    private func context(_ record: Record, _ keyring: EncryptionKeyring) -> EncryptedRecordContext {
        EncryptedRecordContext(
            zoneName: record.recordID.zoneID.zoneName, zoneOwner: keyring.owner(of: record.recordID.zoneID),
            recordName: record.recordName, recordType: record.recordType ?? "")
    }
}
