import CloudStoreWire

/// The codes a failed asset upload reports in a record's error.
extension ServerErrorCode {
    /// (client) A record's asset names a local file (`fileURL`) the engine cannot read: it is
    /// missing, or not readable. The record was not sent; the error's `reason` names the record,
    /// the field and the path. Restore the file, or save the record without that asset, then add
    /// the save again.
    ///
    /// ```swift
    /// for failure in sent.failedRecordSaves where failure.error.code == .assetFileUnavailable {
    ///     logger.error("photo missing", metadata: ["record": "\(failure.record.recordID)"])
    /// }
    /// ```
    public static let assetFileUnavailable = ServerErrorCode(rawValue: "ASSET_FILE_UNAVAILABLE")

    /// (client) The bytes uploaded for a record's asset have another checksum or size than the
    /// `Asset` says: the file changed after the asset was made, or it is corrupt. The record was
    /// not sent; the error's `reason` names the record, the field and both checksums. Make the
    /// asset again with `Asset(contentsOf:)` and add the save again.
    public static let assetFileChanged = ServerErrorCode(rawValue: "ASSET_FILE_CHANGED")
}
