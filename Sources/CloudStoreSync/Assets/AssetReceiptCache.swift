import CloudStoreWire

/// Receipts of recent uploads, so that a batch sent again soon (after a conflict, a missing zone
/// or a transient failure) does not upload the same bytes again. An entry holds for one asset
/// (checksum and size) in one field of one record, for ``lifetime`` by the engine's clock, and is
/// dropped once its record is saved or the server refused it.
struct AssetReceiptCache: Sendable {
    struct Key: Hashable, Sendable {
        var recordID: RecordID
        var fieldName: String
        var fileChecksum: String
        var size: Int64
    }

    /// Well inside the 15 minutes an upload URL is valid; receipts are not promised to last longer.
    static let lifetime: Duration = .seconds(600)

    private var entries: [Key: (asset: Asset, uploadedAt: Duration)] = [:]

    /// The asset (with its receipt) uploaded for `key` less than ``lifetime`` ago.
    mutating func asset(for key: Key, now: Duration) -> Asset? {
        entries = entries.filter { now - $0.value.uploadedAt < Self.lifetime }
        return entries[key]?.asset
    }

    mutating func insert(_ asset: Asset, for key: Key, now: Duration) {
        entries[key] = (asset, now)
    }

    /// Forgets the receipts of these records.
    mutating func remove(_ recordIDs: some Sequence<RecordID>) {
        let recordIDs = Set(recordIDs)
        entries = entries.filter { !recordIDs.contains($0.key.recordID) }
    }
}
