import CloudStoreWire

extension SyncEngine {
    /// What happened, delivered in order to ``SyncEngineDelegate/handleEvents(_:syncEngine:)``
    /// (by default one at a time to ``SyncEngineDelegate/handleEvent(_:syncEngine:)``): the engine
    /// awaits each delivery before the next, and delivers the events of an operation before it
    /// next calls the delegate and before the operation returns. As CKSyncEngine's `Event`.
    ///
    /// A fetch delivers `willFetchChanges`, then `fetchedDatabaseChanges` (zero or more), then per
    /// zone `willFetchRecordZoneChanges`, `fetchedRecordZoneChanges` (one per page) and
    /// `didFetchRecordZoneChanges`, then `didFetchChanges`. A send delivers `willSendChanges`,
    /// `sentDatabaseChanges` and `sentRecordZoneChanges` (one per batch), then `didSendChanges`.
    /// `stateUpdate` follows every change of the state, and `accountChange` comes before the first
    /// fetch or send of an engine when the user differs from the saved state's.
    ///
    /// ```swift
    /// func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
    ///     switch event {
    ///     case .stateUpdate(let update): store.saveState(update.stateSerialization)
    ///     case .fetchedRecordZoneChanges(let changes): store.apply(changes)  // records + state, one transaction
    ///     case .sentRecordZoneChanges(let sent): store.acknowledge(sent)
    ///     default: break
    ///     }
    /// }
    /// ```
    public enum Event: Sendable, CustomStringConvertible {
        /// The state changed (pending changes, tokens, the user): save its serialization.
        case stateUpdate(StateUpdate)
        /// The user signed in, switched, or the server rejected the credentials and the engine
        /// stopped.
        case accountChange(AccountChange)
        /// A page of the database's changed and deleted zones.
        case fetchedDatabaseChanges(FetchedDatabaseChanges)
        /// A page of one zone's changed and deleted records, with the state after it: save both in
        /// one transaction.
        case fetchedRecordZoneChanges(FetchedRecordZoneChanges)
        /// What the server did with the zone saves and deletes of a send.
        case sentDatabaseChanges(SentDatabaseChanges)
        /// What became of one batch of record saves and deletes, with the state after it: save the
        /// acknowledged records and the state in one transaction.
        case sentRecordZoneChanges(SentRecordZoneChanges)
        /// A fetch begins.
        case willFetchChanges(WillFetchChanges)
        /// The fetch of one zone's records begins.
        case willFetchRecordZoneChanges(WillFetchRecordZoneChanges)
        /// The fetch of one zone's records ended, completed or with an error.
        case didFetchRecordZoneChanges(DidFetchRecordZoneChanges)
        /// A fetch ended, completed or with an error.
        case didFetchChanges(DidFetchChanges)
        /// A send begins.
        case willSendChanges(WillSendChanges)
        /// A send ended, whether or not everything was sent.
        case didSendChanges(DidSendChanges)

        /// The event's name and counts, for logs (`sentRecordZoneChanges(3 saved, 0 failed saves, …)`);
        /// no record contents.
        public var description: String {
            switch self {
            case .stateUpdate: "stateUpdate"
            case .accountChange(let change): "accountChange(\(change.changeType))"
            case .fetchedDatabaseChanges(let changes):
                "fetchedDatabaseChanges(\(changes.modifications.count) modified, \(changes.deletions.count) deleted)"
            case .fetchedRecordZoneChanges(let changes):
                "fetchedRecordZoneChanges(\(changes.zoneID): \(changes.modifications.count) modified, "
                    + "\(changes.deletions.count) deleted)"
            case .sentDatabaseChanges(let sent):
                "sentDatabaseChanges(\(sent.savedZones.count) saved, \(sent.failedZoneSaves.count) failed saves, "
                    + "\(sent.deletedZoneIDs.count) deleted, \(sent.failedZoneDeletes.count) failed deletes)"
            case .sentRecordZoneChanges(let sent):
                "sentRecordZoneChanges(\(sent.savedRecords.count) saved, \(sent.failedRecordSaves.count) failed saves, "
                    + "\(sent.deletedRecordIDs.count) deleted, \(sent.failedRecordDeletes.count) failed deletes)"
            case .willFetchChanges: "willFetchChanges"
            case .willFetchRecordZoneChanges(let event): "willFetchRecordZoneChanges(\(event.zoneID))"
            case .didFetchRecordZoneChanges(let event):
                "didFetchRecordZoneChanges(\(event.zoneID)\(event.error.map { ", \($0)" } ?? ""))"
            case .didFetchChanges: "didFetchChanges"
            case .willSendChanges: "willSendChanges"
            case .didSendChanges: "didSendChanges"
            }
        }
    }
}

