import CloudStoreWire

extension SyncEngine {
    /// What happened, delivered to ``SyncEngineDelegate/handleEvent(_:syncEngine:)`` one at a time:
    /// the engine awaits each event before it delivers the next. As CKSyncEngine's `Event`.
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
        case stateUpdate(StateUpdate)
        case accountChange(AccountChange)
        case fetchedDatabaseChanges(FetchedDatabaseChanges)
        case fetchedRecordZoneChanges(FetchedRecordZoneChanges)
        case sentDatabaseChanges(SentDatabaseChanges)
        case sentRecordZoneChanges(SentRecordZoneChanges)
        case willFetchChanges(WillFetchChanges)
        case willFetchRecordZoneChanges(WillFetchRecordZoneChanges)
        case didFetchRecordZoneChanges(DidFetchRecordZoneChanges)
        case didFetchChanges(DidFetchChanges)
        case willSendChanges(WillSendChanges)
        case didSendChanges(DidSendChanges)

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
        public let stateSerialization: SyncEngine.State.Serialization
    }

    /// The user the server reports for the engine's credentials differs from the saved state's,
    /// or the server rejected the credentials.
    public struct AccountChange: Sendable {
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

            public var description: String {
                switch self {
                case .signIn(let user): "signIn(\(user))"
                case .signOut(let user): "signOut(\(user ?? "unknown"))"
                case .switchAccounts(let previous, let current): "switchAccounts(\(previous) → \(current))"
                }
            }
        }

        public let changeType: ChangeType
    }

    /// Zones that changed or were deleted on the server since the last fetch.
    public struct FetchedDatabaseChanges: Sendable {
        public struct Deletion: Hashable, Sendable {
            public let zoneID: ZoneID
            /// `.deleted` (an app deleted it: re-upload or wipe per policy) or `.purged` (the user
            /// purged their data: wipe the local copy and do not re-upload).
            public let reason: Zone.DeletionReason
        }

        /// Zones with changes; the engine fetches their records next.
        public let modifications: [ZoneID]
        public let deletions: [Deletion]
    }

    /// One page of a zone's changes.
    ///
    /// ``stateSerialization`` already holds the zone's token after this page: save the page's
    /// records and this state in one transaction, so the token is never ahead of the data it
    /// covers.
    public struct FetchedRecordZoneChanges: Sendable {
        public struct Deletion: Hashable, Sendable {
            public let recordID: RecordID
            /// The deleted record's type, when the server sent it.
            public let recordType: String?
        }

        public let zoneID: ZoneID
        /// Records in their latest server state, with their change tags.
        public let modifications: [Record]
        public let deletions: [Deletion]
        public let stateSerialization: SyncEngine.State.Serialization
    }

    /// The result of sending pending zone changes.
    public struct SentDatabaseChanges: Sendable {
        public struct FailedZoneSave: Sendable {
            public let zoneID: ZoneID
            public let error: ServerError
        }

        public let savedZones: [Zone]
        public let failedZoneSaves: [FailedZoneSave]
        public let deletedZoneIDs: [ZoneID]
        public let failedZoneDeletes: [ZoneID: ServerError]
        public let stateSerialization: SyncEngine.State.Serialization
    }

    /// The result of sending one batch of record changes.
    ///
    /// Saved records are the server's copies with their new change tags. Failed saves and deletes
    /// are the ones the engine will not retry by itself; they are no longer pending, so the
    /// delegate decides: merge a `CONFLICT` with `error.serverRecord` and add the save again,
    /// create the zone on `ZONE_NOT_FOUND` and add the save again, or give up. Transient failures
    /// (network, 429, 503, 500) and `ATOMIC_ERROR`s do not appear here: those changes stay pending
    /// and the engine retries them.
    ///
    /// ``stateSerialization`` is the state after the acknowledged changes were removed: save the
    /// records' new change tags and this state in one transaction.
    public struct SentRecordZoneChanges: Sendable {
        public struct FailedRecordSave: Sendable {
            /// The record as the engine tried to save it.
            public let record: Record
            /// The server's error; on `CONFLICT` and `EXISTS` its `serverRecord` is the server's
            /// current copy (looked up when the server did not send it). A record whose asset could
            /// not be uploaded was not sent: `ASSET_FILE_UNAVAILABLE`
            /// (`ServerErrorCode.assetFileUnavailable`), `ASSET_FILE_CHANGED`
            /// (`ServerErrorCode.assetFileChanged`) or the upload's `LIMIT_EXCEEDED`, with a `reason`
            /// that names the record and the field.
            public let error: ServerError
        }

        public let savedRecords: [Record]
        public let failedRecordSaves: [FailedRecordSave]
        public let deletedRecordIDs: [RecordID]
        public let failedRecordDeletes: [RecordID: ServerError]
        public let stateSerialization: SyncEngine.State.Serialization
    }

    public struct WillFetchChanges: Sendable {
        public let context: SyncEngine.FetchChangesContext
    }

    public struct WillFetchRecordZoneChanges: Sendable {
        public let zoneID: ZoneID
        /// True when the engine fetches the zone without a token: its first fetch, or a refetch
        /// after the server rejected the token (`CHANGE_TOKEN_EXPIRED`, `BAD_REQUEST`). The pages
        /// that follow hold every live record of the zone, so a local record that does not appear
        /// by ``DidFetchRecordZoneChanges`` no longer exists on the server.
        public let fromScratch: Bool
    }

    public struct DidFetchRecordZoneChanges: Sendable {
        public let zoneID: ZoneID
        /// Why the zone's fetch stopped early; nil when it completed.
        public let error: CloudError?
    }

    public struct DidFetchChanges: Sendable {
        public let context: SyncEngine.FetchChangesContext
        /// Why the fetch stopped early (the network, the server); nil when it completed. A zone
        /// that failed on its own is reported by ``SyncEngine/Event/didFetchRecordZoneChanges(_:)``.
        public let error: (any Error)?

        init(context: SyncEngine.FetchChangesContext, error: (any Error)? = nil) {
            self.context = context
            self.error = error
        }
    }

    public struct WillSendChanges: Sendable {
        public let context: SyncEngine.SendChangesContext
    }

    public struct DidSendChanges: Sendable {
        public let context: SyncEngine.SendChangesContext
    }
}
