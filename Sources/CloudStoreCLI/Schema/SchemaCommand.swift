import ArgumentParser

/// `cloudstore schema`: the schema file's subcommands.
public struct SchemaCommand: ParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "schema",
        abstract: "Check a schema file, or create its record types on the server.",
        discussion: """
            A schema file declares an app's entities, attributes and relationships (DESIGN.md §3).

            Example:
              cloudstore schema validate Schema/Notes.json
              cloudstore schema init --schema Schema/Notes.json --dry-run
            """,
        subcommands: [SchemaValidateCommand.self, SchemaInitCommand.self])

    public init() {}
}