extension SyncEngine.Event {
    /// The state changed: persist ``stateSerialization``.
    public struct StateUpdate: Sendable {
        /// The engine's state as it is now; pass it to the next engine's
        /// ``SyncEngine/Configuration/stateSerialization``.
        public let stateSerialization: SyncEngine.State.Serialization
    }

    /// The user the server reports for the engine's credentials differs from the saved state's,
    /// or the server rejected the credentials.
    public struct AccountChange: Sendable {
        /// Which change happened, with the user record names involved.
        public enum ChangeType: Sendable, Hashable, CustomStringConvertible {
            /// First sync of this state: `currentUser` is signed in.
            case signIn(currentUser: String)
            /// The server rejected the credentials (`AUTHENTICATION_FAILED` or
            /// `AUTHENTICATION_REQUIRED`). The engine stopped; its state was kept, because a rejected
            /// token cannot be told from a sign-out: make a new engine with valid credentials and
            /// the saved state, and it checks the user again.
            case signOut(previousUser: String?)
            /// A different user than the saved state's. The engine dropped the old user's tokens
            /// and pending changes, as CKSyncEngine does; delete or re-upload local data per policy.
            case switchAccounts(previousUser: String, currentUser: String)

            /// The change and its users, for logs (`switchAccounts(_u1 → _u2)`).
            public var description: String {
                switch self {
                case .signIn(let user): "signIn(\(user))"
                case .signOut(let user): "signOut(\(user ?? "unknown"))"
                case .switchAccounts(let previous, let current): "switchAccounts(\(previous) → \(current))"
                }
            }
        }

        /// What changed.
        public let changeType: ChangeType
    }

    /// Zones that changed or were deleted on the server since the last fetch.
    public struct FetchedDatabaseChanges: Sendable {
        /// A zone deleted on the server, and why.
        public struct Deletion: Hashable, Sendable {
            /// The deleted zone, without an owner when it is the signed-in user's.
            public let zoneID: ZoneID
            /// `.deleted` (an app deleted it: re-upload or wipe per policy), `.purged` (the user
            /// purged their data: wipe the local copy and do not re-upload) or `.unshared` (a zone
            /// shared with the user that they can no longer reach: remove the local copy and do
            /// not re-upload).
            public let reason: Zone.DeletionReason

            /// A deletion as the engine reports it (a delegate's tests build their own).
            public init(zoneID: ZoneID, reason: Zone.DeletionReason) {
                self.zoneID = zoneID
                self.reason = reason
            }
        }

        /// Zones with changes; the engine fetches their records next.
        public let modifications: [ZoneID]
        /// Zones deleted on the server; the engine forgot their tokens.
        public let deletions: [Deletion]
    }

    /// One page of a zone's changes.
    ///
    /// ``stateSerialization`` already holds the zone's token after this page: save the page's
    /// records and this state in one transaction, so the token is never ahead of the data it
    /// covers.
    public struct FetchedRecordZoneChanges: Sendable {
        /// A record deleted on the server.
        public struct Deletion: Hashable, Sendable {
            /// The deleted record.
            public let recordID: RecordID
            /// The deleted record's type, when the server sent it.
            public let recordType: String?
        }

        /// The zone the page belongs to.
        public let zoneID: ZoneID
        /// Records in their latest server state, with their change tags.
        public let modifications: [Record]
        /// Records deleted on the server since the previous page's token.
        public let deletions: [Deletion]
        /// The state with the zone's token after this page: save it with the page's records.
        public let stateSerialization: SyncEngine.State.Serialization
    }

