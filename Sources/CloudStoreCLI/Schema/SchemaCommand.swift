import ArgumentParser

/// `cloudstore schema`: the schema file's subcommands.
public struct SchemaCommand: ParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "schema",
        abstract: "Check a schema file.",
        discussion: """
            A schema file declares an app's entities, attributes and relationships (DESIGN.md §3).

            Example:
              cloudstore schema validate Schema/Notes.json
            """,
        subcommands: [SchemaValidateCommand.self])

    public init() {}
}
