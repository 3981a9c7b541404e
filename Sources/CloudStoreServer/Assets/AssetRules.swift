import CloudStoreWire
import Foundation

/// What the server knows of an uploaded asset when a `records/modify` names its receipt: the
/// binding of the upload URL it came from (caller, zone, record, field), what was received, and
/// whether a save consumed it already.
struct AssetReceipt: Hashable, Sendable {
    var receipt: String
    var assetID: String
    var zone: ZoneAddress
    var recordName: String
    var fieldName: String
    /// The userRecordName of the uploader.
    var caller: String
    var fileChecksum: String
    var size: Int64
    /// The upload URL's expiry; an unconsumed receipt is refused after it.
    var expiresAt: Date
    /// A save referenced the asset already (it is saved, or released and not yet removed).
    var isConsumed: Bool
}

/// The asset decisions of `records/modify` (WireProtocol.md §7), pure: what an `ASSETID` value a
/// client sends becomes in the stored record, or why it is refused.
///
/// - With a receipt: the receipt must be known, issued to this caller for this zone, record and
///   field, unexpired unless a save consumed it already (a retried save), and its checksum and
///   size must be the field's.
/// - Without one: the record's stored version must hold the same asset (checksum and size) in that
///   field, as a client sends back an unchanged asset it received.
///
/// What is stored is `{fileChecksum, size, downloadURL}`: the receipt never, the downloadURL from
/// the server's own knowledge (never the client's). `ASSETID_LIST` elements follow the same rules.
struct AssetRules: Sendable {
    var zone: ZoneAddress
    /// The userRecordName of the caller.
    var caller: String
    var now: Date

    /// The sent fields with each asset value resolved to what is stored, or a problem naming the field.
    func resolve(
        _ sent: [String: FieldValue], recordName: String, stored: [String: FieldValue]?,
        receipts: [String: AssetReceipt]
    ) -> Result<[String: FieldValue], AssetProblem> {
        var resolved = sent
        // The first problem by field name, so the answer does not depend on the dictionary's
        // order; fields are not sorted for it (most records have no assets).
        var first: (field: String, problem: AssetProblem)?
        for (field, value) in sent where first.map({ field < $0.field }) ?? true {
            let result: Result<FieldValue, AssetProblem>
            switch value {
            case .asset(let asset):
                result = resolve(asset, field: field, recordName: recordName, stored: stored?[field], receipts: receipts)
                    .map(FieldValue.asset)
            case .list(let values) where values.contains(where: \.isAsset):
                var elements: [FieldValue] = []
                var failure: AssetProblem?
                for case .asset(let asset) in values {
                    switch resolve(asset, field: field, recordName: recordName, stored: stored?[field], receipts: receipts) {
                    case .success(let asset): elements.append(.asset(asset))
                    case .failure(let problem): failure = failure ?? problem
                    }
                }
                result = failure.map { .failure($0) } ?? .success(FieldValue.list(elements))
            default:
                continue
            }
            switch result {
            case .success(let value): resolved[field] = value
            case .failure(let problem): first = (field, problem)
            }
        }
        return first.map { .failure($0.problem) } ?? .success(resolved)
    }

    /// One asset value as it is stored, or the problem.
    func resolve(
        _ asset: Asset, field: String, recordName: String, stored: FieldValue?, receipts: [String: AssetReceipt]
    ) -> Result<Asset, AssetProblem> {
        guard let receiptText = asset.receipt else {
            let same = Self.assets(in: stored).first { $0.fileChecksum == asset.fileChecksum && $0.size == asset.size }
            guard let same, same.downloadURL != nil else {
                return .failure(
                    AssetProblem("field \(field): the asset (fileChecksum \(asset.fileChecksum.prefix(64)), size \(asset.size)) is not the one stored in this field: send a receipt: upload the bytes first"))
            }
            return .success(Asset(fileChecksum: same.fileChecksum, size: same.size, downloadURL: same.downloadURL))
        }
        guard let receipt = receipts[receiptText] else {
            return .failure(
                AssetProblem("field \(field): the asset's receipt is unknown (never issued, or its bytes were removed): upload the bytes again and save with the new receipt"))
        }
        guard receipt.caller == caller else {
            return .failure(
                AssetProblem("field \(field): the asset's receipt was issued to another user: upload the bytes through an upload URL of your own"))
        }
        guard receipt.zone == zone, receipt.recordName == recordName, receipt.fieldName == field else {
            return .failure(
                AssetProblem("field \(field): the asset's receipt was issued for field \(receipt.fieldName) of record \(receipt.recordName.prefix(255)) in zone \(receipt.zone.zoneName): request an upload URL for this record and field"))
        }
        guard receipt.isConsumed || receipt.expiresAt > now else {
            return .failure(
                AssetProblem("field \(field): the asset's receipt expired (receipts last as long as their upload URL, 15 minutes): upload the bytes again"))
        }
        guard receipt.fileChecksum == asset.fileChecksum, receipt.size == asset.size else {
            return .failure(
                AssetProblem("field \(field): fileChecksum and size (\(asset.fileChecksum.prefix(64)), \(asset.size)) are not those of the uploaded bytes (\(receipt.fileChecksum), \(receipt.size)): send what the upload answered"))
        }
        return .success(
            Asset(
                fileChecksum: receipt.fileChecksum, size: receipt.size,
                downloadURL: AssetLocation.downloadPath(zone.partition, assetID: receipt.assetID)))
    }

