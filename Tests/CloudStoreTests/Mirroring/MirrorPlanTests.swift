@testable import CloudStore
import CloudStoreSync
import Testing

/// The mirror's decisions, event in, steps out (``MirrorPlan``): one row per case, no store,
/// no server.
@Suite("Mirror plan: what each zone or account event does")
struct MirrorPlanTests {
    typealias Step = MirrorPlan.Step
    typealias Deletion = SyncEngine.Event.FetchedDatabaseChanges.Deletion

    static let primary = ZoneID(zoneName: "Notes")
    static let ownedShare = ZoneID(zoneName: "Notes.share-1")
    static let sharedWithMe = ZoneID(zoneName: "Trip", ownerRecordName: "_bob")

    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        var event: MirrorPlan.Event
        var scope: DatabaseScope = .private
        var facts = MirrorPlan.Facts(primaryZone: .saved)
        var zonePolicy: PersistentCloudContainer.ZoneDeletionPolicy = .ask
        var accountPolicy: PersistentCloudContainer.AccountChangePolicy = .ask
        var steps: [Step]

        var testDescription: String { name }
    }

    static func deleted(_ zone: ZoneID, _ reason: Zone.DeletionReason) -> MirrorPlan.Event {
        .zonesChanged(modified: [], deleted: [Deletion(zoneID: zone, reason: reason)])
    }

    static let switched = SyncEngine.Event.AccountChange.ChangeType.switchAccounts(previousUser: "_alice", currentUser: "_bob")

    static let rows: [Row] = [
        // The account.
        Row(name: "first sign-in is recorded", event: .accountChanged(.signIn(currentUser: "_alice")), steps: [.recordSignIn(user: "_alice")]),
        Row(name: "the shared engine's sign-in is the private one's", event: .accountChanged(.signIn(currentUser: "_alice")), scope: .shared, steps: []),
        Row(name: "rejected credentials change nothing local", event: .accountChanged(.signOut(previousUser: "_alice")), steps: [.recordSignOut]),
        Row(name: "another user: ask by default", event: .accountChanged(switched), steps: [.ask(.accountChanged(previousUser: "_alice", currentUser: "_bob"))]),
        Row(name: "another user seen by the shared engine: ask too", event: .accountChanged(switched), scope: .shared, steps: [.ask(.accountChanged(previousUser: "_alice", currentUser: "_bob"))]),
        Row(name: "the public engine's sign-in is the private one's", event: .accountChanged(.signIn(currentUser: "_alice")), scope: .public, steps: []),
        Row(name: "the public database's zone listed: nothing to adopt", event: .zonesChanged(modified: [.publicDefault], deleted: []), scope: .public, steps: []),
        Row(name: "another user, replaceLocalData", event: .accountChanged(switched), accountPolicy: .replaceLocalData, steps: [.applyAccountChoice(.deleteLocalData, newUser: "_bob")]),
        Row(name: "another user, keepLocalData", event: .accountChanged(switched), accountPolicy: .keepLocalData, steps: [.applyAccountChoice(.uploadAgain, newUser: "_bob")]),
        Row(name: "another user, policy, shared engine: the private one acts", event: .accountChanged(switched), scope: .shared, accountPolicy: .keepLocalData, steps: []),
        Row(name: "a sync begins with the previous user back", event: .began, facts: .init(primaryZone: .saved, decision: .accountChanged(previousUser: "_alice", currentUser: "_bob"), accountUnconfirmed: true), steps: [.confirmUserReturned]),
        Row(name: "a sync begins, nothing to confirm", event: .began, steps: []),
        // The primary zone deleted or purged on the server.
        Row(name: "zone deleted: ask by default", event: deleted(primary, .deleted), steps: [.ask(.zoneDeleted)]),
        Row(name: "zone purged: ask by default", event: deleted(primary, .purged), steps: [.ask(.zonePurged)]),
        Row(name: "zone deleted, reupload", event: deleted(primary, .deleted), zonePolicy: .reupload, steps: [.applyZoneChoice(.uploadAgain)]),
        Row(name: "zone purged, reupload: a purge is not undone", event: deleted(primary, .purged), zonePolicy: .reupload, steps: [.applyZoneChoice(.deleteLocalData)]),
        Row(name: "zone deleted, deleteLocalData", event: deleted(primary, .deleted), zonePolicy: .deleteLocalData, steps: [.applyZoneChoice(.deleteLocalData)]),
        Row(name: "this device's own purge coming back", event: deleted(primary, .purged), facts: .init(primaryZone: .purged), steps: [.setPrimaryZone(.unsaved)]),
        Row(name: "zone deleted while the app decides: nothing more", event: deleted(primary, .deleted), facts: .init(primaryZone: .saved, decision: .zoneDeleted), zonePolicy: .reupload, steps: []),
        // Zones appearing.
        Row(name: "another device made the primary zone", event: .zonesChanged(modified: [primary], deleted: []), facts: .init(primaryZone: .unsaved), steps: [.setPrimaryZone(.saved)]),
        Row(name: "the primary zone changed, already saved", event: .zonesChanged(modified: [primary], deleted: []), steps: []),
        Row(name: "the primary zone changed and deleted in one fetch", event: .zonesChanged(modified: [primary], deleted: [Deletion(zoneID: primary, reason: .deleted)]), facts: .init(primaryZone: .unsaved), steps: [.ask(.zoneDeleted)]),
        Row(name: "shares appear", event: .zonesChanged(modified: [primary, ownedShare, sharedWithMe], deleted: []), steps: [.adoptZones([ownedShare, sharedWithMe])]),
        Row(name: "a zone shared with me goes away", event: deleted(sharedWithMe, .unshared), scope: .shared, steps: [.removeShareZone(sharedWithMe, .unshared)]),
        Row(name: "an owned share's zone deleted on another device", event: deleted(ownedShare, .deleted), steps: [.removeShareZone(ownedShare, .deleted)]),
        Row(name: "a share ends while this device holds unsent changes of it: ask", event: deleted(sharedWithMe, .unshared), scope: .shared, facts: .init(primaryZone: .saved, unsentChanges: [sharedWithMe: 2]), steps: [.askAboutShare(sharedWithMe)]),
        Row(name: "an owned share's zone deleted elsewhere, unsent changes here: ask", event: deleted(ownedShare, .deleted), facts: .init(primaryZone: .saved, unsentChanges: [ownedShare: 1]), steps: [.askAboutShare(ownedShare)]),
        Row(name: "uploads find a zone shared with me missing, unsent changes: ask", event: .zonesMissing([sharedWithMe]), scope: .shared, facts: .init(primaryZone: .saved, unsentChanges: [sharedWithMe: 1]), steps: [.askAboutShare(sharedWithMe)]),
        // Zones saved.
        Row(name: "the primary zone saved", event: .zonesSaved([primary]), facts: .init(primaryZone: .unsaved), steps: [.setPrimaryZone(.saved)]),
        Row(name: "the primary zone saved after this device's purge", event: .zonesSaved([primary]), facts: .init(primaryZone: .purged), steps: [.setPrimaryZone(.saved)]),
        Row(name: "a share's zone saved", event: .zonesSaved([ownedShare]), steps: [.shareZonesSaved([ownedShare])]),
        // Zones missing.
        Row(name: "uploads find the primary zone missing: a fetch says why", event: .zonesMissing([primary]), steps: [.setPrimaryZone(.missing), .fetch]),
        Row(name: "missing again: fetch", event: .zonesMissing([primary]), facts: .init(primaryZone: .missing), steps: [.fetch]),
        Row(name: "an owned share's zone missing: saved again", event: .zonesMissing([ownedShare]), steps: [.uploadShareZoneAgain(ownedShare)]),
        Row(name: "a zone shared with me missing: gone", event: .zonesMissing([sharedWithMe]), scope: .shared, steps: [.removeShareZone(sharedWithMe, .deleted)]),
        Row(name: "the fetch after did not report a deletion: the server lost it", event: .fetchEnded(complete: true), facts: .init(primaryZone: .missing), steps: [.applyZoneChoice(.uploadAgain)]),
        Row(name: "an incomplete fetch proves nothing", event: .fetchEnded(complete: false), facts: .init(primaryZone: .missing), steps: []),
        Row(name: "a fetch with nothing missing", event: .fetchEnded(complete: true), steps: []),
        Row(name: "the shared engine's fetch says nothing of the primary zone", event: .fetchEnded(complete: true), scope: .shared, facts: .init(primaryZone: .missing), steps: []),
        Row(name: "missing while the app decides: nothing", event: .fetchEnded(complete: true), facts: .init(primaryZone: .missing, decision: .zoneDeleted), steps: []),
        Row(name: "a fetch from scratch finds the primary zone gone", event: .zoneNotFound(primary), steps: [.applyZoneChoice(.uploadAgain)]),
        Row(name: "a fetch from scratch finds an owned share's zone gone", event: .zoneNotFound(ownedShare), steps: [.uploadShareZoneAgain(ownedShare)]),
    ]

    @Test(arguments: rows)
    func eachEventGivesItsSteps(_ row: Row) {
        let plan = MirrorPlan(primaryZone: Self.primary, zoneDeletionPolicy: row.zonePolicy, accountChangePolicy: row.accountPolicy)
        #expect(plan.steps(for: row.event, scope: row.scope, facts: row.facts) == row.steps)
    }

    @Test func theDefaultsAsk() {
        #expect(PersistentCloudContainer.Options().zoneDeletionPolicy == .ask)
        #expect(PersistentCloudContainer.Options().accountChangePolicy == .ask)
    }

    @Test func onlyAnUnsavedOrPurgedZoneIsSaved() {
        #expect(ZoneServerState.allCases.filter(\.needsSave) == [.unsaved, .purged])
    }
}
