import CloudStoreWire
import Logging

extension SyncEngine {
    /// Asks the server who the credentials belong to, once per engine, before the first operation,
    /// and compares with the saved state: no saved user → sign-in; another user → account switch,
    /// which drops the old user's tokens and pending changes, as CKSyncEngine does.
    func checkAccount() async throws {
        guard !hasCheckedAccount else { return }
        let userRecordName = try await database.caller().userRecordName
        currentUserRecordName = userRecordName
        hasCheckedAccount = true
        let previous = state.withStorage { $0.userRecordName }
        let change: Event.AccountChange.ChangeType?
        switch previous {
        case nil:
            state.withStorage { $0.userRecordName = userRecordName }
            change = .signIn(currentUser: userRecordName)
        case userRecordName?:
            change = nil
        case let previous?:
            state.withStorage { $0.reset(userRecordName: userRecordName) }
            change = .switchAccounts(previousUser: previous, currentUser: userRecordName)
        }
        guard let change else { return }
        logger.notice("Account changed", metadata: ["change": "\(change)"])
        emit(.accountChange(Event.AccountChange(changeType: change)))
        emitStateUpdateIfNeeded()
    }
}
