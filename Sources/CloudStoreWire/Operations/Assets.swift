/// `POST /{db}/assets/upload`: upload URLs for the asset fields of records about to be saved
/// (<doc:WireProtocol> §7).
///
/// ```json
/// {"zoneID": {"zoneName": "Notes"},
///  "tokens": [{"recordName": "N-1", "recordType": "Note", "fieldName": "photo"}]}
/// ```
public struct AssetUploadRequest: Hashable, Sendable, Codable {
    public struct Token: Hashable, Sendable, Codable {
        public var recordName: String
        public var recordType: String?
        public var fieldName: String

        public init(recordName: String, recordType: String? = nil, fieldName: String) {
            self.recordName = recordName
            self.recordType = recordType
            self.fieldName = fieldName
        }
    }

    /// The zone of the records; a request without one means the default zone, as in Apple's
    /// reference.
    public var zoneID: ZoneID
    public var tokens: [Token]

    public init(zoneID: ZoneID, tokens: [Token]) {
        self.zoneID = zoneID
        self.tokens = tokens
    }

    enum CodingKeys: String, CodingKey {
        case zoneID, tokens
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        zoneID = try container.decodeIfPresent(ZoneID.self, forKey: .zoneID) ?? .default
        tokens = try container.decode([Token].self, forKey: .tokens)
    }
}

/// The answer to ``AssetUploadRequest``: one upload URL per token, in the same order.
///
/// Each `url` is on the same server, bound to the caller, zone, record and field, and valid for
/// 15 minutes. `POST` the raw bytes to it; the answer is an ``AssetUploadResult``.
public struct AssetUploadResponse: Hashable, Sendable, Codable {
    public struct Token: Hashable, Sendable, Codable {
        public var recordName: String
        public var fieldName: String
        public var url: String

        public init(recordName: String, fieldName: String, url: String) {
            self.recordName = recordName
            self.fieldName = fieldName
            self.url = url
        }
    }

    public var tokens: [Token]

    public init(tokens: [Token]) { self.tokens = tokens }
}

/// What an upload URL answers once it has received and verified the bytes:
/// `{"singleFile": {"fileChecksum", "size", "receipt"}}`. Save the record with
/// `.asset(Asset(fileChecksum:size:receipt:))` made from it.
public struct AssetUploadResult: Hashable, Sendable, Codable {
    public struct SingleFile: Hashable, Sendable, Codable {
        public var fileChecksum: String
        public var size: Int64
        public var receipt: String

        public init(fileChecksum: String, size: Int64, receipt: String) {
            self.fileChecksum = fileChecksum
            self.size = size
            self.receipt = receipt
        }
    }

    public var singleFile: SingleFile

    public init(singleFile: SingleFile) { self.singleFile = singleFile }

    /// The asset value to save in the record's field.
    public var asset: Asset {
        Asset(fileChecksum: singleFile.fileChecksum, size: singleFile.size, receipt: singleFile.receipt)
    }
}
