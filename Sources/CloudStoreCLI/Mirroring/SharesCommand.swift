import ArgumentParser
import CloudStore
import Foundation

/// `cloudstore shares --store PATH [--after SEQ] [--json]`: the shares a store holds, with their
/// participants, then its share activity log.
///
/// ```sh
/// $ cloudstore shares --store notes.sqlite
/// share of zone Notes.share-7326…, owned by me (_alice)
///   title              Shopping
///   short GUID         k3Jq9…
///   public permission  NONE
///   my permission      READ_WRITE
///   pending changes    no
///   shared object      Folder 7326…
///   USER    PERMISSION  STATUS
///   _alice  READ_WRITE  ACCEPTED  owner
///   _bob    READ_WRITE  ACCEPTED
///
/// share activity:
/// SEQ  DATE                      ZONE                CHANGE   USER  PERMISSION
/// 1    2025-06-01T08:00:01.234Z  Notes.share-7326…  invited  _bob  READ_WRITE
/// ```
public struct SharesCommand: CloudStoreSubcommand {
    public static let configuration = CommandConfiguration(
        commandName: "shares",
        abstract: "List a store's shares, their participants and the share activity log.",
        discussion: """
            Prints every share the store holds, those its user owns and those other users shared \
            with it: the zone, the owner (me for the store's user), the short GUID participants \
            accept it by, the public permission, the store user's permission, whether a change of \
            the share has not reached the server yet, and each participant with permission and \
            status. Then the share activity log, oldest first: who was invited, joined, left or \
            was removed, with dates to the millisecond; pass the last sequence number to --after \
            to see only newer entries. \(StoreFile.inspectionPromise)

            Example:
              cloudstore shares --store notes.sqlite
              cloudstore shares --store notes.sqlite --after 4 --json
            """)

    @Option(help: "The store file (SQLite).")
    var store: String

    @OptionGroup var sequence: SequenceOptions

    @Flag(help: "Print JSON instead of text.")
    var json = false

    @OptionGroup public var global: GlobalOptions

    public init() {}

    public func run(in context: CommandContext) async throws {
        let after = sequence.after
        let opened = try StoreFile.inspect(store, schemaPath: nil, logger: context.logger("store"))
        defer { try? opened.close() }
        let shares = try PersistentCloudContainer.shares(in: opened)
        let activity = try PersistentCloudContainer.shareActivity(in: opened, after: after)
        let user = try? PersistentCloudContainer.status(of: opened).user
        if json {
            try context.output.printJSON(SharesJSON(user: user, shares: shares, activity: activity))
            return
        }
        if shares.isEmpty {
            context.output.print(
                "no shares in \(store): share an object and what belongs to it with PersistentCloudContainer.share(_:with:)")
        }
        for share in shares {
            for line in Self.lines(share, user: user) { context.output.print(line) }
            context.output.print("")
        }
        if activity.isEmpty {
            if after > 0 {
                context.output.print("no share activity after \(after)")
            } else if !shares.isEmpty {
                context.output.print("no share activity")
            }
            return
        }
        if shares.isEmpty { context.output.print("") }
        context.output.print("share activity:")
        context.output.print(Self.table(activity))
    }

    /// One share: its headline, its settings and its participants, indented under it.
    static func lines(_ share: PersistentCloudContainer.Share, user: String?) -> [String] {
        let owner = share.owner ?? "me" + (user.map { " (\($0))" } ?? "")
        var settings = TextTable(
            [
                ["title", share.title ?? "-"],
                ["short GUID", share.shortGUID ?? "none yet (the server has not saved the share)"],
                ["public permission", share.publicPermission.rawValue],
                ["my permission", share.currentUserPermission.rawValue],
                ["pending changes", share.hasPendingChanges ? "yes: not on the server yet" : "no"],
            ], indent: "  ")
        if let entity = share.rootEntityName, let id = share.rootID {
            settings.append(["shared object", "\(entity) \(id.uuidString)"])
        }
        var participants = TextTable([["USER", "PERMISSION", "STATUS"]], indent: "  ")
        for participant in share.participants {
            participants.append(
                [participant.user, participant.permission.rawValue, participant.status.rawValue]
                    + (participant.isOwner ? ["owner"] : []))
        }
        return ["share of zone \(share.zoneID.zoneName), owned by \(owner)"] + settings.lines + participants.lines
    }

    /// The share activity log under a header row.
    static func table(_ activity: [PersistentCloudContainer.ShareActivity], indent: String = "") -> TextTable {
        var table = TextTable([["SEQ", "DATE", "ZONE", "CHANGE", "USER", "PERMISSION"]], indent: indent)
        for entry in activity {
            table.append([
                String(entry.sequence), CommandOutput.timestamp(entry.date), entry.zoneID.description,
                entry.change.rawValue, entry.user ?? "-", entry.permission?.rawValue ?? "-",
            ])
        }
        return table
    }
}

/// The shares and the activity log as `shares --json` prints them.
private struct SharesJSON: Encodable {
    struct Share: Encodable {
        var zone: String
        var owner: String?
        var isOwnedByMe: Bool
        var shortGUID: String?
        var publicPermission: String
        var myPermission: String
        var hasPendingChanges: Bool
        var rootEntity: String?
        var rootID: UUID?
        var participants: [Participant]
    }

    struct Participant: Encodable {
        var user: String
        var permission: String
        var status: String
        var isOwner: Bool
    }

    struct Activity: Encodable {
        var sequence: Int64
        var date: Date
        var zone: String
        var change: String
        var user: String?
        var permission: String?
    }

    var user: String?
    var shares: [Share]
    var activity: [Activity]

    init(user: String?, shares: [PersistentCloudContainer.Share], activity: [PersistentCloudContainer.ShareActivity]) {
        self.user = user
        self.shares = shares.map { share in
            Share(
                zone: share.zoneID.zoneName, owner: share.owner ?? user, isOwnedByMe: share.isOwnedByCurrentUser,
                shortGUID: share.shortGUID, publicPermission: share.publicPermission.rawValue,
                myPermission: share.currentUserPermission.rawValue, hasPendingChanges: share.hasPendingChanges,
                rootEntity: share.rootEntityName, rootID: share.rootID,
                participants: share.participants.map {
                    Participant(user: $0.user, permission: $0.permission.rawValue, status: $0.status.rawValue, isOwner: $0.isOwner)
                })
        }
        self.activity = activity.map {
            Activity(
                sequence: $0.sequence, date: $0.date, zone: $0.zoneID.description, change: $0.change.rawValue, user: $0.user,
                permission: $0.permission?.rawValue)
        }
    }
}
