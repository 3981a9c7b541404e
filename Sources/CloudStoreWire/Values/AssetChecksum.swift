import Crypto
import Foundation

/// The checksum an asset travels with: base64 of the SHA-256 of its bytes, computed as the bytes
/// stream by, so a file of any size is hashed in bounded memory.
///
/// ```swift
/// var checksum = AssetChecksum()
/// for try await chunk in body { checksum.update(chunk) }
/// let (fileChecksum, size) = (checksum.base64, checksum.size)
/// ```
public struct AssetChecksum: Sendable {
    private var hasher = SHA256()
    /// Bytes hashed so far.
    public private(set) var size: Int64 = 0

    public init() {}

    public mutating func update(_ bytes: some DataProtocol) {
        hasher.update(data: bytes)
        size += Int64(bytes.count)
    }

    public mutating func update(bufferPointer: UnsafeRawBufferPointer) {
        hasher.update(bufferPointer: bufferPointer)
        size += Int64(bufferPointer.count)
    }

    /// Base64 of the SHA-256 of everything hashed (the wire's `fileChecksum`).
    public var base64: String { Data(hasher.finalize()).base64EncodedString() }

    /// The checksum and size of a file, read 1 MiB at a time.
    public static func ofFile(at url: URL) throws -> (fileChecksum: String, size: Int64) {
        var checksum = AssetChecksum()
        try checksum.update(file: url)
        return (checksum.base64, checksum.size)
    }

    /// Hashes the bytes of a file, 1 MiB at a time, after whatever was hashed already.
    public mutating func update(file url: URL, chunkSize: Int = 1 << 20) throws {
        let handle = try FileHandle(forReadingFrom: url)
        defer { try? handle.close() }
        while let chunk = try handle.read(upToCount: chunkSize), !chunk.isEmpty {
            update(chunk)
        }
    }

    /// A checksum as a file name: the hex of its 32 bytes (base64 has `/`), or nil when it is not
    /// the base64 of 32 bytes.
    public static func fileName(of fileChecksum: String) -> String? {
        guard let digest = Data(base64Encoded: fileChecksum), digest.count == 32 else { return nil }
        return digest.hexadecimal
    }
}

extension Sequence<UInt8> {
    /// The bytes as lowercase hex, two digits each: how digests become names and keys.
    package var hexadecimal: String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(underestimatedCount * 2)
        for byte in self {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}

extension Asset {
    /// An asset for a local file: its checksum and size computed from the file, `fileURL` set.
    public init(contentsOf fileURL: URL) throws {
        let (fileChecksum, size) = try AssetChecksum.ofFile(at: fileURL)
        self.init(fileChecksum: fileChecksum, size: size, fileURL: fileURL)
    }
}
