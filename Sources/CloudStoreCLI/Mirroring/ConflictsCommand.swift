import ArgumentParser
import CloudStore
import Foundation

/// `cloudstore conflicts --store PATH [--after SEQ] [--limit N] [--json]`: the conflict log, one
/// line per value that lost.
///
/// ```sh
/// $ cloudstore conflicts --store notes.sqlite
/// SEQ  DATE                      ENTITY  OBJECT    PROPERTY  LOSER  LOSING VALUE  WINNING VALUE  POLICY
/// 1    2025-06-01T08:00:01.234Z  Note    9E8F…     title     local  "B's title"   "A's title"    serverWins
/// ```
public struct ConflictsCommand: CloudStoreSubcommand {
    public static let configuration = CommandConfiguration(
        commandName: "conflicts",
        abstract: "List the conflict log: every value that lost a conflict.",
        discussion: """
            When both a device and the server changed the same property, the conflict policy \
            picks a winner and the losing value is logged. Prints one line per losing value, \
            oldest first: sequence number, date to the millisecond, entity, object id, property \
            (* when a whole object lost to a delete), the losing side (local or server), the \
            losing and winning values and the policy that decided. Pass the last sequence number \
            to --after to see only newer entries. \(StoreFile.inspectionPromise)

            Example:
              cloudstore conflicts --store notes.sqlite
              cloudstore conflicts --store notes.sqlite --after 12 --limit 50 --json
            """)

    @Option(help: "The store file (SQLite).")
    var store: String

    @OptionGroup var sequence: SequenceOptions

    @OptionGroup var listing: ListingOptions

    @OptionGroup public var global: GlobalOptions

    public init() {}

    public func run(in context: CommandContext) async throws {
        let after = sequence.after
        let opened = try StoreFile.inspect(store, schemaPath: nil, logger: context.logger("store"))
        defer { try? opened.close() }
        let conflicts = try PersistentCloudContainer.conflicts(in: opened, after: after, limit: listing.limit)
        if listing.json {
            try context.output.printJSON(conflicts.map(ConflictJSON.init))
            return
        }
        guard !conflicts.isEmpty else {
            context.output.print(after > 0 ? "no conflicts logged after \(after)" : "no conflicts logged")
            return
        }
        context.output.print(Self.table(conflicts))
    }

    /// The conflicts under a header row.
    static func table(_ conflicts: [ConflictRecord], indent: String = "") -> TextTable {
        var table = TextTable(
            [["SEQ", "DATE", "ENTITY", "OBJECT", "PROPERTY", "LOSER", "LOSING VALUE", "WINNING VALUE", "POLICY"]],
            indent: indent)
        for conflict in conflicts {
            table.append([
                String(conflict.sequence), CommandOutput.timestamp(conflict.date), conflict.entityName,
                conflict.objectID.uuidString, conflict.property, conflict.losingSide.rawValue,
                conflict.losingValue.commandText, conflict.winningValue.commandText, conflict.policy,
            ])
        }
        return table
    }
}

/// A conflict as `conflicts --json` prints it: values in their text form.
private struct ConflictJSON: Encodable {
    var sequence: Int64
    var date: Date
    var entity: String
    var id: UUID
    var property: String
    var losingSide: String
    var losingValue: CommandJSONValue
    var winningValue: CommandJSONValue
    var policy: String

    init(_ conflict: ConflictRecord) {
        sequence = conflict.sequence
        date = conflict.date
        entity = conflict.entityName
        id = conflict.objectID
        property = conflict.property
        losingSide = conflict.losingSide.rawValue
        losingValue = CommandJSONValue(conflict.losingValue)
        winningValue = CommandJSONValue(conflict.winningValue)
        policy = conflict.policy
    }
}
