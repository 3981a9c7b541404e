import CloudStoreWire

extension SyncEngine.State {
    /// The engine's state in a form to persist: opaque to apps, Codable.
    ///
    /// It holds the database and zone sync tokens, the pending changes, the zones with unfetched
    /// changes and the user the state belongs to (not ``SyncEngine/State/hasPendingUntrackedChanges``:
    /// the app knows its own changes). The engine never persists it: save the one each
    /// ``SyncEngine/Event/stateUpdate(_:)`` (or a fetched or sent event) carries, in the same
    /// transaction as the data it describes, and pass the last saved one to
    /// ``SyncEngine/Configuration/stateSerialization`` at the next launch.
    ///
    /// ```swift
    /// let data = try JSONEncoder().encode(stateUpdate.stateSerialization)
    /// let restored = try JSONDecoder().decode(SyncEngine.State.Serialization.self, from: data)
    /// ```
    public struct Serialization: Hashable, Sendable, Codable {
        struct ZoneToken: Hashable, Sendable, Codable {
            var zoneID: ZoneID
            var syncToken: String
        }

        /// The format of this value; a newer format than this version knows is refused on decode.
        static let currentFormat = 1

        var format: Int = Serialization.currentFormat
        var userRecordName: String?
        var databaseToken: String?
        var zoneTokens: [ZoneToken] = []
        var zonesWithUnfetchedChanges: [ZoneID] = []
        /// Zones whose fetch from scratch began and has not completed yet.
        var zonesFetchingFromScratch: [ZoneID] = []
        var pendingRecordZoneChanges: [SyncEngine.PendingRecordZoneChange] = []
        var pendingDatabaseChanges: [SyncEngine.PendingDatabaseChange] = []
        /// The record types whose query subscription the engine saved (public database,
        /// ``SyncEngine/Configuration/recordTypes``), sorted.
        var subscribedRecordTypes: [String] = []

        enum CodingKeys: String, CodingKey {
            case format, userRecordName, databaseToken, zoneTokens, zonesWithUnfetchedChanges, zonesFetchingFromScratch
            case pendingRecordZoneChanges, pendingDatabaseChanges, subscribedRecordTypes
        }

        init(
            userRecordName: String? = nil, databaseToken: String? = nil, zoneTokens: [ZoneToken] = [],
            zonesWithUnfetchedChanges: [ZoneID] = [], zonesFetchingFromScratch: [ZoneID] = [],
            pendingRecordZoneChanges: [SyncEngine.PendingRecordZoneChange] = [],
            pendingDatabaseChanges: [SyncEngine.PendingDatabaseChange] = [], subscribedRecordTypes: [String] = []
        ) {
            self.subscribedRecordTypes = subscribedRecordTypes
            self.userRecordName = userRecordName
            self.databaseToken = databaseToken
            self.zoneTokens = zoneTokens
            self.zonesWithUnfetchedChanges = zonesWithUnfetchedChanges
            self.zonesFetchingFromScratch = zonesFetchingFromScratch
            self.pendingRecordZoneChanges = pendingRecordZoneChanges
            self.pendingDatabaseChanges = pendingDatabaseChanges
        }

        /// Decodes a saved state; throws `DecodingError` for a state that a newer CloudStoreSync
        /// wrote, in a format this one does not know.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            format = try container.decode(Int.self, forKey: .format)
            guard format <= Self.currentFormat else {
                throw DecodingError.dataCorruptedError(
                    forKey: .format, in: container,
                    debugDescription: "sync engine state format \(format) is newer than this version of "
                        + "CloudStoreSync understands (\(Self.currentFormat)); update CloudStoreSync or start "
                        + "without a saved state")
            }
            userRecordName = try container.decodeIfPresent(String.self, forKey: .userRecordName)
            databaseToken = try container.decodeIfPresent(String.self, forKey: .databaseToken)
            zoneTokens = try container.decodeIfPresent([ZoneToken].self, forKey: .zoneTokens) ?? []
            zonesWithUnfetchedChanges =
                try container.decodeIfPresent([ZoneID].self, forKey: .zonesWithUnfetchedChanges) ?? []
            zonesFetchingFromScratch = try container.decodeIfPresent([ZoneID].self, forKey: .zonesFetchingFromScratch) ?? []
            pendingRecordZoneChanges =
                try container.decodeIfPresent(
                    [SyncEngine.PendingRecordZoneChange].self, forKey: .pendingRecordZoneChanges) ?? []
            pendingDatabaseChanges =
                try container.decodeIfPresent([SyncEngine.PendingDatabaseChange].self, forKey: .pendingDatabaseChanges)
                ?? []
            subscribedRecordTypes = try container.decodeIfPresent([String].self, forKey: .subscribedRecordTypes) ?? []
        }
    }
}

extension SyncEngine.State.Serialization {
    /// The database sync token the state has fetched up to (the server's change watermark as this
    /// device knows it), for status displays; nil before the first fetch.
    public var databaseSyncToken: String? { databaseToken }

    /// The user the state belongs to, once the engine asked the server.
    public var user: String? { userRecordName }
}
