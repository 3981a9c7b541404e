import Foundation

/// The value of an `ASSETID` field: large binary data kept out of line (<doc:WireProtocol> §7).
///
/// On the wire an asset is a dictionary. What it carries depends on the direction:
///
/// - **Saving** a new or changed asset: `fileChecksum`, `size` and the `receipt` the upload URL
///   answered with.
/// - **Saving** an asset unchanged since it was received: `fileChecksum` and `size` only.
/// - **Reading**: `fileChecksum`, `size` and a `downloadURL`.
///
/// ``fileURL`` is the client's own: the local file holding the bytes, never sent. A sync engine
/// that finds an asset with a `fileURL` and no `receipt` in a record it is about to send uploads the
/// file first (as CloudKit does with `CKAsset(fileURL:)`), and a fetched asset arrives with the
/// downloaded file's `fileURL`.
///
/// ```swift
/// let asset = try Asset(contentsOf: photoURL)   // checksum and size from the file
/// record.fields["photo"] = .asset(asset)
/// ```
public struct Asset: Hashable, Sendable {
    /// Base64 of the SHA-256 of the bytes.
    public var fileChecksum: String
    /// The number of bytes.
    public var size: Int64
    /// What an upload answered with; proves to the server that the bytes were received.
    public var receipt: String?
    /// Where to `GET` the bytes (same authentication as any call; `Range` honoured).
    public var downloadURL: String?
    /// The local file holding the bytes (client side only; never encoded).
    public var fileURL: URL?

    public init(
        fileChecksum: String, size: Int64, receipt: String? = nil, downloadURL: String? = nil, fileURL: URL? = nil
    ) {
        self.fileChecksum = fileChecksum
        self.size = size
        self.receipt = receipt
        self.downloadURL = downloadURL
        self.fileURL = fileURL
    }

    /// The same asset as the server knows it, for sending back unchanged: checksum and size only.
    public var unchanged: Asset { Asset(fileChecksum: fileChecksum, size: size) }
}

extension Asset: Codable {
    private enum CodingKeys: String, CodingKey {
        case fileChecksum, size, receipt, downloadURL
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        fileChecksum = try container.decode(String.self, forKey: .fileChecksum)
        size = try container.decode(Int64.self, forKey: .size)
        guard size >= 0 else {
            throw DecodingError.dataCorruptedError(
                forKey: .size, in: container, debugDescription: "an asset's size cannot be negative")
        }
        receipt = try container.decodeIfPresent(String.self, forKey: .receipt)
        downloadURL = try container.decodeIfPresent(String.self, forKey: .downloadURL)
        fileURL = nil
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(fileChecksum, forKey: .fileChecksum)
        try container.encode(size, forKey: .size)
        try container.encodeIfPresent(receipt, forKey: .receipt)
        try container.encodeIfPresent(downloadURL, forKey: .downloadURL)
    }
}
