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
        /// The zones whose records a fetch may fetch.
        public enum Scope: Hashable, Sendable {
            /// Every zone with changes.
            case all
            /// Only these zones, when they have changes.
            case zoneIDs([ZoneID])

            /// Whether the zone's records fall in the scope.
            public func contains(_ zoneID: ZoneID) -> Bool {
                switch self {
                case .all: true
                case .zoneIDs(let zoneIDs): zoneIDs.contains(zoneID)
                }
            }
        }

        /// The zones whose records to fetch; every zone by default.
        public var scope: Scope
        /// Zones to fetch before the others, in this order.
        public var prioritizedZoneIDs: [ZoneID]

        /// Options that fetch the zones in `scope`, those in `prioritizedZoneIDs` first.
        public init(scope: Scope = .all, prioritizedZoneIDs: [ZoneID] = []) {
            self.scope = scope
            self.prioritizedZoneIDs = prioritizedZoneIDs
        }
    }

    /// What the engine is fetching, passed to ``SyncEngineDelegate/nextFetchChangesOptions(_:syncEngine:)``
    /// and carried by the fetch events.
    public struct FetchChangesContext: Hashable, Sendable {
        /// Whether the scheduler or the app started the fetch.
        public let reason: SyncReason
        /// The zones the fetch covers.
        public let options: FetchChangesOptions
    }
}
