import CloudStoreWire
import Foundation
import NIOCore

/// Where the server keeps assets' bytes, their bookkeeping and the upload URLs it issued
/// (WireProtocol.md §7). Every backend streams in bounded memory: bytes go in as they arrive
/// (``AssetSink``) and come out in chunks of at most ``AssetStorageChunk/bytes``.
///
/// An asset moves through states, each with the time its bytes become removable
/// (``AssetLifetime``): receiving → uploaded (it has a receipt) → saved (a live record references
/// it) → released (replaced, or its record or zone deleted) → removed by ``sweepAssets(containers:now:)``.
/// The record writes of ``ServerStorage/modifyRecords(in:loading:decide:)`` and zone deletions
/// of ``ServerStorage/modifyZones(_:in:)`` move assets between saved and released in their own
/// transaction: which assets a record references is never decided apart from the record.
protocol AssetStorage: Sendable {
    /// Records the upload URLs issued by one `assets/upload` request (one container).
    func addAssetUploads(_ uploads: [AssetUpload]) async throws

    /// An upload URL by its ID, expired or not; nil when unknown (or swept after its expiry).
    func assetUpload(_ id: String, container: String) async throws -> AssetUpload?

    /// Starts receiving the bytes of a new asset through an upload URL. Nothing of it is visible
    /// until the sink commits; a sink neither committed nor discarded (a crash) is removed a day
    /// after its upload URL expired.
    func receiveAsset(_ assetID: String, for upload: AssetUpload) async throws -> any AssetSink

    /// An asset whose bytes may be served (saved, or released and not yet removed); nil when
    /// unknown, never saved, or removed.
    func asset(_ id: String, container: String) async throws -> StoredAsset?

    /// Hands `range` of an asset's bytes to `body` in order, in chunks of at most
    /// ``AssetStorageChunk/bytes``.
    func readAsset(
        _ asset: StoredAsset, range: Range<Int64>, _ body: (ByteBuffer) async throws -> Void
    ) async throws

    /// Removes the assets due for removal at `now` (and upload URLs expired before it) in the
    /// given containers; answers what was removed.
    func sweepAssets(containers: Set<String>, now: Date) async throws -> AssetSweep
}

/// The bytes of one asset on their way in.
protocol AssetSink: Sendable {
    /// Appends bytes (kept in bounded memory: a backend writes them out or buffers one chunk).
    func write(_ bytes: ByteBuffer) async throws
    /// Makes the bytes durable and records the asset uploaded, with its checksum, size and receipt.
    func commit(fileChecksum: String, size: Int64, receipt: String) async throws
    /// Forgets the bytes received so far.
    func discard() async
}

/// The largest piece of an asset a backend reads or buffers at once.
enum AssetStorageChunk {
    static let bytes = 1 << 20
}

/// An upload URL's binding: who may post bytes to it, for which record field, until when.
struct AssetUpload: Hashable, Sendable {
    /// How long an upload URL (and the receipts uploads through it answer) is valid.
    static let lifetime: TimeInterval = 15 * 60

    var id: String
    var zone: ZoneAddress
    var recordName: String
    var fieldName: String
    /// The userRecordName of the caller it was issued to.
    var caller: String
    var expiresAt: Date
}

/// An asset whose bytes can be served.
struct StoredAsset: Hashable, Sendable {
    var id: String
    var zone: ZoneAddress
    var recordName: String
    var fieldName: String
    var fileChecksum: String
    var size: Int64
}

/// What a sweep removed.
struct AssetSweep: Hashable, Sendable {
    var assets = 0
    var bytes: Int64 = 0
}

/// The asset states as the storages write them.
enum AssetState: String, Sendable {
    case receiving, uploaded, saved, released
}

extension RecordWrite {
    /// The assets the record references after this write (none for a delete).
    var assetIDs: Set<String> {
        guard case .save(_, let fields, _) = change else { return [] }
        return AssetRules.assetIDs(in: fields)
    }

    /// What happens to the assets the record referenced before and does not keep.
    var assetRelease: AssetLifetime.Event {
        change == .delete ? .recordDeleted(at: time) : .replaced(at: time)
    }
}
