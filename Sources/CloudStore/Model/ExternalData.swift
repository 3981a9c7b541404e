import CloudStoreWire
import Foundation

/// A `data` value kept in a file beside the store rather than in its row: what an attribute marked
/// `externalStorage` holds in snapshots, history and the conflict log. The file is named by the
/// bytes' SHA-256, so equal bytes are stored once and a value is equal to another exactly when its
/// bytes are.
///
/// Entities never see it: a `Data` property of an entity reads the file's bytes. Code that works
/// with ``EntitySnapshot`` (history, conflicts, mirroring) sees this small reference instead, so a
/// 100 MiB attachment is never loaded to be compared or synced. ``PersistentStore/externalDataURL(for:)``
/// gives the file for reading it in pieces.
public struct ExternalData: Hashable, Sendable, CustomStringConvertible {
    /// Base64 of the SHA-256 of the bytes (the `fileChecksum` of the asset it travels as).
    public var checksum: String
    /// The number of bytes.
    public var size: Int64

    /// A reference to the bytes whose SHA-256, in base64, is `checksum`; the store makes these
    /// when it saves a `data` value with external storage.
    public init(checksum: String, size: Int64) {
        self.checksum = checksum
        self.size = size
    }

    /// The name of the file holding the bytes: the checksum in hex; nil when the checksum is not
    /// a SHA-256.
    public var fileName: String? { AssetChecksum.fileName(of: checksum) }

    /// How the reference is stored in its column: `"<size>:<checksum>"`, as TEXT, where inline
    /// bytes are a BLOB.
    var storedText: String { "\(size):\(checksum)" }

    init?(storedText text: String) {
        guard let colon = text.firstIndex(of: ":"), let size = Int64(text[..<colon]), size >= 0 else { return nil }
        let checksum = String(text[text.index(after: colon)...])
        guard AssetChecksum.fileName(of: checksum) != nil else { return nil }
        self.init(checksum: checksum, size: size)
    }

    /// The size and checksum, as in `<1048576 bytes in a file, SHA-256 …>`; never the bytes.
    public var description: String { "<\(size) bytes in a file, SHA-256 \(checksum)>" }
}
