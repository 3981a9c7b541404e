import Foundation

/// What the container does with local data when the server deletes or purges the primary zone or
/// reports another user: decided here, without I/O, from the event and the app's configured
/// policy, so tests drive each case directly. ``CloudMirror`` carries the decision out.
///
/// | event | policy | action |
/// |---|---|---|
/// | zone deleted | `ask` (default) | ask the app |
/// | zone deleted | `deleteLocalData` | delete the local data |
/// | zone deleted | `reupload` | upload again |
/// | zone purged | `ask` (default) | ask the app |
/// | zone purged | `deleteLocalData` or `reupload` | delete the local data (a purge is a deliberate erase; uploading would undo it) |
/// | another user | `ask` (default) | ask the app |
/// | another user | `replaceLocalData` | delete the local data (every zone) |
/// | another user | `keepLocalData` | upload again, to the new user |
///
/// The defaults ask because nothing this device did not upload may be deleted without a call the
/// app made: a configured policy other than `ask` is such a call, made in advance.
enum LocalDataRules {
    enum Action: Equatable {
        case ask
        case apply(PersistentCloudContainer.LocalDataChoice)
    }

    static func zoneDeleted(purged: Bool, policy: PersistentCloudContainer.ZoneDeletionPolicy) -> Action {
        switch policy {
        case .ask: .ask
        case .deleteLocalData: .apply(.deleteLocalData)
        case .reupload: purged ? .apply(.deleteLocalData) : .apply(.uploadAgain)
        }
    }

    static func accountChanged(policy: PersistentCloudContainer.AccountChangePolicy) -> Action {
        switch policy {
        case .ask: .ask
        case .replaceLocalData: .apply(.deleteLocalData)
        case .keepLocalData: .apply(.uploadAgain)
        }
    }

    /// Whether an engine's report clears a pending decision about an account change: an engine
    /// that began a fetch or a send without reporting a switch has the previous user's
    /// credentials again (the user signed back in), so the data is theirs and nothing is decided.
    static func userReturned(to decision: PersistentCloudContainer.LocalDataDecision, engineReportedSwitch: Bool) -> Bool {
        guard case .accountChanged = decision.reason else { return false }
        return !engineReportedSwitch
    }
}
