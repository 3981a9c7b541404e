@testable import CloudStore
import CloudStoreWire
import Foundation
import Testing

/// The pure decisions of sharing: which objects a share takes, who joined or left between two
/// versions of a share, and what a participant loses when access ends.
struct ShareDecisionTests {
    let schema: Schema
    init() throws { schema = try Schema.notes() }

    @Test func aFolderTakesItsNotesButNotTheirTags() throws {
        let folder = ObjectKey(entityName: "Folder", id: UUID())
        let notes = [UUID(), UUID()]
        let members = ShareGraph.members(of: folder, in: schema) { object, relationship in
            // Only cascade relationships are asked for: Folder.notes, never Note.tags.
            #expect(relationship.deleteRule == .cascade)
            return object == folder ? notes : []
        }
        #expect(members == [folder] + notes.map { ObjectKey(entityName: "Note", id: $0) })
        let note = try #require(schema.entity(named: "Note"))
        #expect(ShareGraph.holders(of: note, in: schema).map(\.name) == ["folder"])
        let tag = try #require(schema.entity(named: "Tag"))
        #expect(ShareGraph.holders(of: tag, in: schema).isEmpty)
    }

    @Test func aGraphWithACycleListsEachObjectOnce() {
        let folder = ObjectKey(entityName: "Folder", id: UUID())
        let note = UUID()
        let members = ShareGraph.members(of: folder, in: schema) { _, _ in [note, note] }
        #expect(members.count == 2)
    }

    func share(_ participants: [(String, SharePermission, ShareParticipant.AcceptanceStatus)]) -> ShareMetadata {
        ShareMetadata(
            owner: ShareParticipant(role: .owner, permission: .readWrite, acceptanceStatus: .accepted, userIdentity: .init(userRecordName: "_alice")),
            participants: participants.map {
                ShareParticipant(role: .user, permission: $0.1, acceptanceStatus: $0.2, userIdentity: .init(userRecordName: $0.0))
            })
    }

    @Test func participantsInvitedJoiningLeavingAndChangingPermissionAreTold() {
        let invited = share([("_bob", .readWrite, .invited), ("_carol", .readOnly, .invited)])
        #expect(ShareActivity.changes(from: nil, to: invited, removedHere: false).map(\.change) == [.invited, .invited])
        let joined = share([("_bob", .readWrite, .accepted), ("_carol", .readOnly, .invited)])
        let bobJoined = ShareActivity.changes(from: invited, to: joined, removedHere: false)
        #expect(bobJoined.map(\.change) == [.joined] && bobJoined.first?.user == "_bob")
        let upgraded = share([("_bob", .readWrite, .accepted), ("_carol", .readWrite, .invited)])
        #expect(ShareActivity.changes(from: joined, to: upgraded, removedHere: false).map(\.change) == [.permissionChanged])
        let bobGone = share([("_bob", .readWrite, .removed), ("_carol", .readWrite, .invited)])
        #expect(ShareActivity.changes(from: upgraded, to: bobGone, removedHere: false).map(\.change) == [.left])
        #expect(ShareActivity.changes(from: upgraded, to: bobGone, removedHere: true).map(\.change) == [.removed])
        #expect(ShareActivity.changes(from: bobGone, to: nil, removedHere: false).map(\.change) == [.stopped])
        #expect(ShareActivity.changes(from: joined, to: joined, removedHere: false).isEmpty)
    }

    @Test func losingAccessLogsEveryValueNotUploaded() {
        let resolution = ConflictResolution(policy: .serverWins, now: Date())
        let object = ConflictResolution.Object(entityName: "Note", id: UUID())
        let edited = resolution.accessEnded(
            of: object, pending: .save(full: false, keys: ["title": Date()]), recordKeys: ["title", "body"],
            local: ["title": .string("Rye"), "body": .null])
        #expect(edited.map(\.property) == ["title"] && edited.first?.losingValue == .string("Rye"))
        #expect(edited.first?.policy == ConflictResolution.accessEndedPolicy)
        let created = resolution.accessEnded(
            of: object, pending: .save(full: true, keys: [:]), recordKeys: ["title", "body"],
            local: ["title": .string("New"), "body": .string("text")])
        #expect(created.map(\.property) == ["body", "title"])
        #expect(resolution.accessEnded(of: object, pending: .delete, recordKeys: ["title"], local: nil).isEmpty)
    }

    @Test func aShareIsAcceptedByItsShortGUIDOrALinkCarryingIt() {
        #expect(PersistentCloudContainer.shortGUID(fromLink: " Xq3abc ") == "Xq3abc")
        #expect(PersistentCloudContainer.shortGUID(fromLink: "https://example.com/share/Xq3abc") == "Xq3abc")
        #expect(PersistentCloudContainer.shortGUID(fromLink: "https://example.com/join?shortGUID=Xq3abc&x=1") == "Xq3abc")
        #expect(PersistentCloudContainer.shortGUID(fromLink: "notes://share/Xq3abc/") == "Xq3abc")
    }
}
