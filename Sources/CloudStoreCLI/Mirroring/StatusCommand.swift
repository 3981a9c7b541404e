import ArgumentParser
import CloudStore
import Foundation

/// `cloudstore status --store PATH [--schema FILE] [--json]`: where a store's mirroring stands,
/// read from the store file (no server needed).
///
/// ```sh
/// $ cloudstore status --store notes.sqlite
/// store                    notes.sqlite (schema "Notes" version 2)
/// mirroring                yes, user _alice
/// pending uploads          0
/// …
/// ```
public struct StatusCommand: CloudStoreSubcommand {
    public static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show where a store's sync stands, from the store file alone.",
        discussion: """
            Reads the store file (no server needed): the user its mirrored data belongs to, \
            records waiting to be uploaded and uploads the server refused, the server \
            token fetched up to, the last import and export, the last error and how many values \
            the conflict log holds. \(StoreFile.inspectionPromise)

            A store written by the previous CloudStore release keeps its unsent changes in the \
            old mirroring layout, which this release counts as pending uploads only after moving \
            them to its own: status refuses it (exit status 1) and names the command that does \
            the move, cloudstore migrate, which the app does too when it first opens the store. \
            cloudstore history and conflicts read such a store as it is.

            Example:
              cloudstore status --store notes.sqlite
              cloudstore status --store notes.sqlite --schema Schema/Notes.json --json
            """)

    @Option(help: "The store file (SQLite).")
    var store: String

    @Option(help: "The schema file to open the store with; by default the schema the store keeps.")
    var schema: String?

    @Flag(help: "Print JSON instead of text.")
    var json = false

    @OptionGroup public var global: GlobalOptions

    public init() {}

    public func run(in context: CommandContext) async throws {
        let opened = try StoreFile.inspect(store, schemaPath: schema, logger: context.logger("store"))
        defer { try? opened.close() }
        let status: PersistentCloudContainer.SyncStatus
        do {
            status = try PersistentCloudContainer.status(of: opened)
        } catch StoreError.Code.needsUpgrade {
            throw CommandError(
                "\(store) holds mirroring metadata written by the previous CloudStore release, whose unsent changes are counted only once moved to this release's layout: run cloudstore migrate --store \(store) --schema \(schema ?? "<its schema file>") (or open it with the app once), then status again")
        }
        let report = StatusJSON(store: store, schema: opened.schema, status: status)
        if json {
            try context.output.printJSON(report)
            return
        }
        let never = "never"
        context.output.print(
            TextTable([
                ["store", "\(store) (schema \"\(report.schemaName)\" version \(report.schemaVersion))"],
                ["mirroring", status.isMirroring ? "yes" + (status.user.map { ", user \($0)" } ?? "") : "no (never synced)"],
                ["signed out", status.isSignedOut ? "yes: the server refused the credentials" : "no"],
                ["pending uploads", String(status.pendingUploads)],
                ["refused uploads", String(status.refusedUploads)],
                ["server token", status.serverChangeToken ?? "none"],
                ["last import", status.lastImport.map(CommandOutput.timestamp) ?? never],
                ["last export", status.lastExport.map(CommandOutput.timestamp) ?? never],
                ["last error", status.lastError.map { "\($0.message) (\(CommandOutput.timestamp($0.date)))" } ?? "none"],
                ["conflicts logged", String(status.conflictCount)],
            ]))
    }
}

/// The status as `status --json` prints it.
private struct StatusJSON: Encodable {
    struct Failure: Encodable {
        var code: String?
        var message: String
        var date: Date
    }

    var store: String
    var schemaName: String
    var schemaVersion: Int
    var isMirroring: Bool
    var user: String?
    var isSignedOut: Bool
    var pendingUploads: Int
    var refusedUploads: Int
    var serverChangeToken: String?
    var lastImport: Date?
    var lastExport: Date?
    var lastError: Failure?
    var conflictCount: Int

    init(store: String, schema: Schema, status: PersistentCloudContainer.SyncStatus) {
        self.store = store
        schemaName = schema.name
        schemaVersion = schema.version
        isMirroring = status.isMirroring
        user = status.user
        isSignedOut = status.isSignedOut
        pendingUploads = status.pendingUploads
        refusedUploads = status.refusedUploads
        serverChangeToken = status.serverChangeToken
        lastImport = status.lastImport
        lastExport = status.lastExport
        lastError = status.lastError.map { Failure(code: $0.code?.rawValue, message: $0.message, date: $0.date) }
        conflictCount = status.conflictCount
    }
}
