import CloudStoreSync
import CloudStoreWire
import Crypto
import Foundation

/// One key of a shared zone, as a record in that zone (<doc:WireProtocol> §9.4): its generation,
/// the key wrapped by the owner's account key (for the owner's other devices; absent for the
/// zone's first key, which every owner device derives), and a grant for each participant it was
/// given to. It travels with the zone's changes, so each device learns a key in the fetch that
/// brings it, before or with the records sealed with it. The server stores it as opaque bytes.
struct ZoneKeyRecord: Equatable, Sendable {
    static let recordType = "CloudStoreZoneKey"
    static let recordNamePrefix = "cloudstore-zone-key-"

    var keyID: KeyID
    /// 0 for the zone's derived first key; each rotation adds one. Values are sealed with the
    /// highest generation a device holds.
    var generation: Int64
    var wrapped: WrappedKey?
    var grants: [KeyGrant]
    /// Who last wrote the record, as the server stamped it (`modified.userRecordName`): a
    /// participant takes keys only from records the zone's owner wrote.
    var writer: String?

    var recordName: String { Self.recordNamePrefix + keyID.description }

    static func isKeyRecord(_ recordName: String) -> Bool { recordName.hasPrefix(recordNamePrefix) }

    func record(in zoneID: ZoneID) throws -> Record {
        var record = Record(recordType: Self.recordType, recordID: RecordID(recordName: recordName, zoneID: zoneID))
        record.fields["keyID"] = .string(keyID.description)
        record.fields["generation"] = .int64(generation)
        if let wrapped { record.fields["wrapped"] = .bytes(try JSONEncoder().encode(wrapped)) }
        record.fields["grants"] = .bytes(try JSONEncoder().encode(grants))
        return record
    }

    /// The key record a fetched record holds.
    ///
    /// - Throws: ``EncryptionError`` `malformed`, naming the record, when it is not one or does not decode.
    init(_ record: Record) throws {
        guard record.recordType == Self.recordType, Self.isKeyRecord(record.recordName),
            case .int64(let generation)? = record.fields["generation"],
            case .bytes(let grants)? = record.fields["grants"],
            let id = KeyID(hex: String(record.recordName.dropFirst(Self.recordNamePrefix.count)))
        else {
            throw EncryptionError(.malformed, "record \(record.recordName) is not a readable zone key record")
        }
        self.keyID = id
        self.generation = generation
        self.writer = record.modified?.userRecordName ?? record.created?.userRecordName
        do {
            self.grants = try JSONDecoder().decode([KeyGrant].self, from: grants)
            if case .bytes(let wrapped)? = record.fields["wrapped"] {
                self.wrapped = try JSONDecoder().decode(WrappedKey.self, from: wrapped)
            }
        } catch {
            throw EncryptionError(.malformed, "zone key record \(record.recordName) does not decode: \(error)")
        }
    }

    init(keyID: KeyID, generation: Int64, wrapped: WrappedKey?, grants: [KeyGrant], writer: String? = nil) {
        self.keyID = keyID
        self.generation = generation
        self.wrapped = wrapped
        self.grants = grants
        self.writer = writer
    }
}

/// A user's published identity public key (``KeyWrapping/identityKey(user:from:)``): a record in
/// the public database's default zone, which only its creator may change (<doc:WireProtocol>
/// §9.4). An owner sharing encrypted attributes grants each participant the zone key to it.
enum UserKeyRecord {
    static let recordType = "CloudStoreUserKey"
    static let field = "publicKey"

    static func recordName(_ user: String) -> String { "cloudstore-user-key-" + user }

    static func record(user: String, publicKey: Curve25519.KeyAgreement.PublicKey) -> Record {
        var record = Record(recordType: recordType, recordID: RecordID(recordName: recordName(user), zoneID: .publicDefault))
        record.fields[field] = .bytes(publicKey.rawRepresentation)
        return record
    }

    static func publicKey(in record: Record) -> Curve25519.KeyAgreement.PublicKey? {
        guard case .bytes(let bytes)? = record.fields[field] else { return nil }
        return try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: bytes)
    }
}

extension KeyID {
    /// The key ID whose ``description`` is `hex`.
    init?(hex: String) {
        var bytes = Data()
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2, limitedBy: hex.endIndex) ?? hex.endIndex
            guard let byte = UInt8(hex[index..<next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        self.init(bytes: bytes)
    }
}
