import ArgumentParser
import CloudStore
import CloudStoreSync
import CloudStoreWire
import Foundation

/// `cloudstore schema diff --schema FILE --server URL --container ID --token T [--environment E] [--json]`:
/// compares a schema file's record types with the schema a server has, before an app version
/// built on that file uploads anything.
///
/// ```sh
/// $ cloudstore schema diff --schema Schema/Notes.json --server http://127.0.0.1:8080 \
///     --container iCloud.com.example.notes --token alice-token --environment production
/// schema "Notes" version 2 against production (server schema version 3)
/// only in the app     Note.created, Note.metadata, Note.rank
/// refused: field Note.created is not in the production schema: saves carrying it are refused until it is added (cloudstore schema init)
/// …
/// ```
public struct SchemaDiffCommand: CloudStoreSubcommand {
    public static let configuration = CommandConfiguration(
        commandName: "diff",
        abstract: "Compare a schema file with the schema a server has.",
        discussion: """
            Fetches the server's schema for the container and environment and compares it with \
            the record types of the schema file's mirrored entities (those cloudstore schema \
            init would save): record types and fields only the app has, fields whose types \
            differ, and fields only the server has (another app version's, which this app keeps \
            and sends back unchanged). Then says what the server would refuse: in production \
            every record type or field it lacks, in development (which adds them as saves carry \
            them) only the fields whose types differ.

            Exit status 0 when the server would take every save of the app; 1 when it would \
            refuse some (each named on a line starting "refused:"), or when the server cannot \
            be asked (unreachable, a refused token: one line on standard error).

            Example:
              cloudstore schema diff --schema Schema/Notes.json --server http://127.0.0.1:8080 \\
                --container iCloud.com.example.notes --token alice-token --environment production
            """)

    @Option(help: "The schema file.")
    var schema: String

    @Option(help: ArgumentHelp("The server's base URL, e.g. http://127.0.0.1:8080.", valueName: "url"))
    var server: String

    @Option(help: ArgumentHelp("The container identifier, e.g. iCloud.com.example.notes.", valueName: "id"))
    var container: String

    @Option(help: "The container environment: development or production.")
    var environment: String = CloudEnvironment.development.rawValue

    @Option(help: "The user's bearer token.")
    var token: String

    @Flag(help: "Print JSON instead of text.")
    var json = false

    @OptionGroup public var global: GlobalOptions

    public init() {}

    public func validate() throws {
        guard CloudEnvironment(rawValue: environment) != nil else {
            throw ValidationError("--environment must be development or production")
        }
        if URL(string: server)?.host == nil {
            throw ValidationError("--server must be a URL like http://127.0.0.1:8080")
        }
    }

    public func run(in context: CommandContext) async throws {
        let loaded = try SchemaFile.load(schema)
        let environment = CloudEnvironment(rawValue: environment)!
        let database = HTTPCloudDatabase(
            baseURL: URL(string: server)!, container: container, environment: environment, token: token,
            deviceID: "cloudstore-schema-diff", logger: context.logger("http"))
        let serverSchema: CloudSchema
        do {
            serverSchema = try await database.fetchSchema()
        } catch {
            throw SchemaInitCommand.explain(error, server: server, doing: "did not send its schema")
        }
        let difference = loaded.cloudSchema.difference(from: serverSchema)
        let refusals = difference.refusals(in: environment)
        if json {
            try context.output.printJSON(
                DiffJSON(
                    schemaName: loaded.name, schemaVersion: loaded.version, environment: environment.rawValue,
                    serverSchemaVersion: serverSchema.version, missingRecordTypes: difference.missingRecordTypes,
                    missingFields: difference.missingFields, mismatches: difference.mismatches.map(\.description),
                    serverOnlyFields: difference.serverOnlyFields,
                    missingUniquenessConstraints: difference.missingUniquenessConstraints, refusals: refusals))
        } else {
            context.output.print(
                "schema \"\(loaded.name)\" version \(loaded.version) against \(environment.rawValue)"
                    + (serverSchema.version.map { " (server schema version \($0))" } ?? " (the server has no schema yet)"))
            var table = TextTable()
            func row(_ label: String, _ names: [String]) {
                if !names.isEmpty { table.append([label, names.joined(separator: ", ")]) }
            }
            row("record types only in the app", difference.missingRecordTypes)
            row("fields only in the app", difference.missingFields)
            row("fields typed differently", difference.mismatches.map { "\($0.recordType).\($0.field) (app \($0.app.rawValue), server \($0.server.rawValue))" })
            row("fields only on the server", difference.serverOnlyFields)
            row("uniqueness constraints only in the app", difference.missingUniquenessConstraints)
            if table.rows.isEmpty { table.append(["no differences", ""]) }
            context.output.print(table)
            for refusal in refusals { context.output.print("refused: \(refusal)") }
            if refusals.isEmpty { context.output.print("the server takes every save of this schema") }
        }
        if !refusals.isEmpty { throw ExitCode(CloudStoreCommand.failure) }
    }
}

/// The comparison as `schema diff --json` prints it.
private struct DiffJSON: Encodable {
    var schemaName: String
    var schemaVersion: Int
    var environment: String
    var serverSchemaVersion: Int?
    var missingRecordTypes: [String]
    var missingFields: [String]
    var mismatches: [String]
    var serverOnlyFields: [String]
    var missingUniquenessConstraints: [String]
    var refusals: [String]
}
