import CloudStoreWire
import Foundation

/// Which of two copies of one object, in two zones, is the object, and whether this device
/// deletes the other. A move creates the object's copy in the zone it moves to and deletes the
/// copy it left; a device that fetches the new copy before that delete sees two, and so does every
/// device after two devices moved the object into two different zones at once, which no move's
/// delete covers.
///
/// The copy the server created later is the object. A copy's creation time never changes while it
/// lives, so every device that sees both picks the same one, whenever it sees them and whatever is
/// edited meanwhile, and the copy that is the object is never deleted: two devices cannot delete
/// both. The other copy is deleted by the device whose own copy it is, as if that device had moved
/// the object itself: one it created and whose last version it wrote, so that nothing of another
/// device's is in the version its delete is for, and an edit made to the copy since fails the
/// delete and is merged into the object first (``MirrorWrite/leftBehindCopyChanged(_:_:make:)``).
/// A move's own left-behind copy is deleted by the move, as before. Nor is a copy deleted that
/// holds a value the object lacks, one edited after the object's value of that field
/// (``holdsNewerValues(_:edited:than:edited:)``): that device's edit made before it moved the
/// object, which the other move did not carry. That case stays as it was (the copy lives on in its
/// zone) until a merge of the two copies can decide it.
///
/// When a creation time is unknown (metadata from before they were kept, or a server that does not
/// stamp them) or both are the same, the copy written later is taken and nothing is deleted: which
/// copy was written last changes as the copies are edited, and devices deleting by it could delete
/// both.
enum ObjectCopies {
    /// A copy as the server stamped it (milliseconds since 1970), and the version this device has.
    struct Copy: Equatable, Sendable {
        var created: Int64?
        var modified: Int64?
        var changeTag: String?
        /// Whether this device created the copy and wrote the version it has.
        var writtenHere = false
    }

    enum Choice: Equatable, Sendable {
        /// The copy this device has is the object; the fetched one is not applied.
        case keepHere
        /// The fetched copy is the object, which takes its zone; the copy this device had is
        /// deleted when `deleteHere`.
        case takeFetched(deleteHere: Bool)
    }

    /// Which of `here` (the copy this device has) and `fetched` (a copy fetched from another
    /// zone) is the object.
    static func choose(here: Copy, fetched: Copy) -> Choice {
        if let hereCreated = here.created, let fetchedCreated = fetched.created, hereCreated != fetchedCreated {
            return hereCreated > fetchedCreated ? .keepHere : .takeFetched(deleteHere: here.writtenHere && here.changeTag != nil)
        }
        if let hereModified = here.modified, let fetchedModified = fetched.modified, fetchedModified < hereModified {
            return .keepHere
        }
        return .takeFetched(deleteHere: false)
    }

    /// Whether a copy's values (`values`, edited when `edited` says, per field) hold one the
    /// object's (`object`, `objectEdited`) lack: a different value, edited after the object's value
    /// was, or edited when the object's never was.
    static func holdsNewerValues(
        _ values: [String: AttributeValue], edited: [String: Date], than object: [String: AttributeValue], edited objectEdited: [String: Date]
    ) -> Bool {
        values.contains { key, value in
            guard value != (object[key] ?? .null), let edit = edited[key] else { return false }
            return objectEdited[key].map { edit > $0 } ?? true
        }
    }
}

extension ObjectCopies.Copy {
    /// The copy a fetched record is.
    init(_ record: Record) {
        self.init(
            created: record.created?.timestamp.millisecondsSince1970, modified: record.modified?.timestamp.millisecondsSince1970,
            changeTag: record.recordChangeTag)
    }
}
