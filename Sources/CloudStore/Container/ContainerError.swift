import CloudStoreSync
import Foundation

/// Why a container call failed, with a message that names the records, objects or users concerned
/// and what to do.
///
/// Match a kind of failure by its ``code``; what a failure carries is in its properties:
///
/// ```swift
/// do {
///     try await container.waitUntilSynced(timeout: .seconds(30))
/// } catch let error as ContainerError where error.failure?.code == .authenticationFailed {
///     // Ask the user to sign in again; local data and pending uploads are kept.
/// } catch ContainerError.Code.localDataDecisionNeeded {
///     // Ask the user, then call container.decide(_:zoneID:).
/// }
/// ```
public struct ContainerError: Error, Sendable, CustomStringConvertible {
    /// The kind of failure. Open: a later version may add codes.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The code's name, as in `syncFailed`.
        public var rawValue: String
        /// The code named `rawValue`; use the constants below.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The code's name.
        public var description: String { rawValue }

        /// The container has no server: it keeps the store local only.
        public static let localOnly = Code(rawValue: "localOnly")
        /// Not in sync within the time given; ``ContainerError/failure`` is the last failure, if
        /// one happened.
        public static let timedOut = Code(rawValue: "timedOut")
        /// The server refused some uploads for good (``ContainerError/refusedUploads``); the changes
        /// stay local until the app changes those objects again.
        public static let uploadsRefused = Code(rawValue: "uploadsRefused")
        /// A request failed in a way retrying does not fix (``ContainerError/failure``): the server
        /// rejected the credentials (`AUTHENTICATION_FAILED`), or a bad request.
        public static let syncFailed = Code(rawValue: "syncFailed")
        /// A save changed an object (or added one) in a zone another user shared with this user
        /// read-only; nothing of the unit of work was saved.
        public static let readOnlyShare = Code(rawValue: "readOnlyShare")
        /// A sharing call could not be done as asked: the message names what and what to do.
        public static let sharing = Code(rawValue: "sharing")
        /// Syncing waits for the app to decide what happens to the local data
        /// (``ContainerError/localDataDecision``): call ``PersistentCloudContainer/decide(_:zoneID:)``.
        public static let localDataDecisionNeeded = Code(rawValue: "localDataDecisionNeeded")
        /// ``PersistentCloudContainer/decide(_:zoneID:)`` was called with no decision pending.
        public static let noLocalDataDecision = Code(rawValue: "noLocalDataDecision")
        /// Another container (in this process or another) mirrors the store file: one syncs at a
        /// time. Write the file from here with a plain `PersistentStore`; the container that
        /// mirrors it sends what this process saves.
        public static let alreadyMirrored = Code(rawValue: "alreadyMirrored")
        /// The container's options do not fit its schema (an entity of
        /// ``PersistentCloudContainer/Options/publicEntities`` it lacks, say); the message names
        /// what and what to do. Nothing was opened.
        public static let invalidOptions = Code(rawValue: "invalidOptions")
        /// A save changed or deleted an object of the public database that another user created:
        /// there, only a record's creator may change it. Nothing of the unit of work was saved.
        public static let notCreator = Code(rawValue: "notCreator")
        /// ``PersistentCloudContainer/setUpEncryption(passphrase:)`` was given a passphrase that
        /// does not unlock the user's account key. Nothing changed: ask the user again.
        public static let wrongPassphrase = Code(rawValue: "wrongPassphrase")
        /// The encryption key store could not be read or written (the message names the file
        /// and why); the key it should hold is not lost on the server.
        public static let encryptionKeyStore = Code(rawValue: "encryptionKeyStore")
        /// ``PersistentCloudContainer/waitUntilSynced(timeout:)`` found nothing pending but
        /// changes of objects with encrypted attributes, which wait for the user's key: call
        /// ``PersistentCloudContainer/setUpEncryption(passphrase:)``. They are kept.
        public static let encryptionKeyNeeded = Code(rawValue: "encryptionKeyNeeded")
    }

    /// The kind of failure, to match on.
    public var code: Code
    /// What failed and what to do, naming the records, objects or users concerned.
    public var message: String
    /// For ``Code/syncFailed``, the failure; for ``Code/timedOut``, the last one, if any.
    public var failure: PersistentCloudContainer.SyncFailure?
    /// For ``Code/uploadsRefused``, each refused record's name and the server's error.
    public var refusedUploads: [String: ServerError] = [:]
    /// For ``Code/localDataDecisionNeeded``, the decision the app is to make.
    public var localDataDecision: PersistentCloudContainer.LocalDataDecision?

    /// An error of `code` with `message`.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// The message.
    public var description: String { message }

    static let localOnly = ContainerError(
        .localOnly, "the container has no server configured; it keeps the store local only")

    static func timedOut(_ timeout: Duration, lastFailure: PersistentCloudContainer.SyncFailure?) -> ContainerError {
        var error = ContainerError(.timedOut, "not in sync after \(timeout)" + (lastFailure.map { "; last failure: \($0)" } ?? ""))
        error.failure = lastFailure
        return error
    }

    static func uploadsRefused(_ errors: [String: ServerError]) -> ContainerError {
        let list = errors.sorted { $0.key < $1.key }.prefix(5).map { "\($0.key): \($0.value)" }.joined(separator: "; ")
        var error = ContainerError(
            .uploadsRefused, "the server refused \(errors.count) upload(s), kept locally until those objects change again: \(list)")
        error.refusedUploads = errors
        return error
    }

    static func syncFailed(_ failure: PersistentCloudContainer.SyncFailure) -> ContainerError {
        var error = ContainerError(.syncFailed, "sync failed: \(failure)")
        error.failure = failure
        return error
    }

    static func readOnlyShare(entityName: String, id: UUID, owner: String) -> ContainerError {
        ContainerError(
            .readOnlyShare,
            "\(entityName) \(id.uuidString) is in a zone \(owner) shares with you read-only: nothing of this unit of work was saved; you may read it but not change it (ask \(owner) for READ_WRITE)")
    }

    static func invalidOptions(_ message: String) -> ContainerError {
        ContainerError(.invalidOptions, message)
    }

    static func notCreator(entityName: String, id: UUID, creator: String) -> ContainerError {
        ContainerError(
            .notCreator,
            "\(entityName) \(id.uuidString) is in the public database and \(creator) created it: only its creator may change or delete it; nothing of this unit of work was saved")
    }

    static func sharing(_ message: String) -> ContainerError {
        ContainerError(.sharing, message)
    }

    static func localDataDecisionNeeded(_ decision: PersistentCloudContainer.LocalDataDecision) -> ContainerError {
        var error = ContainerError(
            .localDataDecisionNeeded,
            "syncing waits for the app to decide what happens to this device's data: \(decision); call decide(.uploadAgain), decide(.keepLocalOnly) or decide(.deleteLocalData)")
        error.localDataDecision = decision
        return error
    }

    static let noLocalDataDecision = ContainerError(
        .noLocalDataDecision,
        "no decision about local data is pending (for that zone): decide(_:zoneID:) answers one that status().localDataDecision, status().endedShares or a localDataDecision event announced")

    static func alreadyMirrored(_ path: String) -> ContainerError {
        ContainerError(
            .alreadyMirrored,
            "another container mirrors \(path) (one syncs at a time): write to it from here with a plain PersistentStore, whose saves that container sends, or close the other container first")
    }

    /// What a container says when the server rejects its credentials.
    static let credentialsRejected =
        "the server rejected the container's credentials (its token); local data and pending uploads are kept: open the container again with a valid token"
}

extension ContainerError.Code {
    /// Lets `catch ContainerError.Code.localDataDecisionNeeded { … }` match a container error by
    /// its code.
    public static func ~= (code: ContainerError.Code, error: any Error) -> Bool {
        (error as? ContainerError)?.code == code
    }
}
