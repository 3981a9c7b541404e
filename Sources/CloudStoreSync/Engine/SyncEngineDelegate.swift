import CloudStoreWire
import Foundation

/// The app's side of a ``SyncEngine``: it persists what the engine reports and supplies the
/// records to send. As CKSyncEngine's `CKSyncEngineDelegate`.
///
/// The engine keeps a weak reference to its delegate: keep the delegate alive as long as the
/// engine (typically the delegate owns the engine).
///
/// ```swift
/// actor NotesSync: SyncEngineDelegate {
///     func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
///         if case .stateUpdate(let update) = event { store.saveState(update.stateSerialization) }
///     }
///
///     func nextRecordZoneChangeBatch(
///         _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
///     ) async -> SyncEngine.RecordZoneChangeBatch? {
///         let changes = syncEngine.state.pendingRecordZoneChanges.filter { context.options.scope.contains($0) }
///         return await SyncEngine.RecordZoneChangeBatch(pendingChanges: changes, context: context) { recordID in
///             await self.record(for: recordID)
///         }
///     }
/// }
/// ```
public protocol SyncEngineDelegate: AnyObject, Sendable {
    /// Handles one event. The engine awaits it before delivering the next, so an implementation
    /// can save state and data in order. Do not await ``SyncEngine/sendChanges(_:)`` or
    /// ``SyncEngine/fetchChanges(_:)`` here: they wait for the operation that is delivering this
    /// event. Adding pending changes to ``SyncEngine/state`` is fine.
    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async

    /// Handles several events, in order, in one call. The engine gathers the events it has no
    /// answer to wait for (a send's start, its batches' answers and its end; a fetch's start, its
    /// zones and its pages) and delivers them before it next needs the delegate (a batch to ask
    /// for, an asset's file), before a page whose downloaded assets it removes afterwards, when
    /// it has a page and more pages follow, and before the operation that made them returns. The
    /// default handles each with ``handleEvent(_:syncEngine:)``.
    ///
    /// Implement it to save what several events carry in one transaction, as a send's last
    /// batch and its end, or a fetch of one page, usually are:
    ///
    /// ```swift
    /// func handleEvents(_ events: [SyncEngine.Event], syncEngine: SyncEngine) async {
    ///     try? await store.write { db in
    ///         for event in events { try apply(event, db) }   // records, tokens, state
    ///     }
    /// }
    /// ```
    func handleEvents(_ events: [SyncEngine.Event], syncEngine: SyncEngine) async

    /// The next batch of record changes to send, or nil when there is nothing more for now.
    ///
    /// Return only changes inside `context.options.scope`. Build the batch with
    /// ``SyncEngine/RecordZoneChangeBatch/init(pendingChanges:context:atomicByZone:recordProvider:)``, which stops at
    /// the engine's count and size limits and loads each record only when it fits.
    func nextRecordZoneChangeBatch(_ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine) async
        -> SyncEngine.RecordZoneChangeBatch?

    /// The options of a scheduled fetch; the default fetches everything. Not called for
    /// ``SyncEngine/fetchChanges(_:)``, which uses the options it is given.
    func nextFetchChangesOptions(_ context: SyncEngine.FetchChangesContext, syncEngine: SyncEngine) async
        -> SyncEngine.FetchChangesOptions

    /// A local file that already holds a fetched asset's bytes, or nil to have the engine download
    /// them. Asked only with ``SyncEngine/Configuration/assetDirectory`` set, before a page of
    /// fetched records is delivered, once per asset that has a `downloadURL`; the default answers nil.
    ///
    /// The engine sets the asset's `fileURL` to the answer without reading it, and never deletes
    /// that file. Apps that store assets by content answer from the checksum:
    ///
    /// ```swift
    /// func existingFile(for asset: Asset, syncEngine: SyncEngine) async -> URL? {
    ///     guard let name = AssetChecksum.fileName(of: asset.fileChecksum) else { return nil }
    ///     let file = photos.appendingPathComponent(name)
    ///     return FileManager.default.fileExists(atPath: file.path) ? file : nil
    /// }
    /// ```
    func existingFile(for asset: Asset, syncEngine: SyncEngine) async -> URL?
}

extension SyncEngineDelegate {
    /// Handles each event with ``handleEvent(_:syncEngine:)``, in order.
    public func handleEvents(_ events: [SyncEngine.Event], syncEngine: SyncEngine) async {
        for event in events { await handleEvent(event, syncEngine: syncEngine) }
    }

    /// Fetches what the scheduler chose: every zone with changes.
    public func nextFetchChangesOptions(_ context: SyncEngine.FetchChangesContext, syncEngine: SyncEngine) async
        -> SyncEngine.FetchChangesOptions
    {
        context.options
    }

    /// Answers nil: the engine downloads every asset.
    public func existingFile(for asset: Asset, syncEngine: SyncEngine) async -> URL? { nil }
}