    /// The result of sending pending zone changes.
    ///
    /// Failed saves and deletes are no longer pending: transient failures never appear here (those
    /// changes stay pending and the engine retries them). A delete of a zone the server does not
    /// have counts as deleted.
    public struct SentDatabaseChanges: Sendable {
        /// A zone the server refused to create.
        public struct FailedZoneSave: Sendable {
            /// The zone, as the pending change named it.
            public let zoneID: ZoneID
            /// Why the server refused it.
            public let error: ServerError
        }

        /// Zones the server created (or already had), named as the pending changes named them.
        public let savedZones: [Zone]
        /// Zone saves the server refused for good.
        public let failedZoneSaves: [FailedZoneSave]
        /// Zones deleted; the engine forgot their tokens.
        public let deletedZoneIDs: [ZoneID]
        /// Zone deletes the server refused for good, with its error.
        public let failedZoneDeletes: [ZoneID: ServerError]
        /// The state without the settled zone changes.
        public let stateSerialization: SyncEngine.State.Serialization
    }

    /// The result of sending one batch of record changes.
    ///
    /// Saved records are the server's copies with their new change tags. Failed saves and deletes
    /// are the ones the engine will not retry by itself; they are no longer pending, so the
    /// delegate decides: merge a `CONFLICT` with `error.serverRecord` and add the save again,
    /// create the zone on `ZONE_NOT_FOUND` and add the save again, or give up.
    ///
    /// Changes the server did not take this time are in ``retryingRecordChanges``: a record's own
    /// transient error (`THROTTLED`, `TRY_AGAIN_LATER`, `INTERNAL_ERROR`), `QUOTA_EXCEEDED`, or a
    /// conflict whose server copy could not be looked up. They stay pending and the engine sends
    /// them again, after the longest `retryAfter` the server asked for; the delegate has nothing
    /// to do, but may show them. An `ATOMIC_ERROR` does not appear (the record only went down with
    /// another one of its atomic request, and goes again within the same send), nor does a request
    /// that failed as a whole (the network, a 503 for the whole request): the send throws that error.
    ///
    /// ``stateSerialization`` is the state after the acknowledged changes were removed: save the
    /// records' new change tags and this state in one transaction.
    ///
    /// ```swift
    /// case .sentRecordZoneChanges(let sent):
    ///     for (recordID, error) in sent.retryingRecordChanges {
    ///         logger.info("not taken yet, retrying", metadata: ["record": "\(recordID)", "error": "\(error.code)"])
    ///     }
    /// ```
    public struct SentRecordZoneChanges: Sendable {
        /// A record save the server refused for good, or that could not be sent.
        public struct FailedRecordSave: Sendable {
            /// The record as the engine tried to save it.
            public let record: Record
            /// The server's error; on `CONFLICT` and `EXISTS` its `serverRecord` is the server's
            /// current copy (looked up when the server did not send it), its assets downloaded
            /// with ``SyncEngine/Configuration/assetDirectory`` as a fetch's. A record whose asset could
            /// not be uploaded was not sent: `ASSET_FILE_UNAVAILABLE`
            /// (`ServerErrorCode.assetFileUnavailable`), `ASSET_FILE_CHANGED`
            /// (`ServerErrorCode.assetFileChanged`) or the upload's `LIMIT_EXCEEDED`, with a `reason`
            /// that names the record and the field.
            public let error: ServerError
        }

        /// The server's copies of the saved records, with their new change tags.
        public let savedRecords: [Record]
        /// Saves that failed for good: merge, fix or give up, and add them again to retry.
        public let failedRecordSaves: [FailedRecordSave]
        /// Records deleted (or already gone) on the server.
        public let deletedRecordIDs: [RecordID]
        /// Deletes that failed for good, with the server's error: `CONFLICT` when the record
        /// changed since the version the batch named (``SyncEngine/RecordZoneChangeBatch/recordChangeTagsToDelete``).
        public let failedRecordDeletes: [RecordID: ServerError]
        /// Saves and deletes the server did not take this time, with the error it answered for
        /// each (its `retryAfter` when it gave one): they stay pending and the engine sends them
        /// again. Empty when every change was settled.
        public let retryingRecordChanges: [RecordID: ServerError]
        /// The state without the acknowledged and failed changes: save it with the saved records.
        public let stateSerialization: SyncEngine.State.Serialization

