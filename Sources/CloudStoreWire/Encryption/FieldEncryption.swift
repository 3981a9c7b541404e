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

    /// The authenticated data: a label (one per format of field values, another for assets'
    /// bytes), then each part as its UTF-8 length (4 bytes, big-endian) and bytes, then the key ID.
    func authenticatedData(keyID: KeyID, label: [UInt8]) -> [UInt8] {
        EncryptedRecordContext(zoneName: zoneName, zoneOwner: zoneOwner, recordName: recordName, recordType: recordType, label: label)
            .authenticatedData(field: fieldName, keyID: keyID)
    }

    /// The label of an asset's bytes: a field value's ciphertext does not open as an asset's.
    static let assetLabel = Array("cloudstore.asset.v1".utf8)
}

/// The place of one record's encrypted values, with the part of their authenticated data they
/// share built once: sync seals and opens every encrypted field of every record it moves.
package struct EncryptedRecordContext: Sendable {
    package let zoneName: String
    package let zoneOwner: String
    package let recordName: String
    package let recordType: String
    /// The label and the four parts (``EncryptedFieldContext/authenticatedData(keyID:label:)``).
    private let shared: [UInt8]

    package init(zoneName: String, zoneOwner: String, recordName: String, recordType: String) {
        self.init(zoneName: zoneName, zoneOwner: zoneOwner, recordName: recordName, recordType: recordType, label: FieldEncryption.label)
    }

    init(zoneName: String, zoneOwner: String, recordName: String, recordType: String, label: [UInt8]) {
        self.zoneName = zoneName
        self.zoneOwner = zoneOwner
        self.recordName = recordName
        self.recordType = recordType
        var bytes: [UInt8] = []
        bytes.reserveCapacity(label.count + 16 + zoneName.utf8.count + zoneOwner.utf8.count + recordName.utf8.count + recordType.utf8.count)
        bytes.append(contentsOf: label)
        bytes.appendLengthPrefixed(zoneName.utf8)
        bytes.appendLengthPrefixed(zoneOwner.utf8)
        bytes.appendLengthPrefixed(recordName.utf8)
        bytes.appendLengthPrefixed(recordType.utf8)
        shared = bytes
    }

    /// The place of the record's field `name`.
    package func field(_ name: String) -> EncryptedFieldContext {
        EncryptedFieldContext(zoneName: zoneName, zoneOwner: zoneOwner, recordName: recordName, recordType: recordType, fieldName: name)
    }

    /// The authenticated data of the record's field `field` sealed with key `keyID`.
    func authenticatedData(field: String, keyID: KeyID) -> [UInt8] {
        var bytes = shared
        bytes.reserveCapacity(shared.count + 4 + field.utf8.count + KeyID.byteCount)
        bytes.appendLengthPrefixed(field.utf8)
        bytes.append(contentsOf: keyID.bytes)
        return bytes
    }
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
/// A sealed value is `0x02` (the format version), the 16-byte key ID, then ChaChaPoly's combined
/// box (12-byte nonce, ciphertext, 16-byte tag). The plaintext is a type byte and the value in
/// binary (numbers fixed-width, so a value's size does not tell its magnitude; <doc:WireProtocol>
/// §9 lists the types), so every field type round-trips. Values of format 1 (the plaintext the value's
/// JSON) still open.
///
/// ```swift
/// let key = EncryptionKey()
/// let place = EncryptedFieldContext(zoneName: "Notes", zoneOwner: "_alice", recordName: id,
///                                   recordType: "Note", fieldName: "body")
/// let sealed = try FieldEncryption.seal(.string("my diary"), with: key, for: place)
/// let value = try FieldEncryption.open(sealed, keys: [key.id: key], for: place)
/// ```
public enum FieldEncryption {
    /// The format version of the values ``seal(_:with:for:)`` writes: their first byte.
    public static let version: UInt8 = 2
    /// The format whose plaintext is the value's JSON, which ``open(_:keys:for:)`` still reads.
    static let jsonVersion: UInt8 = 1

    /// The label of the authenticated data of each format's values: a value's format byte cannot
    /// be changed without its tag failing.
    static let label = Array("cloudstore.field.v2".utf8)
    static let jsonLabel = Array("cloudstore.field.v1".utf8)

    /// The version byte, the key ID, the nonce and the tag.
    static let overhead = 1 + KeyID.byteCount + 12 + 16

    /// Seals `value` (not `null`) for `context` with `key`.
    public static func seal(_ value: FieldValue, with key: EncryptionKey, for context: EncryptedFieldContext) throws -> Data {
        try seal(value, with: key, in: context.record, field: context.fieldName)
    }

    /// Seals `value` for the field `field` of the record `record` with `key`.
    package static func seal(_ value: FieldValue, with key: EncryptionKey, in record: EncryptedRecordContext, field: String) throws -> Data {
        var plaintext: [UInt8] = []
        try SealedPlaintext.write(value, to: &plaintext)
        let box = try ChaChaPoly.seal(
            plaintext, using: key.key, nonce: NoncePool.shared.next(), authenticating: record.authenticatedData(field: field, keyID: key.id))
        // One buffer, written in place.
        return box.combined.withUnsafeBytes { combined in
            var sealed = Data(count: 1 + KeyID.byteCount + combined.count)
            sealed.withUnsafeMutableBytes { out in
                out[0] = version
                key.id.bytes.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: out[1...KeyID.byteCount]).copyMemory(from: $0) }
                UnsafeMutableRawBufferPointer(rebasing: out[(1 + KeyID.byteCount)...]).copyMemory(from: combined)
            }
            return sealed
        }
    }

    /// The ID of the key that sealed `sealed`.
    public static func keyID(of sealed: Data) throws -> KeyID {
        guard let id = KeyID(bytes: try header(of: sealed).keyID) else { throw malformed(sealed) }
        return id
    }

    /// The format version and key ID bytes of a sealed value of a format this version reads.
    private static func header(of sealed: Data) throws -> (version: UInt8, keyID: Data) {
        guard sealed.count >= overhead, let first = sealed.first, first == version || first == jsonVersion else { throw malformed(sealed) }
        return (first, sealed.dropFirst().prefix(KeyID.byteCount))
    }

    private static func malformed(_ sealed: Data) -> EncryptionError {
        EncryptionError(
            .malformed, "the encrypted value is not in format \(version) or \(jsonVersion) (\(sealed.count) bytes, first byte \(sealed.first ?? 0))")
    }

    /// Opens `sealed` for `context` with the key it names among `keys`.
    ///
    /// - Throws: ``EncryptionError`` `unknownKey` when `keys` lacks it, `authenticationFailed` when
    ///   the value was altered or belongs elsewhere, `malformed` when it is not a sealed value.
    public static func open(_ sealed: Data, keys: [KeyID: EncryptionKey], for context: EncryptedFieldContext) throws -> FieldValue {
        try open(sealed, keys: keys, in: context.record, field: context.fieldName)
    }

    /// Opens `sealed`, a value of the field `field` of the record `record`, with the key it names
    /// among `keys`.
    package static func open(_ sealed: Data, keys: [KeyID: EncryptionKey], in record: EncryptedRecordContext, field: String) throws -> FieldValue {
        let (format, id) = try header(of: sealed)
        // A zone has a key or a few: compared, not hashed.
        guard let key = keys.values.first(where: { $0.id.bytes == id }) else {
            let keyID = KeyID(bytes: id)
            throw EncryptionError(
                .unknownKey, "\(record.field(field)) is sealed with key \(keyID.map(String.init(describing:)) ?? "?"), which this device does not have",
                keyID: keyID)
        }
        let plaintext: Data
        do {
            let box = try ChaChaPoly.SealedBox(combined: sealed.dropFirst(1 + KeyID.byteCount))
            let authenticated =
                format == version
                ? record.authenticatedData(field: field, keyID: key.id) : record.field(field).authenticatedData(keyID: key.id, label: jsonLabel)
            plaintext = try ChaChaPoly.open(box, using: key.key, authenticating: authenticated)
        } catch {
            throw EncryptionError(
                .authenticationFailed,
                "\(record.field(field)) does not authenticate: its ciphertext was altered, or moved from another record or field")
        }
        if format == version {
            guard let value = SealedPlaintext.read(plaintext) else {
                throw EncryptionError(.malformed, "\(record.field(field)) opened but does not hold a field value")
            }
            return value
        }
        return try SealedPlaintext.readJSON(plaintext, of: record.field(field))
    }
}