    /// The receipts a record's fields send that this server could have issued, to look up: any
    /// other text (a NUL, which PostgreSQL refuses in text, say) is unknown without asking the
    /// storage, and ``resolve`` refuses it by name.
    static func receipts(in fields: [String: FieldValue]) -> Set<String> {
        Set(fields.values.flatMap { assets(in: $0) }.compactMap(\.receipt).filter(AssetLocation.isIdentifier))
    }

    /// The IDs of the assets stored fields reference (from their download URLs).
    static func assetIDs(in fields: [String: FieldValue]) -> Set<String> {
        // Without building arrays: most records have no asset, and this runs for every write.
        var ids = Set<String>()
        func collect(_ value: FieldValue) {
            switch value {
            case .asset(let asset): if let id = asset.downloadURL.flatMap(AssetLocation.assetID(inDownloadURL:)) { ids.insert(id) }
            case .list(let values): for element in values { collect(element) }
            default: break
            }
        }
        for value in fields.values { collect(value) }
        return ids
    }

    /// The assets of a value: itself, or the elements of an `ASSETID_LIST`.
    static func assets(in value: FieldValue?) -> [Asset] {
        switch value {
        case .asset(let asset)?: [asset]
        case .list(let values)?: values.flatMap { assets(in: $0) }
        default: []
        }
    }
}

/// Why an asset value cannot be saved, naming the field and the fix.
struct AssetProblem: Error, Hashable {
    var reason: String
    init(_ reason: String) { self.reason = reason }
}

extension FieldValue {
    fileprivate var isAsset: Bool {
        if case .asset = self { true } else { false }
    }
}

/// Where an asset's bytes are fetched (WireProtocol.md §7, ext): a path-absolute reference
/// `/database/1/{container}/{environment}/{database}/assets/download/{assetID}`, and the identifiers
/// of uploads, assets and receipts (128 random bits in hex).
enum AssetLocation {
    static func downloadPath(_ partition: DatabasePartition, assetID: String) -> String {
        DatabaseRoute(container: partition.container, environment: partition.environment)
            .assetDownloadPath(partition.scope, assetID: assetID)
    }

    static func uploadPath(_ partition: DatabasePartition, uploadID: String) -> String {
        DatabaseRoute(container: partition.container, environment: partition.environment)
            .assetUploadPath(partition.scope, uploadID: uploadID)
    }

    /// The asset ID at the end of a download URL this server wrote (its path, or the URL an
    /// answer carries, ``AssetDownloadURLs``); nil for anything else.
    static func assetID(inDownloadURL url: String) -> String? {
        let path = url.prefix { $0 != "?" }
        guard let range = path.range(of: "/assets/download/", options: .backwards) else { return nil }
        let id = String(path[range.upperBound...])
        return isIdentifier(id) ? id : nil
    }

    /// A new identifier: 128 random bits as 32 lowercase hex digits.
    static func newIdentifier() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<2).map { _ in
            let hex = String(generator.next() as UInt64, radix: 16)
            return String(repeating: "0", count: 16 - hex.count) + hex
        }.joined()
    }

    /// Whether text is an identifier ``newIdentifier()`` could have made.
    static func isIdentifier(_ text: String) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }
}

/// When an asset's bytes may be removed (WireProtocol.md §7), from what last happened to it: the
/// storage records the answer with the event, in the same transaction, and a periodic sweep
/// removes what is due.
struct AssetLifetime: Hashable, Sendable {
    enum Event: Hashable, Sendable {
        /// Bytes are arriving for an upload URL valid until the date; only a crashed upload stays
        /// in this state, removed a day after its URL expired.
        case receiving(urlExpiresAt: Date)
        /// Received; never saved: removable once its receipt expired.
        case uploaded(receiptExpiresAt: Date)
        /// A live record references it: never removed.
        case saved
        /// Its record's field now holds another asset (or none): removable at once.
        case replaced(at: Date)
        /// Its record (or zone) was deleted: removable once the tombstone horizon passed, as long
        /// as changes/zone may still show the record.
        case recordDeleted(at: Date)
    }

    /// How long tombstones are kept (``ServerLimits/tombstoneHorizon``).
    var tombstoneHorizon: TimeInterval = 30 * 24 * 3600

    /// When the bytes become removable after `event`; nil: never (a live record references them).
    func removableAt(after event: Event) -> Date? {
        switch event {
        case .receiving(let expiry): expiry.addingTimeInterval(24 * 3600)
        case .uploaded(let expiry): expiry
        case .saved: nil
        case .replaced(let time): time
        case .recordDeleted(let time): time.addingTimeInterval(tombstoneHorizon)
        }
    }
}

/// Who may download an asset: a private database's assets are for the owner of their zone and the
/// users who accepted the zone's share and take part still (WireProtocol.md §6); the public
/// database's for any caller.
enum AssetAccess {
    /// - Parameter participant: the caller's row in the share of the asset's zone, if any.
    static func mayDownload(_ caller: Caller, from partition: DatabasePartition, participant: StoredParticipant? = nil) -> Bool {
        switch partition.scope {
        case .public: return true
        case .private, .shared:
            guard case .user(let user) = caller else { return false }
            return user == partition.owner || (participant?.user == user && ShareRules.permission(of: participant) != nil)
        }
    }

    /// Whether a user may upload bytes for a record of a zone: its owner, or a participant with
    /// `READ_WRITE` who takes part still.
    static func mayUpload(_ user: String, to zone: ZoneAddress, participant: StoredParticipant?) -> Bool {
        user == zone.partition.owner || (participant?.user == user && ShareRules.permission(of: participant) == .readWrite)
    }
}
