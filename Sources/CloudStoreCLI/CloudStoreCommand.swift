import ArgumentParser

/// The `cloudstore` command.
///
/// ```sh
/// cloudstore serve --port 8080 --data ./data --tokens tokens.json
/// ```
public struct CloudStoreCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "cloudstore",
        abstract: "CloudStore: Core Data + CloudKit style sync for Swift on Linux.",
        subcommands: [ServeCommand.self])

    public init() {}

    /// Parses the process's arguments and runs the command they name; exits on errors, with
    /// ArgumentParser's messages and status codes.
    public static func runFromCommandLine() async {
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
    }
}
