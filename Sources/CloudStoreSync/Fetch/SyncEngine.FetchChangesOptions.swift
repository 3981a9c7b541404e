import CloudStoreWire

extension SyncEngine {
    /// Which zones a fetch covers.
    ///
    /// The database's list of changed zones is always fetched in full; the scope limits which of
    /// those zones' records are fetched. Zones left out stay in
    /// ``SyncEngine/State/zoneIDsWithUnfetchedServerChanges`` for a later fetch.
    ///
    /// ```swift
    /// try await engine.fetchChanges(.init(scope: .zoneIDs([notesZone])))
    /// ```
    public struct FetchChangesOptions: Hashable, Sendable {
        public enum Scope: Hashable, Sendable {
            case all
            case zoneIDs([ZoneID])

            public func contains(_ zoneID: ZoneID) -> Bool {
                switch self {
                case .all: true
                case .zoneIDs(let zoneIDs): zoneIDs.contains(zoneID)
                }
            }
        }

        public var scope: Scope
        /// Zones to fetch before the others, in this order.
        public var prioritizedZoneIDs: [ZoneID]

        public init(scope: Scope = .all, prioritizedZoneIDs: [ZoneID] = []) {
            self.scope = scope
            self.prioritizedZoneIDs = prioritizedZoneIDs
        }
    }

    /// What the engine is fetching, passed to ``SyncEngineDelegate/nextFetchChangesOptions(_:syncEngine:)``
    /// and carried by the fetch events.
    public struct FetchChangesContext: Hashable, Sendable {
        public let reason: SyncReason
        public let options: FetchChangesOptions
    }
}
