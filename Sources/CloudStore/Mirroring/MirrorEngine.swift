import CloudStoreSync
import Foundation
import Synchronization

/// The sync engine as the mirror uses it, one per database: ``SyncEngine``, or in tests an engine
/// the test scripts, so the mirror's handling of each event is driven event by event without a
/// server (``CloudMirror/handle(_:from:)``, ``CloudMirror/nextBatch(_:for:)``).
///
/// The mirror tells an engine that uploads are pending through its ``state`` (``EngineWake``),
/// asks it to send or fetch when the app does, and stops it when a decision of the app stops
/// syncing.
protocol MirrorEngine: AnyObject, Sendable {
    /// The database the engine syncs with.
    var database: any CloudDatabase { get }
    /// Where the mirror announces its pending uploads and the zones to save first.
    var state: SyncEngine.State { get }
    /// Sends what is pending in `options`' scope, now.
    func sendChanges(_ options: SyncEngine.SendChangesOptions) async throws
    /// Fetches the server's changes in `options`' scope, now.
    func fetchChanges(_ options: SyncEngine.FetchChangesOptions) async throws
    /// Ends the operations under way; what they carried stays pending.
    func cancelOperations() async
}

extension SyncEngine: MirrorEngine {}

extension MirrorEngine {
    /// The database the engine syncs with: private, shared or public.
    var scope: DatabaseScope { database.scope }
}

/// Tells the engines that uploads are pending, from any thread: after a save committed some (the
/// ``PendingUploadRecorder``), or mirror work did (``MirrorEffects/wake``). Zones of the private
/// database that are not on the server yet are asked for with the wake, so the engine saves them
/// before the uploads into them; which ones is read from their rows in the transaction that made
/// the uploads pending (``Ledger/zonesToSave()``). The engines' states are the only thing kept.
final class EngineWake: Sendable {
    private let states = Mutex<[DatabaseScope: SyncEngine.State]>([:])

    /// The engine of a database to tell from now on. Zone saves its saved state still asks for
    /// are dropped: the wakes ask for those that are needed.
    func attach(_ state: SyncEngine.State, scope: DatabaseScope) {
        let saves = state.pendingDatabaseChanges.filter { if case .saveZone = $0 { true } else { false } }
        state.remove(pendingDatabaseChanges: saves)
        states.withLock { $0[scope] = state }
    }

    /// Forgets every engine (they stopped).
    func detachAll() {
        states.withLock { $0 = [:] }
    }

    /// Tells the engines of `scopes` that uploads are pending; the private one first saves `zones`.
    func wake(_ scopes: Set<DatabaseScope>, saving zones: [ZoneID] = []) {
        let states = states.withLock { $0 }
        for scope in scopes.sorted(by: { $0.rawValue < $1.rawValue }) {
            guard let state = states[scope] else { continue }
            if scope == .private, !zones.isEmpty {
                state.add(pendingDatabaseChanges: zones.sorted { $0.zoneName < $1.zoneName }.map { .saveZone($0) })
            }
            state.hasPendingUntrackedChanges = true
        }
    }

    /// Takes back the saves of zones no longer to save: on the server now, or held by a decision.
    func cancelSaves(of zones: [ZoneID]) {
        guard !zones.isEmpty, let state = states.withLock({ $0[.private] }) else { return }
        state.remove(pendingDatabaseChanges: zones.map { .saveZone($0) })
    }
}
