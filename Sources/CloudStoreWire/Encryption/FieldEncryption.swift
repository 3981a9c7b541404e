import Crypto
import Foundation

/// The identifier of a zone key: 16 random bytes, carried in every value the key sealed, so a key
/// can rotate and a reader picks the key a value needs (<doc:WireProtocol> §9).
public struct KeyID: Hashable, Sendable, Codable, CustomStringConvertible {
    public static let byteCount = 16

    /// The identifier's bytes.
    public let bytes: Data

    /// A new random identifier.
    public init() {
        bytes = Data(SymmetricKey(size: .bits128).withUnsafeBytes { Array($0) })
    }

    /// The identifier of `bytes`; nil unless they are ``byteCount`` long.
    public init?(bytes: Data) {
        guard bytes.count == Self.byteCount else { return nil }
        self.bytes = bytes
    }

    /// Lowercase hexadecimal, as logs and the CLI show it.
    public var description: String { bytes.map { String(format: "%02x", $0) }.joined() }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        guard let data = Data(base64Encoded: try container.decode(String.self)), let id = KeyID(bytes: data) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "a key ID is 16 bytes in base64")
        }
        self = id
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(bytes.base64EncodedString())
    }
}

/// A 256-bit key with its identifier: a zone key seals the encrypted fields of one zone, an account
/// key wraps a user's zone keys (<doc:WireProtocol> §9).
public struct EncryptionKey: Sendable {
    public let id: KeyID
    public let key: SymmetricKey

    /// A new random key with a new identifier.
    public init() {
        self.init(id: KeyID(), key: SymmetricKey(size: .bits256))
    }

    /// The key `key` (32 bytes) named `id`.
    public init(id: KeyID, key: SymmetricKey) {
        self.id = id
        self.key = key
    }

    /// The key's bytes, to store it where the app keeps secrets.
    public var rawBytes: Data { key.withUnsafeBytes { Data($0) } }

    /// The key of `rawBytes` (32 bytes, as ``rawBytes`` gives them), named `id`; nil for another length.
    public init?(id: KeyID, rawBytes: Data) {
        guard rawBytes.count == 32 else { return nil }
        self.init(id: id, key: SymmetricKey(data: rawBytes))
    }
}

/// Where an encrypted value belongs: what its authenticated data binds it to, so a value moved to
/// another zone, record, record type or field fails to open.
public struct EncryptedFieldContext: Hashable, Sendable, CustomStringConvertible {
    /// The zone's name and its owner's user record name (never nil: the owner is named even for
    /// the caller's own zones, so every participant binds the same owner).
    public var zoneName: String
    public var zoneOwner: String
    public var recordName: String
    public var recordType: String
    public var fieldName: String

    public init(zoneName: String, zoneOwner: String, recordName: String, recordType: String, fieldName: String) {
        self.zoneName = zoneName
        self.zoneOwner = zoneOwner
        self.recordName = recordName
        self.recordType = recordType
        self.fieldName = fieldName
    }

    public var description: String { "\(recordType) \(recordName).\(fieldName) in zone \(zoneName) of \(zoneOwner)" }

    /// The authenticated data: a label (one for field values, another for assets' bytes), then
    /// each part as its UTF-8 length (4 bytes, big-endian) and bytes, then the key ID.
    func authenticatedData(keyID: KeyID, label: [UInt8] = Self.label) -> [UInt8] {
        // One buffer, written in place: every sealed or opened value builds one.
        var bytes: [UInt8] = []
        bytes.reserveCapacity(
            label.count + 20 + zoneName.utf8.count + zoneOwner.utf8.count + recordName.utf8.count + recordType.utf8.count
                + fieldName.utf8.count + KeyID.byteCount)
        bytes.append(contentsOf: label)
        bytes.appendLengthPrefixed(zoneName.utf8)
        bytes.appendLengthPrefixed(zoneOwner.utf8)
        bytes.appendLengthPrefixed(recordName.utf8)
        bytes.appendLengthPrefixed(recordType.utf8)
        bytes.appendLengthPrefixed(fieldName.utf8)
        bytes.append(contentsOf: keyID.bytes)
        return bytes
    }

    static let label = Array("cloudstore.field.v1".utf8)
    /// The label of an asset's bytes: a field value's ciphertext does not open as an asset's.
    static let assetLabel = Array("cloudstore.asset.v1".utf8)
}

