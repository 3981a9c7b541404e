import ArgumentParser
import CloudStore
import Foundation

/// `cloudstore migrate --store PATH --schema FILE [--migrations DIR]`: migrates a local store to
/// the schema file's version.
///
/// ```sh
/// $ cloudstore migrate --store notes.sqlite --schema Schema/Notes.json --migrations Migrations
/// notes.sqlite: schema "Notes" version 1 → 2, 5 changes
///   rename Note.rank to priority
///   …
///   step 2 2-clamp-priority.sql
/// migrated to version 2 in 0.03s
/// ```
public struct MigrateCommand: CloudStoreSubcommand {
    public static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Migrate a local store to a newer version of its schema.",
        discussion: """
            Checks the store without modifying it, prints the version it holds, the schema file's \
            version and every change the migration makes (renames and additions, the explicit \
            steps of --migrations, table rebuilds and drops), then migrates in one transaction. A \
            mirrored store written by the previous CloudStore release also has its mirroring \
            metadata moved to this release's layout, in a transaction of its own after the \
            migration: its unsent changes become pending uploads (what the app's container does \
            when it first opens the store; nothing is sent). A store \
            already at the schema's version and layout is left as it is. A store that is not a store, \
            is damaged, holds a newer version, or a step that fails: exit status 1 naming the \
            file or step, and the store is unchanged.

            Migration steps are SQL files laid out as <dir>/<schema name>/<version>-<name>.sql, \
            where <version> is the schema version the step migrates to; steps of one version run \
            in name order, inside the migration's transaction.

            Example:
              cloudstore migrate --store notes.sqlite --schema Schema/Notes.json --migrations Migrations
            """)

    @Option(help: "The store file (SQLite) to migrate.")
    var store: String

    @Option(help: "The schema file to migrate to.")
    var schema: String

    @Option(help: "The folder of migration steps: <dir>/<schema name>/<version>-<name>.sql. By default a Migrations folder here or beside the schema file's folder, when it holds the schema's steps.")
    var migrations: String?

    @OptionGroup public var global: GlobalOptions

    public init() {}

    public func run(in context: CommandContext) async throws {
        let target = try SchemaFile.load(schema)
        let steps = try MigrationSteps.find(explicit: migrations, schemaPath: schema, schema: target)
        let plan = steps.plan
        let info = try StoreFile.info(store)
        var changes = try PersistentStore.migrationChanges(at: info.url, schema: target, migrations: plan)
        let movesMirrorLayout = try PersistentCloudContainer.holdsLegacyMirrorLayout(at: info.url)
        if movesMirrorLayout {
            changes.append("move the mirroring metadata of the previous release to this release's layout (unsent changes become pending uploads)")
        }
        guard !changes.isEmpty else {
            context.output.print("\(store): already at version \(info.schemaVersion) of schema \"\(info.schemaName)\"; nothing to do")
            return
        }
        let versions =
            info.schemaVersion == target.version ? "version \(target.version)" : "version \(info.schemaVersion) → \(target.version)"
        context.output.print(
            "\(store): schema \"\(info.schemaName)\" \(versions), \(SchemaValidateCommand.count(changes.count, "change"))")
        if info.schemaVersion != target.version { context.output.print(steps.describe(schemaName: target.name)) }
        for change in changes { context.output.print("  \(change)") }
        let started = ContinuousClock.now
        if movesMirrorLayout {
            // A container moves the layout when it opens the store; without a server it sends nothing.
            let container = try await PersistentCloudContainer(
                url: info.url, schema: target, migrations: plan, logger: context.logger("mirroring"))
            try await container.close()
        } else {
            let migrated = try PersistentStore(url: info.url, schema: target, migrations: plan, logger: context.logger("store"))
            try migrated.close()
        }
        context.output.print("migrated to version \(target.version) in \(CommandOutput.seconds(started.duration(to: .now)))")
    }
}
