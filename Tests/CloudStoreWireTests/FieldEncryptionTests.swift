import CloudStoreWire
import Crypto
import Foundation
import Testing

/// The format of encrypted fields and wrapped keys (WireProtocol.md §9): what an operator who
/// alters, swaps or moves ciphertexts gets is an error naming the value, never a wrong value.
@Suite("Wire: encrypted fields and wrapped keys")
struct FieldEncryptionTests {
    static let place = EncryptedFieldContext(
        zoneName: "Notes", zoneOwner: "_alice", recordName: "4F1C", recordType: "Note", fieldName: "body")

    static func at(record: String = "4F1C", type: String = "Note", field: String = "body", zone: String = "Notes", owner: String = "_alice")
        -> EncryptedFieldContext
    {
        EncryptedFieldContext(zoneName: zone, zoneOwner: owner, recordName: record, recordType: type, fieldName: field)
    }

    /// Small scrypt costs: the format, not the cost, is under test.
    static let cheap = WrappedKey.PassphraseParameters(salt: Data(repeating: 7, count: 32), rounds: 1 << 10, blockSize: 8, parallelism: 1)

    @Test(arguments: [
        FieldValue.string("my diary"), .int64(-42), .double(2.5), .timestamp(Date(millisecondsSince1970: 1_700_000_000_123)),
        .bytes(Data([0, 1, 2, 255])), .list([.string("a"), .string("b")]), .string(""),
    ])
    func everyFieldType_roundTrips(_ value: FieldValue) throws {
        let key = EncryptionKey()
        let sealed = try FieldEncryption.seal(value, with: key, for: Self.place)
        #expect(try FieldEncryption.keyID(of: sealed) == key.id)
        #expect(try FieldEncryption.open(sealed, keys: [key.id: key], for: Self.place) == value)
    }

    /// The authenticated data of ``place``'s values as §9 spells it out, with `label`.
    static func authenticatedData(_ label: String, _ key: EncryptionKey) -> [UInt8] {
        var authenticated = Array(label.utf8)
        for part in ["Notes", "_alice", "4F1C", "Note", "body"] {
            authenticated += [0, 0, 0, UInt8(part.utf8.count)] + Array(part.utf8)
        }
        return authenticated + Array(key.id.bytes)
    }

