import CloudStoreSync
import Foundation

/// What mirror work learned in one store transaction and leaves to do once it committed, applied
/// once by ``CloudMirror``: engines to wake (and zones to save first), events for the app, the
/// failures that mark the import or export under way, fetches to ask for, engines to stop or
/// start again. Facts the store keeps are not here: the work writes them in its transaction
/// (the ledger, the zone rows, the last failure), and this value says only what follows from them.
///
/// Work threads it through the calls that may add to it (`inout`), so each function says by its
/// signature whether it changes what happens after the commit.
struct MirrorEffects: Sendable {
    /// What the work did, for the import and export events.
    var counts = MirrorCounts()
    /// The databases whose engines the work left uploads for: woken after the commit.
    var wake: Set<DatabaseScope> = []
    /// Zones of the private database to save before the uploads into them, read from their rows
    /// once the work is done (``Ledger/zonesToSave()``): asked for with the wake.
    var zonesToSave: [ZoneID] = []
    /// Zones the engine no longer saves: on the server now, or held by a decision of the app.
    var zonesNotToSave: [ZoneID] = []
    /// Who joined, left, was invited or removed (already in the share activity log), for one
    /// event of kind ``PersistentCloudContainer/Event/Kind/sharing``.
    var shareActivity: [PersistentCloudContainer.ShareActivity] = []
    /// Fetched records refused because an encrypted field did not open, for one event of kind
    /// ``PersistentCloudContainer/Event/Kind/decryptionRefused``.
    var decryptionRefusals: [PersistentCloudContainer.DecryptionRefusal] = []
    /// The app's events: imports and exports starting, progressing and ending, decisions about
    /// local data it is asked for (already in their zones' rows).
    var events: [PersistentCloudContainer.Event] = []
    /// Failures the work recorded (``MirrorStateKey/lastError``): they mark the import or export
    /// under way as failed.
    var failures: [PersistentCloudContainer.SyncFailure] = []
    /// Saves whose version the server no longer has, which wait for a fetch
    /// (``UnheardCreates/lostOnServer(_:)``), by record name.
    var waitForFetch: Set<String> = []
    /// Files kept for records waiting for their key may be unneeded since
    /// (``CloudMirror/removeUnneededWaitingFiles()``).
    var sweepWaitingFiles = false
    /// Databases to fetch soon.
    var fetch: Set<DatabaseScope> = []
    /// The signed-in user changed: the keyring is read again from the key store for them.
    var loadKeyring = false
    /// What becomes of the engines.
    var engines: EngineChange?

    // MARK: The work's own bookkeeping, used up inside the transaction

    /// Objects whose parent an import deleted without cascading (``MirrorWrite/deleteImported(entityName:id:_:)``),
    /// logged once the work is done if their reference is still cleared (``MirrorWrite/logOrphans(_:)``).
    var orphans: [Orphan] = []

    /// What becomes of the engines once the transaction committed.
    enum EngineChange: Sendable, Hashable {
        /// Every engine stops: another user's credentials, the app decides.
        case stopAll
        /// Every engine starts again with no state, as the new user's.
        case restartAll
        /// The public database's engine starts again with no state: everyone's public objects
        /// are fetched again.
        case restartPublic
    }

    /// Wakes every engine.
    mutating func wakeAll() {
        wake.formUnion(DatabaseScope.allCases)
    }

    /// What two pieces of work leave to do, the later's after the earlier's.
    mutating func merge(_ later: MirrorEffects) {
        counts = counts + later.counts
        wake.formUnion(later.wake)
        zonesToSave += later.zonesToSave.filter { !zonesToSave.contains($0) }
        zonesNotToSave += later.zonesNotToSave.filter { !zonesNotToSave.contains($0) }
        shareActivity += later.shareActivity
        decryptionRefusals += later.decryptionRefusals
        events += later.events
        failures += later.failures
        waitForFetch.formUnion(later.waitForFetch)
        sweepWaitingFiles = sweepWaitingFiles || later.sweepWaitingFiles
        fetch.formUnion(later.fetch)
        loadKeyring = loadKeyring || later.loadKeyring
        engines = later.engines ?? engines
        orphans += later.orphans
    }
}
