import CloudStoreSync
import Foundation

/// Records this device may have created on the server without hearing back: their upload was
/// handed to the sync engine without a change tag (a create), and no answer came (the request
/// failed, the app was killed). Such a record is sent again only after a fetch that began after it
/// was handed out: that fetch brings either the record itself (the create landed, and the merge
/// recognises this device's own write) or its tombstone (it landed and another device deleted it
/// since, which the deletion rules decide). Sent again before that, the create would bring a
/// record another device deleted back to life everywhere.
///
/// Saves of a version the server no longer has (``lostOnServer(_:)``) wait for a fetch the same
/// way: the object may have moved to another zone (another device of the user moved it there),
/// which only a fetch shows. Created here again before it, the object would live in two zones.
///
/// Pure bookkeeping, kept in memory by ``CloudMirror``; the store's `may_be_on_server` flag
/// carries it across launches (``init(waiting:)``); a lost version's wait is not carried (after a
/// relaunch the upload goes again, finds the version gone again, and waits then).
struct UnheardCreates: Sendable, Equatable {
    /// How many fetches have begun.
    private var fetchesBegun = 0
    /// The number of the fetch under way.
    private var fetchUnderWay: Int?
    /// Record name → how many fetches had begun when it was last handed out, and the zone its
    /// create went to when this launch handed it out: an answer about the record in another zone
    /// (the delete a move into a share left behind) says nothing of it.
    private var handedOut: [String: HandOut] = [:]
    /// One create handed out: when, in fetches begun, and into which zone.
    private struct HandOut: Sendable, Equatable {
        var fetches: Int
        var zone: ZoneID?
    }
    /// Records waiting because the server no longer had the version their upload was for.
    private var lost: Set<String> = []
    /// Those a completed fetch covered since: if the server still lacks the version, no fetch
    /// will say more (its tombstone was fetched before), and the upload's failure is decided.
    private(set) var lostAndFetched: Set<String> = []

    /// Starts with the records an earlier launch handed out and never heard back about: any
    /// completed fetch of this launch covers them.
    init(waiting names: some Sequence<String> = []) {
        for name in names { handedOut[name] = HandOut(fetches: 0, zone: nil) }
    }

    /// The records to hold back now.
    var waiting: Set<String> { Set(handedOut.keys) }

    /// A create of the record was handed to the engine, into `zone`.
    mutating func handedOut(_ name: String, in zone: ZoneID? = nil) {
        handedOut[name] = HandOut(fetches: fetchesBegun, zone: zone)
    }

    /// The server answered for the record in `zone` (saved, deleted, refused, or a conflict was
    /// merged); an answer about its copy in another zone leaves its create waiting.
    mutating func heard(_ name: String, in zone: ZoneID? = nil) {
        if let zone, let waitingIn = handedOut[name]?.zone, waitingIn != zone { return }
        handedOut[name] = nil
        lost.remove(name)
        lostAndFetched.remove(name)
    }

    /// The server no longer has the version a save of the record was for: the save
    /// waits for a fetch that begins after now, which brings the object's copy in another zone
    /// if it moved, or its tombstone here.
    mutating func lostOnServer(_ name: String) {
        handedOut[name] = HandOut(fetches: fetchesBegun, zone: handedOut[name]?.zone)
        lost.insert(name)
    }

    mutating func fetchBegan() {
        fetchesBegun += 1
        fetchUnderWay = fetchesBegun
    }

    /// A fetch ended; when it completed for the store's zone, it covers every record handed out
    /// before it began.
    mutating func fetchEnded(completed: Bool) {
        defer { fetchUnderWay = nil }
        guard completed, let fetch = fetchUnderWay else { return }
        handedOut = handedOut.filter { $0.value.fetches >= fetch }
        for name in lost where handedOut[name] == nil {
            lost.remove(name)
            lostAndFetched.insert(name)
        }
    }
}