/// Why an encrypted value did not open.
public struct EncryptionError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Code: String, Sendable, Hashable {
        /// The value is not in the format of <doc:WireProtocol> §9 (too short, another version).
        case malformed
        /// The value was sealed with a key this reader was not given (``EncryptionError/keyID``).
        case unknownKey
        /// The value does not authenticate: altered, moved from another record or field, or sealed
        /// with another key of the same ID.
        case authenticationFailed
        /// A passphrase does not unlock the key it was given for.
        case wrongPassphrase
    }

    public var code: Code
    public var message: String
    /// For ``Code/unknownKey``, the key the value needs.
    public var keyID: KeyID?

    public init(_ code: Code, _ message: String, keyID: KeyID? = nil) {
        self.code = code
        self.message = message
        self.keyID = keyID
    }

    public var description: String { message }
}

/// Seals and opens the values of encrypted fields (`ENCRYPTED_BYTES`, <doc:WireProtocol> §9):
/// ChaCha20-Poly1305 with a zone key, bound to the value's place by its authenticated data.
///
/// A sealed value is `0x01` (the format version), the 16-byte key ID, then ChaChaPoly's combined
/// box (12-byte nonce, ciphertext, 16-byte tag). The plaintext is the field value's JSON
/// (`{"value": …, "type": …}`), so every field type round-trips.
///
/// ```swift
/// let key = EncryptionKey()
/// let place = EncryptedFieldContext(zoneName: "Notes", zoneOwner: "_alice", recordName: id,
///                                   recordType: "Note", fieldName: "body")
/// let sealed = try FieldEncryption.seal(.string("my diary"), with: key, for: place)
/// let value = try FieldEncryption.open(sealed, keys: [key.id: key], for: place)
/// ```
public enum FieldEncryption {
    /// The format version, the first byte of a sealed value.
    public static let version: UInt8 = 1

    /// Seals `value` (not `null`) for `context` with `key`.
    public static func seal(_ value: FieldValue, with key: EncryptionKey, for context: EncryptedFieldContext) throws -> Data {
        // The value's wire JSON, written straight to bytes (sync seals every encrypted field).
        var json = JSONBytes(capacity: 64)
        try value.write(to: &json)
        let box = try ChaChaPoly.seal(
            json.bytes, using: key.key, nonce: NoncePool.shared.next(), authenticating: context.authenticatedData(keyID: key.id))
        let combined = box.combined
        var sealed = Data(capacity: 1 + KeyID.byteCount + combined.count)
        sealed.append(version)
        sealed.append(key.id.bytes)
        sealed.append(combined)
        return sealed
    }

    /// The ID of the key that sealed `sealed`.
    public static func keyID(of sealed: Data) throws -> KeyID {
        let minimum = 1 + KeyID.byteCount + 12 + 16
        guard sealed.count >= minimum, sealed.first == version,
            let id = KeyID(bytes: sealed.dropFirst().prefix(KeyID.byteCount))
        else {
            throw EncryptionError(
                .malformed, "the encrypted value is not in format \(version) (\(sealed.count) bytes, first byte \(sealed.first ?? 0))")
        }
        return id
    }

    /// Opens `sealed` for `context` with the key it names among `keys`.
    ///
    /// - Throws: ``EncryptionError`` `unknownKey` when `keys` lacks it, `authenticationFailed` when
    ///   the value was altered or belongs elsewhere, `malformed` when it is not a sealed value.
    public static func open(_ sealed: Data, keys: [KeyID: EncryptionKey], for context: EncryptedFieldContext) throws -> FieldValue {
        let id = try keyID(of: sealed)
        guard let key = keys[id] else {
            throw EncryptionError(.unknownKey, "\(context) is sealed with key \(id), which this device does not have", keyID: id)
        }
        let plaintext: Data
        do {
            let box = try ChaChaPoly.SealedBox(combined: sealed.dropFirst(1 + KeyID.byteCount))
            plaintext = try ChaChaPoly.open(box, using: key.key, authenticating: context.authenticatedData(keyID: id))
        } catch {
            throw EncryptionError(
                .authenticationFailed,
                "\(context) does not authenticate: its ciphertext was altered, or moved from another record or field")
        }
        // The byte reader on the hot path; Codable for anything it declines.
        if let value = JSONBytesReader.read(plaintext, { reader throws(JSONBytesReader.Declined) in try FieldValue(from: &reader) }) {
            return value
        }
        do {
            return try JSONDecoder().decode(FieldValue.self, from: plaintext)
        } catch {
            throw EncryptionError(.malformed, "\(context) opened but does not hold a field value: \(error)")
        }
    }
}

extension RangeReplaceableCollection<UInt8> {
    /// Appends `part`'s length (4 bytes, big-endian), then `part`.
    mutating func appendLengthPrefixed(_ part: some Collection<UInt8>) {
        let count = UInt32(part.count)
        append(UInt8(count >> 24))
        append(UInt8(count >> 16 & 0xff))
        append(UInt8(count >> 8 & 0xff))
        append(UInt8(count & 0xff))
        append(contentsOf: part)
    }
}
