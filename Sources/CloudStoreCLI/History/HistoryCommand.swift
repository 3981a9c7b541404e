import ArgumentParser
import CloudStore
import Foundation

/// `cloudstore history --store PATH [--after TOKEN] [--author A] [--entity E] [--limit N] [--json]`:
/// lists a store's history transactions and their changes.
///
/// ```sh
/// $ cloudstore history --store notes.sqlite --limit 1
/// 1@6A2F…  2025-06-01T08:00:00.123Z  author app  context editor  2 changes
///   insert  Folder  0C1D…  color, sortIndex, title
///   insert  Note    9E8F…  body, folder, title
/// ```
public struct HistoryCommand: CloudStoreSubcommand {
    public static let configuration = CommandConfiguration(
        commandName: "history",
        abstract: "List a store's history: transactions and the changes in each.",
        discussion: """
            Prints each transaction (token, time to the millisecond, author, context name) and \
            its changes (insert, update or delete; entity; object id; the properties an update \
            changed; the preserved values of a deleted object), oldest first. Changes imported \
            from the server have the author cloudstore.import. Pass a printed token to --after \
            to see only what came later. It reads the store with the schema the store keeps. \
            \(StoreFile.inspectionPromise)

            A token whose history was purged: exit status 1 (re-read the whole store instead).

            Example:
              cloudstore history --store notes.sqlite --author app --entity Note --limit 10
              cloudstore history --store notes.sqlite --after 42@6A2F0C1D-… --json
            """)

    @Option(help: "The store file (SQLite).")
    var store: String

    @Option(
        help: ArgumentHelp("Only transactions after this token, as history prints them.", valueName: "token"),
        transform: { text in
            do {
                return try HistoryToken(text)
            } catch {
                throw ValidationError("not a history token: use one history printed, like 42@6A2F0C1D-…")
            }
        })
    var after: HistoryToken?

    @Option(help: "Only transactions by this author (e.g. app, cloudstore.import).")
    var author: String?

    @Option(help: "Only changes to this entity.")
    var entity: String?

    @OptionGroup var listing: ListingOptions

    @OptionGroup public var global: GlobalOptions

    public init() {}

    public func run(in context: CommandContext) async throws {
        let store = try StoreFile.inspect(self.store, schemaPath: nil, logger: context.logger("store"))
        defer { try? store.close() }
        if let entity, store.schema.entity(named: entity) == nil {
            let names = store.schema.entities.map(\.name).joined(separator: ", ")
            throw CommandError("schema \"\(store.schema.name)\" of \(self.store) has no entity \(entity): use one of \(names)")
        }
        let filter = HistoryFilter(
            authors: author.map { [$0] }, entities: entity.map { [$0] }, limit: listing.limit)
        let transactions = try store.history(after: after, matching: filter)
        if listing.json {
            try context.output.printJSON(transactions.map(TransactionJSON.init))
            return
        }
        if transactions.isEmpty {
            context.output.print("no transactions\(after.map { " after \($0)" } ?? "")")
            return
        }
        for transaction in transactions {
            context.output.print(Self.headline(transaction))
            context.output.print(TextTable(transaction.changes.map(Self.row), indent: "  "))
        }
    }

    /// `1@6A2F…  2025-06-01T08:00:00.123Z  author app  context editor  2 changes`
    static func headline(_ transaction: HistoryTransaction) -> String {
        "\(transaction.token)  \(CommandOutput.timestamp(transaction.timestamp))  author \(transaction.author ?? "-")  context \(transaction.contextName ?? "-")  \(SchemaValidateCommand.count(transaction.changes.count, "change"))"
    }

    /// `update  Note  9E8F…  title, body` or `delete  Note  9E8F…  title="Groceries"`.
    static func row(_ change: HistoryChange) -> [String] {
        let details =
            change.changeType == .delete
            ? change.tombstone.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value.commandText)" }
            : change.updatedProperties.sorted()
        return [change.changeType.rawValue, change.entityName, change.objectID.uuidString, details.joined(separator: ", ")]
    }
}

/// A transaction as `history --json` prints it.
private struct TransactionJSON: Encodable {
    struct Change: Encodable {
        var type: String
        var entity: String
        var id: UUID
        var updatedProperties: [String]
        var tombstone: [String: CommandJSONValue]
    }

    var token: String
    var timestamp: Date
    var author: String?
    var contextName: String?
    var changes: [Change]

    init(_ transaction: HistoryTransaction) {
        token = transaction.token.description
        timestamp = transaction.timestamp
        author = transaction.author
        contextName = transaction.contextName
        changes = transaction.changes.map { change in
            Change(
                type: change.changeType.rawValue, entity: change.entityName, id: change.objectID,
                updatedProperties: change.updatedProperties.sorted(),
                tombstone: change.tombstone.mapValues(CommandJSONValue.init))
        }
    }
}
