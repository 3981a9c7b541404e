import CloudStoreSync
import Foundation

/// Why a container call failed.
///
/// ```swift
/// do {
///     try await container.waitUntilSynced(timeout: .seconds(30))
/// } catch ContainerError.syncFailed(let failure) where failure.code == .authenticationFailed {
///     // Ask the user to sign in again; local data and pending uploads are kept.
/// }
/// ```
public enum ContainerError: Error, Sendable, CustomStringConvertible {
    /// The container has no server: it keeps the store local only.
    case localOnly
    /// Not in sync within the time given; the last failure says why, if one happened.
    case timedOut(Duration, lastFailure: PersistentCloudContainer.SyncFailure?)
    /// The server refused some uploads for good (record name → error); the changes stay local
    /// until the app changes those objects again.
    case uploadsRefused([String: ServerError])
    /// A request failed in a way retrying does not fix: the server rejected the credentials
    /// (`code` is `AUTHENTICATION_FAILED`), or a bad request.
    case syncFailed(PersistentCloudContainer.SyncFailure)
    /// A save changed an object (or added one) in a zone another user shared with this user
    /// read-only; nothing of the unit of work was saved.
    case readOnlyShare(entityName: String, id: UUID, owner: String)
    /// A sharing call could not be done as asked: the message names what and what to do.
    case sharing(String)
    /// Syncing waits for the app to decide what happens to the local data (the zone was deleted
    /// on the server, or another user signed in): call ``PersistentCloudContainer/decide(_:)``.
    case localDataDecisionNeeded(PersistentCloudContainer.LocalDataDecision)
    /// ``PersistentCloudContainer/decide(_:)`` was called with no decision pending.
    case noLocalDataDecision
    /// Another container (in this process or another) mirrors the store file at this path: one
    /// syncs at a time. Write the file from here with a plain `PersistentStore`; the container
    /// that mirrors it sends what this process saves.
    case alreadyMirrored(String)

    /// What failed and what to do, naming the records, objects or users concerned.
    public var description: String {
        switch self {
        case .localOnly:
            return "the container has no server configured; it keeps the store local only"
        case .timedOut(let timeout, let failure):
            return "not in sync after \(timeout)" + (failure.map { "; last failure: \($0)" } ?? "")
        case .uploadsRefused(let errors):
            let list = errors.sorted { $0.key < $1.key }.prefix(5).map { "\($0.key): \($0.value)" }.joined(separator: "; ")
            return "the server refused \(errors.count) upload(s), kept locally until those objects change again: \(list)"
        case .syncFailed(let failure):
            return "sync failed: \(failure)"
        case .readOnlyShare(let entityName, let id, let owner):
            return "\(entityName) \(id.uuidString) is in a zone \(owner) shares with you read-only: nothing of this unit of work was saved; you may read it but not change it (ask \(owner) for READ_WRITE)"
        case .sharing(let message):
            return message
        case .localDataDecisionNeeded(let decision):
            return "syncing waits for the app to decide what happens to this device's data: \(decision); call decide(.uploadAgain), decide(.keepLocalOnly) or decide(.deleteLocalData)"
        case .alreadyMirrored(let path):
            return "another container mirrors \(path) (one syncs at a time): write to it from here with a plain PersistentStore, whose saves that container sends, or close the other container first"
        case .noLocalDataDecision:
            return "no decision about local data is pending: decide(_:) answers one that status().localDataDecision or a localDataDecision event announced"
        }
    }

    /// What a container says when the server rejects its credentials.
    static let credentialsRejected =
        "the server rejected the container's credentials (its token); local data and pending uploads are kept: open the container again with a valid token"
}
