import ArgumentParser

/// `cloudstore schema`: the schema file's subcommands.
public struct SchemaCommand: ParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "schema",
        abstract: "Check a schema file, compare it with a server's, or create its record types there.",
        discussion: """
            A schema file is a JSON object with the schema's "name", its "version" and its \
            "entities", each with "attributes" and "relationships"; the article "Schema file \
            format" of the CloudStore documentation describes every key.

            Example:
              cloudstore schema validate Schema/Notes.json
              cloudstore schema init --schema Schema/Notes.json --dry-run
              cloudstore schema diff --schema Schema/Notes.json --server http://127.0.0.1:8080 \\
                --container iCloud.com.example.notes --token alice-token --environment production
            """,
        subcommands: [SchemaValidateCommand.self, SchemaInitCommand.self, SchemaDiffCommand.self])

    public init() {}
}
