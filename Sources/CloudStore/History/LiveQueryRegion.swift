import Foundation

/// What a live query's last array depends on, and whether the changes committed since can alter
/// it: the objects in the array, and whether the query skips some first (an offset makes any
/// change of its entity count, since a change before the window moves it).
///
/// A change of an object in the array may change the array. A change of an object outside it
/// matters only if the object now matches the predicate (it may enter); one that does not match
/// was not in the array and stays out of it (and without an offset, an object past the limit
/// leaving does not move the first ones). A deleted object outside the array changes nothing.
struct LiveQueryRegion: Equatable {
    /// The ids of the objects in the last array.
    let ids: Set<UUID>
    /// Whether the query has an offset.
    let skipsSome: Bool

    /// What the store must do about `changes` of the query's entity (nil when the history that
    /// would say was purged).
    enum Decision: Equatable {
        /// Nothing the array depends on changed: no run.
        case unchanged
        /// Run the query again.
        case run
        /// Run it again if one of these objects now matches the predicate.
        case runIfAnyMatches([UUID])
    }

    /// How many objects outside the array are tested against the predicate before the query
    /// simply runs again.
    static let testLimit = 500

    func decision(for changes: [(id: UUID, isDelete: Bool)]?) -> Decision {
        guard let changes else { return .run }
        if changes.isEmpty { return .unchanged }
        if skipsSome { return .run }
        var outside: [UUID] = []
        var seen: Set<UUID> = []
        for change in changes {
            if ids.contains(change.id) { return .run }
            if !change.isDelete && seen.insert(change.id).inserted { outside.append(change.id) }
        }
        if outside.isEmpty { return .unchanged }
        return outside.count > Self.testLimit ? .run : .runIfAnyMatches(outside)
    }
}
