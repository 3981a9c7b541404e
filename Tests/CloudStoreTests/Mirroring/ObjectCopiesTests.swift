import Foundation
import Testing

@testable import CloudStore

/// Which of two copies of an object in two zones is the object (``ObjectCopies``): every device
/// must pick the same one whatever it fetched when, and only the device whose own copy lost
/// deletes it.
@Suite("Mirroring: two copies of an object in two zones")
struct ObjectCopiesTests {
    typealias Copy = ObjectCopies.Copy

    @Test func theCopyCreatedLater_isTheObject() {
        let mine = Copy(created: 100, modified: 100, changeTag: "a", writtenHere: true)
        let theirs = Copy(created: 200, modified: 200, changeTag: "b")
        #expect(ObjectCopies.choose(here: mine, fetched: theirs) == .takeFetched(deleteHere: true))
        #expect(ObjectCopies.choose(here: theirs, fetched: mine) == .keepHere)
    }

    /// The choice does not change as the copies are edited: the copy created earlier stays the
    /// loser though it was written last, so no two devices delete both.
    @Test func anEditOfTheEarlierCopy_doesNotMakeItTheObject() {
        let later = Copy(created: 200, modified: 200, changeTag: "b")
        let editedSince = Copy(created: 100, modified: 900, changeTag: "a2")
        #expect(ObjectCopies.choose(here: later, fetched: editedSince) == .keepHere)
        #expect(ObjectCopies.choose(here: Copy(created: 100, modified: 900, changeTag: "a2", writtenHere: true), fetched: later)
            == .takeFetched(deleteHere: true))
    }

    /// Only a copy this device created and last wrote is deleted here: a version holding another
    /// device's edit could delete that edit unseen by the device that would merge it.
    @Test func aCopyHoldingAnotherDevicesVersion_isNotDeletedHere() {
        let theirs = Copy(created: 200, modified: 200, changeTag: "b")
        #expect(ObjectCopies.choose(here: Copy(created: 100, modified: 150, changeTag: "a2"), fetched: theirs) == .takeFetched(deleteHere: false))
        #expect(ObjectCopies.choose(here: Copy(created: 100, modified: 100, changeTag: nil, writtenHere: true), fetched: theirs)
            == .takeFetched(deleteHere: false), "no version to delete for")
    }

    /// Without both creation times, or with the same one, the copy written later is taken and
    /// nothing is deleted: by that order two devices could delete both copies.
    @Test func withoutCreationTimes_theCopyWrittenLaterIsTakenAndNothingDeleted() {
        let old = Copy(created: nil, modified: 100, changeTag: "a", writtenHere: true)
        let new = Copy(created: 300, modified: 300, changeTag: "b")
        #expect(ObjectCopies.choose(here: old, fetched: new) == .takeFetched(deleteHere: false))
        #expect(ObjectCopies.choose(here: Copy(created: nil, modified: 300, changeTag: "a"), fetched: Copy(created: 50, modified: 100, changeTag: "b"))
            == .keepHere)
        #expect(ObjectCopies.choose(here: Copy(created: 100, modified: 100, changeTag: "a", writtenHere: true), fetched: Copy(created: 100, modified: 50, changeTag: "b"))
            == .keepHere, "the same creation time: the copy here was written later")
        #expect(ObjectCopies.choose(here: Copy(created: nil, modified: nil, changeTag: nil), fetched: new) == .takeFetched(deleteHere: false))
    }

    /// A copy is deleted only when everything it holds that the object does not is older than the
    /// object's value: a move's stale folder, not an edit the other move did not carry.
    @Test func aCopyHoldingAnEditTheObjectLacks_holdsNewerValues() {
        let (early, late) = (Date(timeIntervalSince1970: 100), Date(timeIntervalSince1970: 200))
        let object: [String: AttributeValue] = ["title": .string("Receipt"), "folder": .uuid(UUID(uuidString: "00000000-0000-0000-0000-000000000002")!)]
        var copy = object
        copy["folder"] = .uuid(UUID(uuidString: "00000000-0000-0000-0000-000000000001")!)
        #expect(!ObjectCopies.holdsNewerValues(copy, edited: ["folder": early], than: object, edited: ["folder": late]), "the earlier move")
        #expect(ObjectCopies.holdsNewerValues(copy, edited: ["folder": late], than: object, edited: ["folder": early]), "the later move by its edit time")
        copy["folder"] = object["folder"]
        copy["title"] = .string("Receipt, 12 €")
        #expect(ObjectCopies.holdsNewerValues(copy, edited: ["title": late], than: object, edited: [:]), "an edit the object never had")
        #expect(!ObjectCopies.holdsNewerValues(copy, edited: [:], than: object, edited: [:]), "a value without an edit time is the old one")
        #expect(!ObjectCopies.holdsNewerValues(object, edited: ["title": late], than: object, edited: [:]), "the same values")
    }
}