        init(
            savedRecords: [Record], failedRecordSaves: [FailedRecordSave], deletedRecordIDs: [RecordID],
            failedRecordDeletes: [RecordID: ServerError], retryingRecordChanges: [RecordID: ServerError] = [:],
            stateSerialization: SyncEngine.State.Serialization
        ) {
            self.savedRecords = savedRecords
            self.failedRecordSaves = failedRecordSaves
            self.deletedRecordIDs = deletedRecordIDs
            self.failedRecordDeletes = failedRecordDeletes
            self.retryingRecordChanges = retryingRecordChanges
            self.stateSerialization = stateSerialization
        }
    }

    /// A fetch begins: ``SyncEngine/Event/didFetchChanges(_:)`` ends it.
    public struct WillFetchChanges: Sendable {
        /// Why the engine fetches, and what.
        public let context: SyncEngine.FetchChangesContext
    }

    /// The fetch of one zone's records begins; its pages follow, then
    /// ``SyncEngine/Event/didFetchRecordZoneChanges(_:)``.
    public struct WillFetchRecordZoneChanges: Sendable {
        /// The zone about to be fetched.
        public let zoneID: ZoneID
        /// True when the engine fetches the zone without a token: its first fetch, or a refetch
        /// after the server rejected the token (`CHANGE_TOKEN_EXPIRED`, `BAD_REQUEST`). The pages
        /// that follow hold every live record of the zone, so a local record that does not appear
        /// by ``DidFetchRecordZoneChanges`` no longer exists on the server.
        public let fromScratch: Bool
    }

    /// The fetch of one zone's records ended. With `ZONE_NOT_FOUND` the zone is gone from the
    /// server and the engine forgot its token; after a rejected token, the zone is fetched again
    /// from scratch right away (a new ``SyncEngine/Event/willFetchRecordZoneChanges(_:)`` follows).
    public struct DidFetchRecordZoneChanges: Sendable {
        /// The zone that was fetched.
        public let zoneID: ZoneID
        /// Why the zone's fetch stopped early; nil when it completed.
        public let error: CloudError?
    }

    /// A fetch ended, after every zone it fetched. A fetch that failed before it began (the
    /// engine could not ask the server who the user is) ends with its error and no
    /// ``SyncEngine/Event/willFetchChanges(_:)`` before it.
    public struct DidFetchChanges: Sendable {
        /// The fetch's context, as ``SyncEngine/Event/willFetchChanges(_:)`` gave it.
        public let context: SyncEngine.FetchChangesContext
        /// Why the fetch stopped early (the network, the server); nil when it completed. A zone
        /// that failed on its own is reported by ``SyncEngine/Event/didFetchRecordZoneChanges(_:)``.
        public let error: (any Error)?

        init(context: SyncEngine.FetchChangesContext, error: (any Error)? = nil) {
            self.context = context
            self.error = error
        }
    }

    /// A send begins: ``SyncEngine/Event/didSendChanges(_:)`` ends it.
    public struct WillSendChanges: Sendable {
        /// Why the engine sends, and what.
        public let context: SyncEngine.SendChangesContext
    }

    /// A send ended: everything in scope was sent, or it stopped on a failure and what is left stays
    /// pending. A send that failed before it began (the engine could not ask the server who the
    /// user is) ends with its error and no ``SyncEngine/Event/willSendChanges(_:)`` before it.
    public struct DidSendChanges: Sendable {
        /// The send's context, as ``SyncEngine/Event/willSendChanges(_:)`` gave it.
        public let context: SyncEngine.SendChangesContext
        /// Why the send stopped early (the network, the server); nil when it ended as it should.
        /// Records the server refused are in ``SyncEngine/Event/sentRecordZoneChanges(_:)``.
        public let error: (any Error)?

        init(context: SyncEngine.SendChangesContext, error: (any Error)? = nil) {
            self.context = context
            self.error = error
        }
    }
}