    /// Format 1, spelled out as §9 says, independent of the code that seals: values sealed
    /// before format 2 keep opening.
    @Test func aValueSealedAsWireProtocolSection9Says_opens() throws {
        let key = EncryptionKey()
        let authenticated = Self.authenticatedData("cloudstore.field.v1", key)
        let box = try ChaChaPoly.seal(Data(#"{"type":"STRING","value":"my diary"}"#.utf8), using: key.key, authenticating: authenticated)
        let sealed = Data([1]) + key.id.bytes + box.combined
        #expect(try FieldEncryption.open(sealed, keys: [key.id: key], for: Self.place) == .string("my diary"))
    }

    /// Format 2, spelled out as §9 says: the label `cloudstore.field.v2`, a type byte and the
    /// value in binary. What `seal` writes opens this way, and what is sealed this way opens.
    @Test func format2_asWireProtocolSection9SaysIt() throws {
        let key = EncryptionKey()
        let authenticated = Self.authenticatedData("cloudstore.field.v2", key)
        func sealed(_ plaintext: [UInt8]) throws -> Data {
            Data([2]) + key.id.bytes + (try ChaChaPoly.seal(plaintext, using: key.key, authenticating: authenticated)).combined
        }
        let spelled: [(FieldValue, [UInt8])] = [
            (.string("my diary"), [1] + Array("my diary".utf8)),
            (.int64(-42), [2, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xD6]),
            (.double(2.5), [3, 0x40, 0x04, 0, 0, 0, 0, 0, 0]),
            (.timestamp(Date(millisecondsSince1970: 1_700_000_000_123)), [4, 0, 0, 0x01, 0x8B, 0xCF, 0xE5, 0x68, 0x7B]),
            (.bytes(Data([0, 1, 255])), [5, 0, 1, 255]),
            (.list([.string("a")]), [0] + Array(#"{"type":"STRING_LIST","value":["a"]}"#.utf8)),
        ]
        for (value, plaintext) in spelled {
            #expect(try FieldEncryption.open(sealed(plaintext), keys: [key.id: key], for: Self.place) == value, "\(value)")
            let written = try FieldEncryption.seal(value, with: key, for: Self.place)
            #expect(written.first == 2)
            let box = try ChaChaPoly.SealedBox(combined: written.dropFirst(17))
            #expect(Array(try ChaChaPoly.open(box, using: key.key, authenticating: authenticated)) == plaintext, "\(value)")
        }
        // Numbers are fixed-width: the size does not tell the magnitude.
        let sizes = try [Int64.min, 0, 1, .max].map { try FieldEncryption.seal(.int64($0), with: key, for: Self.place).count }
        #expect(Set(sizes).count == 1)
        // Not a value: an unknown type byte, a short number, text that is not UTF-8, a NaN, a
        // timestamp out of range.
        for plaintext: [UInt8] in [[9, 0], [2, 0, 0], [1, 0xC3], [3, 0x7F, 0xF8, 0, 0, 0, 0, 0, 0], [4, 0x7F, 0, 0, 0, 0, 0, 0, 0], []] {
            let opening = try sealed(plaintext)
            #expect(Self.failure { try FieldEncryption.open(opening, keys: [key.id: key], for: Self.place) } == .malformed, "\(plaintext)")
        }
        // The format byte is bound: a value of format 2 presented as format 1 does not open.
        var relabelled = try FieldEncryption.seal(.string("my diary"), with: key, for: Self.place)
        relabelled[relabelled.startIndex] = 1
        #expect(Self.failure { try FieldEncryption.open(relabelled, keys: [key.id: key], for: Self.place) } == .authenticationFailed)
    }

    /// The code of the ``EncryptionError`` `body` throws; nil when it throws none.
    static func failure(_ body: () throws -> some Any) -> EncryptionError.Code? {
        do {
            _ = try body()
            return nil
        } catch {
            return (error as? EncryptionError)?.code
        }
    }

    @Test func theSameValueSealsDifferentlyEachTime_andHidesItsText() throws {
        let key = EncryptionKey()
        let secret = "the launch code is 0000"
        let first = try FieldEncryption.seal(.string(secret), with: key, for: Self.place)
        let second = try FieldEncryption.seal(.string(secret), with: key, for: Self.place)
        #expect(first != second, "a fresh nonce each time")
        #expect(first.range(of: Data(secret.utf8)) == nil)
        #expect(first.base64EncodedString().contains(Data(secret.utf8).base64EncodedString()) == false)
    }

    /// Nonces come from a block of system randomness refilled every 341 values: none repeats
    /// across refills.
    @Test func noNonceRepeats_acrossBlocksOfRandomness() throws {
        let key = EncryptionKey()
        let nonces = try (0..<2_000).map { _ in try FieldEncryption.seal(.int64(1), with: key, for: Self.place).dropFirst(17).prefix(12) }
        #expect(Set(nonces.map { Data($0) }).count == 2_000)
    }

    /// A file sealed as an asset opens only as the asset of its field, whole: cut short at a
    /// chunk's end, extended by a chunk, with two chunks swapped, or with a byte flipped, it is
    /// refused; neither side holds more than a chunk.
    @Test(arguments: [0, 1, AssetEncryption.chunkSize, 3 * AssetEncryption.chunkSize + 5])
    func assetFiles_openOnlyWholeAndAsTheirField(_ size: Int) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("asset-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = EncryptionKey()
        let bytes = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        let (plain, sealedFile, opened) = (directory.appendingPathComponent("plain"), directory.appendingPathComponent("sealed"), directory.appendingPathComponent("opened"))
        try bytes.write(to: plain)
        let sealed = try AssetEncryption.seal(from: plain, to: sealedFile, with: key, for: Self.place)
        let file = try Data(contentsOf: sealedFile)
        #expect(sealed.size == Int64(file.count) && sealed.size == AssetEncryption.sealedSize(of: Int64(size)))
        #expect(sealed.fileChecksum == (try AssetChecksum.ofFile(at: sealedFile)).fileChecksum)
        let opening = try AssetEncryption.open(from: sealedFile, to: opened, keys: [key.id: key], for: Self.place)
        #expect(try Data(contentsOf: opened) == bytes && opening.size == Int64(size))
        #expect(opening.fileChecksum == (try AssetChecksum.ofFile(at: plain)).fileChecksum)

        func refused(_ altered: Data, for place: EncryptedFieldContext = Self.place, _ code: EncryptionError.Code = .authenticationFailed) throws {
            let file = directory.appendingPathComponent("altered")
            try altered.write(to: file)
            #expect(throws: EncryptionError.self) { try AssetEncryption.open(from: file, to: opened, keys: [key.id: key], for: place) }
            do { _ = try AssetEncryption.open(from: file, to: opened, keys: [key.id: key], for: place) } catch let error as EncryptionError {
                #expect(error.code == code)
            }
        }
        try refused(file, for: Self.at(field: "title"))
        try refused(file, for: Self.at(record: "9A2B"))
        var flipped = file
        flipped[flipped.count - 1] ^= 1
        try refused(flipped)
        let chunk = AssetEncryption.chunkSize + 16
        if size >= AssetEncryption.chunkSize {
            try refused(file + file.suffix(from: AssetEncryption.headerSize).prefix(chunk))  // a chunk too many
        }
        if size > AssetEncryption.chunkSize {
            try refused(file.prefix(AssetEncryption.headerSize + chunk))  // the first chunk alone
        }
        if size > 2 * AssetEncryption.chunkSize {
            let body = file.suffix(from: AssetEncryption.headerSize)
            let swapped = file.prefix(AssetEncryption.headerSize) + body.dropFirst(chunk).prefix(chunk) + body.prefix(chunk) + body.dropFirst(2 * chunk)
            try refused(Data(swapped))
        }
        try refused(file.prefix(10), .malformed)
        // A field value's ciphertext is not an asset's (another format byte).
        let value = try FieldEncryption.seal(.bytes(bytes), with: key, for: Self.place)
        try refused(value, .malformed)
    }

    /// An operator who moves a ciphertext to another record, field, type or zone, or flips a byte.
    @Test(arguments: [
        ("another record", at(record: "9A2B")), ("another field", at(field: "title")), ("another record type", at(type: "Folder")),
        ("another zone", at(zone: "Trips")), ("another owner", at(owner: "_mallory")),
    ])
    func aMovedCiphertext_doesNotOpen(_ move: (String, EncryptedFieldContext)) throws {
        let key = EncryptionKey()
        let sealed = try FieldEncryption.seal(.string("mine"), with: key, for: Self.place)
        #expect(throws: EncryptionError.self, "moved to \(move.0)") {
            try FieldEncryption.open(sealed, keys: [key.id: key], for: move.1)
        }
        do {
            _ = try FieldEncryption.open(sealed, keys: [key.id: key], for: move.1)
        } catch let error as EncryptionError {
            #expect(error.code == .authenticationFailed)
            #expect(error.message.contains(move.1.recordName) && error.message.contains(move.1.fieldName))
        }
    }

    @Test func aFlippedByte_anywhere_isDetected() throws {
        let key = EncryptionKey()
        let sealed = try FieldEncryption.seal(.string("twelve bytes"), with: key, for: Self.place)
        for index in 1 + KeyID.byteCount..<sealed.count {
            var altered = sealed
            altered[altered.startIndex + index] ^= 0x01
            #expect(throws: EncryptionError.self, "byte \(index)") { try FieldEncryption.open(altered, keys: [key.id: key], for: Self.place) }
        }
    }

    @Test func aValueOfAnotherKey_namesTheKeyItNeeds() throws {
        let (old, new) = (EncryptionKey(), EncryptionKey())
        let sealed = try FieldEncryption.seal(.string("before the rotation"), with: old, for: Self.place)
        do {
            _ = try FieldEncryption.open(sealed, keys: [new.id: new], for: Self.place)
            Issue.record("opened with the wrong key")
        } catch let error as EncryptionError {
            #expect(error.code == .unknownKey)
            #expect(error.keyID == old.id)
        }
        // A key posing under the old key's ID does not open it either.
        let impostor = EncryptionKey(id: old.id, key: SymmetricKey(size: .bits256))
        #expect(throws: EncryptionError.self) { try FieldEncryption.open(sealed, keys: [old.id: impostor], for: Self.place) }
        #expect(try FieldEncryption.open(sealed, keys: [old.id: old, new.id: new], for: Self.place) == .string("before the rotation"))
    }

    @Test func aSealedValue_travelsAsEncryptedBytes() throws {
        let sealed = try FieldEncryption.seal(.string("x"), with: EncryptionKey(), for: Self.place)
        let value = FieldValue.encryptedBytes(sealed)
        let json = String(decoding: try JSONEncoder().encode(value), as: UTF8.self)
        let object = try JSONDecoder().decode([String: String].self, from: Data(json.utf8))
        #expect(object == ["type": "ENCRYPTED_BYTES", "value": sealed.base64EncodedString()], "\(json)")
        #expect(try JSONDecoder().decode(FieldValue.self, from: Data(json.utf8)) == value)
        #expect(value.type == .encryptedBytes && FieldType(rawValue: "ENCRYPTED_BYTES") == .encryptedBytes)
        #expect(FieldType(rawValue: "ENCRYPTED_BYTES_LIST") == .list(.encryptedBytes))
    }

    @Test func aShortOrForeignValue_isMalformed() {
        for bad in [Data(), Data([1]), Data([2] + [UInt8](repeating: 0, count: 40)), Data([3] + [UInt8](repeating: 0, count: 60))] {
            #expect(throws: EncryptionError.self) { try FieldEncryption.keyID(of: bad) }
        }
    }

    @Test func aZoneKey_wrappedByTheAccountKey_unwrapsOnlyForItsZone() throws {
        let (account, zone) = (EncryptionKey(), EncryptionKey())
        let wrapped = try KeyWrapping.wrap(zone, zoneName: "Notes", zoneOwner: "_alice", with: account)
        #expect(wrapped.sealed.range(of: zone.rawBytes) == nil)
        let unwrapped = try KeyWrapping.unwrap(wrapped, zoneName: "Notes", zoneOwner: "_alice", with: account)
        #expect(unwrapped.id == zone.id && unwrapped.rawBytes == zone.rawBytes)
        #expect(throws: EncryptionError.self) { try KeyWrapping.unwrap(wrapped, zoneName: "Trips", zoneOwner: "_alice", with: account) }
        #expect(throws: EncryptionError.self) { try KeyWrapping.unwrap(wrapped, zoneName: "Notes", zoneOwner: "_alice", with: EncryptionKey()) }
        // It survives its trip through JSON, as it rests on the server.
        let decoded = try JSONDecoder().decode(WrappedKey.self, from: try JSONEncoder().encode(wrapped))
        #expect(try KeyWrapping.unwrap(decoded, zoneName: "Notes", zoneOwner: "_alice", with: account).rawBytes == zone.rawBytes)
    }

    @Test func thePassphrase_unlocksTheAccountKey_andAWrongOneSaysSo() throws {
        let account = EncryptionKey()
        let locked = try KeyWrapping.lock(account, user: "_alice", passphrase: "correct horse", parameters: Self.cheap)
        #expect(try KeyWrapping.unlock(locked, user: "_alice", passphrase: "correct horse").rawBytes == account.rawBytes)
        do {
            _ = try KeyWrapping.unlock(locked, user: "_alice", passphrase: "correct hoarse")
            Issue.record("a wrong passphrase unlocked the key")
        } catch let error as EncryptionError {
            #expect(error.code == .wrongPassphrase)
            #expect(error.message.contains("passphrase"))
        }
        #expect(throws: EncryptionError.self, "another user's locked key") {
            try KeyWrapping.unlock(locked, user: "_mallory", passphrase: "correct horse")
        }
    }

    @Test func aGrant_opensOnlyForItsParticipant() throws {
        let zone = EncryptionKey()
        let bob = Curve25519.KeyAgreement.PrivateKey()
        let carol = Curve25519.KeyAgreement.PrivateKey()
        let grant = try KeyWrapping.grant(zone, zoneName: "Notes.share-1", zoneOwner: "_alice", to: "_bob", publicKey: bob.publicKey)
        #expect(try KeyWrapping.accept(grant, zoneName: "Notes.share-1", zoneOwner: "_alice", privateKey: bob).rawBytes == zone.rawBytes)
        #expect(throws: EncryptionError.self) { try KeyWrapping.accept(grant, zoneName: "Notes.share-1", zoneOwner: "_alice", privateKey: carol) }
        var renamed = grant
        renamed.participant = "_carol"
        #expect(throws: EncryptionError.self) { try KeyWrapping.accept(renamed, zoneName: "Notes.share-1", zoneOwner: "_alice", privateKey: bob) }
        #expect(throws: EncryptionError.self) { try KeyWrapping.accept(grant, zoneName: "Notes.share-2", zoneOwner: "_alice", privateKey: bob) }
    }
}
