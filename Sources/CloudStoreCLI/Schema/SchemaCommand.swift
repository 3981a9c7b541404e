import ArgumentParser

/// `cloudstore schema`: the schema file's subcommands.
public struct SchemaCommand: ParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "schema",
        abstract: "Check a schema file, or create its record types on the server.",
        discussion: """
            A schema file is a JSON object with the schema's "name", its "version" and its \
            "entities", each with "attributes" and "relationships"; the article "Schema file \
            format" of the CloudStore documentation describes every key.

            Example:
              cloudstore schema validate Schema/Notes.json
              cloudstore schema init --schema Schema/Notes.json --dry-run
            """,
        subcommands: [SchemaValidateCommand.self, SchemaInitCommand.self])

    public init() {}
}
