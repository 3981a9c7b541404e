import Crypto
import Foundation

/// Seals and opens the bytes of encrypted assets (<doc:WireProtocol> §9, "A sealed asset"): the
/// file uploaded in their place, sealed in chunks so neither side holds a whole file in memory.
///
/// A sealed asset is `0x01` (the format version), the 16-byte key ID and a 16-byte random salt,
/// then the plain bytes in chunks of ``chunkSize`` (the last one may be shorter, or empty), each
/// sealed with ChaCha20-Poly1305 as its ciphertext and 16-byte tag. The chunks' key is
/// HKDF-SHA256 of the zone key with the salt, its info the asset's authenticated data (the label
/// `cloudstore.asset.v1` and the field's place, as a value's); chunk *i*'s nonce is seven zero
/// bytes, *i* as four big-endian bytes, and `0x01` for the last chunk (`0x00` before); each chunk
/// authenticates the same data. A file cut short, extended, reordered, moved to another field or
/// altered in any byte fails to open.
///
/// ```swift
/// let sealed = try AssetEncryption.seal(from: photo, to: upload, with: key, for: place)
/// // … upload `upload` as the asset, whose checksum and size are `sealed`'s …
/// let plain = try AssetEncryption.open(from: downloaded, to: photoCopy, keys: [key.id: key], for: place)
/// ```
public enum AssetEncryption {
    /// The format version, the first byte of a sealed asset.
    public static let version: UInt8 = 1
    /// The plain bytes of each chunk but the last.
    public static let chunkSize = 64 * 1024
    static let saltSize = 16
    static let tagSize = 16
    /// The version, the key ID and the salt.
    public static let headerSize = 1 + KeyID.byteCount + saltSize

    /// The size of the sealed file of `plainSize` bytes: the header, the bytes and a tag per chunk.
    public static func sealedSize(of plainSize: Int64) -> Int64 {
        let chunks = max(1, (plainSize + Int64(chunkSize) - 1) / Int64(chunkSize))
        return Int64(headerSize) + plainSize + Int64(tagSize) * chunks
    }

    /// Seals the file at `source` for the asset field `context` names into a new file at
    /// `destination`, and answers that file's checksum and size (the asset's).
    public static func seal(
        from source: URL, to destination: URL, with key: EncryptionKey, for context: EncryptedFieldContext
    ) throws -> (fileChecksum: String, size: Int64) {
        let input = try FileHandle(forReadingFrom: source)
        defer { try? input.close() }
        let output = try create(destination)
        defer { try? output.close() }
        var checksum = AssetChecksum()
        func write(_ bytes: Data) throws {
            try output.write(contentsOf: bytes)
            checksum.update(bytes)
        }
        let salt = SymmetricKey(size: .init(bitCount: saltSize * 8)).withUnsafeBytes { Data($0) }
        var header = Data([version])
        header.append(key.id.bytes)
        header.append(salt)
        try write(header)
        let authenticated = context.authenticatedData(keyID: key.id, label: EncryptedFieldContext.assetLabel)
        let chunkKey = self.chunkKey(key, salt: salt, authenticated)
        var chunk = try input.read(upToCount: chunkSize) ?? Data()
        var index: UInt32 = 0
        while true {
            // A full chunk may be the last: the next one tells.
            let next = chunk.count == chunkSize ? try input.read(upToCount: chunkSize) ?? Data() : Data()
            let box = try ChaChaPoly.seal(chunk, using: chunkKey, nonce: nonce(index, last: next.isEmpty), authenticating: authenticated)
            try write(box.ciphertext)
            try write(box.tag)
            if next.isEmpty { break }
            (chunk, index) = (next, index + 1)
        }
        return (checksum.base64, checksum.size)
    }

    /// The ID of the key that sealed the file at `url`.
    public static func keyID(ofFileAt url: URL) throws -> KeyID {
        let input = try FileHandle(forReadingFrom: url)
        defer { try? input.close() }
        return try header(of: input, what: url.path).keyID
    }