/// The plaintext of a sealed value (<doc:WireProtocol> §9): a type byte, then the value.
///
/// - `0x01` `STRING`: its UTF-8 bytes;
/// - `0x02` `INT64`, `0x04` `TIMESTAMP` (milliseconds): 8 bytes, big-endian two's complement;
/// - `0x03` `DOUBLE`: its IEEE 754 bits, 8 bytes big-endian;
/// - `0x05` `BYTES`: the bytes;
/// - `0x00` any other type: the value's JSON, `{"type": …, "value": …}`.
enum SealedPlaintext {
    static let json: UInt8 = 0
    static let string: UInt8 = 1
    static let int64: UInt8 = 2
    static let double: UInt8 = 3
    static let timestamp: UInt8 = 4
    static let bytes: UInt8 = 5

    static func write(_ value: FieldValue, to plaintext: inout [UInt8]) throws {
        func fixed(_ tag: UInt8, _ number: UInt64) {
            plaintext.reserveCapacity(9)
            plaintext.append(tag)
            withUnsafeBytes(of: number.bigEndian) { plaintext.append(contentsOf: $0) }
        }
        switch value {
        case .string(var text):
            plaintext.reserveCapacity(1 + text.utf8.count)
            plaintext.append(string)
            text.withUTF8 { plaintext.append(contentsOf: $0) }
        case .int64(let number): fixed(int64, UInt64(bitPattern: number))
        case .double(let number) where number.isFinite: fixed(double, number.bitPattern)
        case .timestamp(let date): fixed(timestamp, UInt64(bitPattern: date.millisecondsSince1970))
        case .bytes(let data):
            plaintext.reserveCapacity(1 + data.count)
            plaintext.append(bytes)
            plaintext.append(contentsOf: data)
        default:
            // A non-finite double fails here, as JSON cannot carry it.
            var text = JSONBytes(capacity: 64)
            try value.write(to: &text)
            plaintext.append(json)
            plaintext.append(contentsOf: text.bytes)
        }
    }

