import ArgumentParser
import CloudStore
import CloudStoreSync
import CloudStoreWire
import Foundation

/// `cloudstore schema init --schema FILE --server URL --container ID --token T [--dry-run]`:
/// pushes a schema's record types to the server, as `initializeCloudKitSchema` does.
///
/// ```sh
/// $ cloudstore schema init --schema Schema/Notes.json --dry-run
/// schema "Notes" version 2: 4 record types (dry run: nothing was sent)
/// Folder  (4 fields)
///   title          STRING     queryable
///   …
/// ```
public struct SchemaInitCommand: CloudStoreSubcommand {
    public static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Create a schema's record types on the server.",
        discussion: """
            Derives the record types of the schema's mirrored entities (a field per attribute and \
            to-one relationship, plus the link record type of many-to-many relationships) and \
            saves them on the server, as initializeCloudKitSchema does; prints each record type \
            and its fields. With --dry-run it only prints them: nothing is contacted or changed \
            and --server, --container and --token may be left out.

            Runs through a container on a temporary store (or on --store PATH, which it opens, \
            migrating it if needed with the steps of --migrations, by default a Migrations folder \
            here or beside the schema file's folder). An unreachable server or a refused token: exit \
            status 1.

            Example:
              cloudstore schema init --schema Schema/Notes.json --dry-run
              cloudstore schema init --schema Schema/Notes.json --server http://127.0.0.1:8080 \\
                --container iCloud.com.example.notes --token alice-token
            """)

    @Option(help: "The schema file.")
    var schema: String

    @Option(help: ArgumentHelp("The server's base URL, e.g. http://127.0.0.1:8080.", valueName: "url"))
    var server: String?

    @Option(help: ArgumentHelp("The container identifier, e.g. iCloud.com.example.notes.", valueName: "id"))
    var container: String?

    @Option(help: "The container environment: development or production.")
    var environment: String = CloudEnvironment.development.rawValue

    @Option(help: "The user's bearer token.")
    var token: String?

    @Option(help: "A store file to run through instead of a temporary one (not used with --dry-run); migrated when it holds an older version of the schema.")
    var store: String?

    @Option(help: "The migration steps for --store, as for `cloudstore migrate`: by default a Migrations folder here or beside the schema file's folder.")
    var migrations: String?

    @Flag(help: "Print the record types and change nothing.")
    var dryRun = false

    @OptionGroup public var global: GlobalOptions

    public init() {}

    public func validate() throws {
        guard CloudEnvironment(rawValue: environment) != nil else {
            throw ValidationError("--environment must be development or production")
        }
        guard !dryRun else { return }
        guard server != nil, container != nil, token != nil else {
            throw ValidationError("--server, --container and --token are required unless --dry-run is given")
        }
        if let server, URL(string: server)?.host == nil {
            throw ValidationError("--server must be a URL like http://127.0.0.1:8080")
        }
    }

    public func run(in context: CommandContext) async throws {
        let loaded = try SchemaFile.load(schema)
        let temporary = FileManager.default.temporaryDirectory
            .appendingPathComponent("cloudstore-schema-init-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: temporary) }
        let storeURL =
            dryRun || store == nil ? temporary.appendingPathComponent("schema-init.sqlite") : URL(fileURLWithPath: store!)
        var options = PersistentCloudContainer.Options()
        if !dryRun, let server, let container, let token {
            options.server = .init(
                url: URL(string: server)!, containerIdentifier: container,
                environment: CloudEnvironment(rawValue: environment)!, token: token)
        }
        options.automaticallySync = false
        var plan = MigrationPlan()
        if !dryRun, let store, let info = try PersistentStore.fileInfo(at: URL(fileURLWithPath: store)),
            info.schemaVersion != loaded.version
        {
            let steps = try MigrationSteps.find(explicit: migrations, schemaPath: schema, schema: loaded)
            context.output.print("\(store): schema \"\(info.schemaName)\" version \(info.schemaVersion) → \(loaded.version); \(steps.describe(schemaName: loaded.name))")
            plan = steps.plan
        }
        let opened = try await PersistentCloudContainer(
            url: storeURL, schema: loaded, migrations: plan, options: options, logger: context.logger("mirroring"))
        let cloudSchema: CloudSchema
        do {
            cloudSchema = try await opened.initializeCloudSchema(dryRun: dryRun)
            try await opened.close()
        } catch {
            try? await opened.close()
            throw explain(error)
        }
        let types = SchemaValidateCommand.count(cloudSchema.recordTypes.count, "record type")
        if dryRun {
            context.output.print("schema \"\(loaded.name)\" version \(loaded.version): \(types) (dry run: nothing was sent)")
        } else {
            context.output.print(
                "schema \"\(loaded.name)\" version \(loaded.version): \(types) saved on \(server!) container \(container!) (\(environment))"
                    + (cloudSchema.version.map { ", server schema version \($0)" } ?? ""))
        }
        for recordType in cloudSchema.recordTypes {
            context.output.print("\(recordType.name)  (\(SchemaValidateCommand.count(recordType.fields.count, "field")))")
            context.output.print(
                TextTable(
                    recordType.fields.map { [$0.name, $0.type.description, $0.queryable == true ? "queryable" : ""] },
                    indent: "  "))
            for constraint in recordType.uniquenessConstraints ?? [] {
                context.output.print("  unique per zone: \(constraint.joined(separator: ", "))")
            }
        }
    }

    /// The server's or the network's failure as one line that says what to do (never the token).
    private func explain(_ error: any Error) -> any Error {
        guard let server else { return error }
        return Self.explain(error, server: server, doing: "did not save the schema")
    }

    /// A failure to reach `server` or of its answer as one line that says what to do (never the
    /// token); `doing` ends "the server at URL …" for any other server error.
    static func explain(_ error: any Error, server: String, doing: String) -> any Error {
        guard let error = error as? CloudError else { return error }
        switch error.kind {
        case .network, .timeout:
            return CommandError(
                "cannot reach the server at \(server) (check --server, and that cloudstore serve runs there): \(error.message)")
        case .server(let serverError)
        where [.authenticationFailed, .authenticationRequired, .accessDenied].contains(serverError.serverErrorCode):
            return CommandError(
                "the server at \(server) refused the token (\(error.description)): check --token")
        default:
            return CommandError("the server at \(server) \(doing): \(error.description)")
        }
    }
}