    /// The key ID and salt at the start of a sealed file.
    private static func header(of input: FileHandle, what: String) throws -> (keyID: KeyID, salt: Data) {
        let header = try input.read(upToCount: headerSize) ?? Data()
        guard header.count == headerSize, header.first == version,
            let id = KeyID(bytes: header.dropFirst().prefix(KeyID.byteCount))
        else {
            throw EncryptionError(.malformed, "\(what) is not a sealed asset of format \(version)")
        }
        return (id, header.suffix(saltSize))
    }

    /// Opens the sealed file at `source` for the asset field `context` names into a new file at
    /// `destination`, and answers the plain bytes' checksum and size.
    ///
    /// - Throws: ``EncryptionError`` `unknownKey` when `keys` lacks the file's key,
    ///   `authenticationFailed` when it was altered, cut short, extended or belongs elsewhere,
    ///   `malformed` when it is not a sealed asset; or the file system's error.
    public static func open(
        from source: URL, to destination: URL, keys: [KeyID: EncryptionKey], for context: EncryptedFieldContext
    ) throws -> (fileChecksum: String, size: Int64) {
        let input = try FileHandle(forReadingFrom: source)
        defer { try? input.close() }
        let (id, salt) = try header(of: input, what: "\(context)")
        guard let key = keys[id] else {
            throw EncryptionError(.unknownKey, "\(context) is sealed with key \(id), which this device does not have", keyID: id)
        }
        let authenticated = context.authenticatedData(keyID: id, label: EncryptedFieldContext.assetLabel)
        let chunkKey = self.chunkKey(key, salt: salt, authenticated)
        let output = try create(destination)
        defer { try? output.close() }
        var checksum = AssetChecksum()
        let sealedChunkSize = chunkSize + tagSize
        var chunk = try input.read(upToCount: sealedChunkSize) ?? Data()
        var index: UInt32 = 0
        while true {
            let next = chunk.count == sealedChunkSize ? try input.read(upToCount: sealedChunkSize) ?? Data() : Data()
            let plain: Data
            do {
                guard chunk.count >= tagSize else { throw EncryptionError(.authenticationFailed, "cut short") }
                let box = try ChaChaPoly.SealedBox(
                    nonce: nonce(index, last: next.isEmpty), ciphertext: chunk.dropLast(tagSize), tag: chunk.suffix(tagSize))
                plain = try ChaChaPoly.open(box, using: chunkKey, authenticating: authenticated)
            } catch {
                throw EncryptionError(
                    .authenticationFailed,
                    "\(context) does not authenticate (chunk \(index)): the asset was altered, cut short, extended, or moved from another record or field")
            }
            try output.write(contentsOf: plain)
            checksum.update(plain)
            if next.isEmpty { break }
            (chunk, index) = (next, index + 1)
        }
        return (checksum.base64, checksum.size)
    }

    private static func chunkKey(_ key: EncryptionKey, salt: Data, _ authenticated: [UInt8]) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(inputKeyMaterial: key.key, salt: salt, info: authenticated, outputByteCount: 32)
    }

    private static func nonce(_ index: UInt32, last: Bool) -> ChaChaPoly.Nonce {
        var bytes = [UInt8](repeating: 0, count: 12)
        bytes[7] = UInt8(index >> 24)
        bytes[8] = UInt8(index >> 16 & 0xff)
        bytes[9] = UInt8(index >> 8 & 0xff)
        bytes[10] = UInt8(index & 0xff)
        bytes[11] = last ? 1 : 0
        // 12 bytes always make a nonce.
        return try! ChaChaPoly.Nonce(data: bytes)
    }

    private static func create(_ url: URL) throws -> FileHandle {
        guard FileManager.default.createFile(atPath: url.path, contents: nil) else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: url.path])
        }
        return try FileHandle(forWritingTo: url)
    }
}