    /// The value of a plaintext; nil when it is not one.
    static func read(_ plaintext: Data) -> FieldValue? {
        plaintext.withUnsafeBytes { raw -> FieldValue? in
            guard let tag = raw.first else { return nil }
            let body = UnsafeRawBufferPointer(rebasing: raw.dropFirst())
            func fixed() -> UInt64? {
                guard body.count == 8 else { return nil }
                return body.reduce(0) { $0 << 8 | UInt64($1) }
            }
            switch tag {
            case string: return String(validating: body, as: UTF8.self).map(FieldValue.string)
            case int64: return fixed().map { .int64(Int64(bitPattern: $0)) }
            case double:
                guard let bits = fixed(), case let number = Double(bitPattern: bits), number.isFinite else { return nil }
                return .double(number)
            case timestamp:
                guard let bits = fixed(), case let milliseconds = Int64(bitPattern: bits), Date.timestampRange.contains(milliseconds) else { return nil }
                return .timestamp(Date(millisecondsSince1970: milliseconds))
            case bytes: return .bytes(Data(body))
            case json: return try? readJSON(Data(body), of: nil)
            default: return nil
            }
        }
    }

    /// A value's JSON (format 1's plaintext, and format 2's for types without a binary form).
    static func readJSON(_ plaintext: Data, of field: EncryptedFieldContext?) throws -> FieldValue {
        // The byte reader on the hot path; Codable for anything it declines.
        if let value = JSONBytesReader.read(plaintext, { reader throws(JSONBytesReader.Declined) in try FieldValue(from: &reader) }) {
            return value
        }
        do {
            return try JSONDecoder().decode(FieldValue.self, from: plaintext)
        } catch {
            throw EncryptionError(.malformed, "\(field.map(String.init(describing:)) ?? "the value") opened but does not hold a field value: \(error)")
        }
    }
}

extension EncryptedFieldContext {
    /// The record part of the place.
    var record: EncryptedRecordContext {
        EncryptedRecordContext(zoneName: zoneName, zoneOwner: zoneOwner, recordName: recordName, recordType: recordType)
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
