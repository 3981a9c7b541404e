import ArgumentParser
import Foundation

/// The version `cloudstore --version` prints.
public enum CloudStoreVersion {
    public static let current = "0.1.0"
}

/// The `cloudstore` command.
///
/// ```sh
/// cloudstore demo
/// cloudstore schema validate Schema/Notes.json
/// cloudstore serve --port 8080 --data ./data --tokens tokens.json
/// cloudstore history --store notes.sqlite --limit 10
/// ```
///
/// Run it in process with ``run(_:output:environment:handlesSignals:)``, as the executable and the
/// tests do.
public struct CloudStoreCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "cloudstore",
        abstract: "CloudStore: Core Data + CloudKit style sync for Swift on Linux.",
        discussion: """
            Each subcommand explains itself with an example: cloudstore help <subcommand>.
            Set CLOUDSTORE_DEBUG=0…4 or pass --debug N to a subcommand to see what happens: 0 \
            warnings and errors, 1 lifecycle, 2 each request, 3 each record, 4 everything.
            Exit status: 0 success, 1 failure (one line on standard error says why), 2 usage error.
            """,
        version: CloudStoreVersion.current,
        subcommands: [
            SchemaCommand.self, ServeCommand.self, HashPasswordCommand.self, MigrateCommand.self, SyncCommand.self, StatusCommand.self,
            HistoryCommand.self, ConflictsCommand.self, SharesCommand.self, CheckCommand.self, DemoCommand.self,
        ])

    public init() {}

    /// Exit status of a command that did its work.
    public static let success: Int32 = 0
    /// Exit status of a command that could not do its work; one line on standard error says why.
    public static let failure: Int32 = 1
    /// Exit status of a command line that cannot be understood: an unknown flag, a missing
    /// argument, a bad value.
    public static let usageError: Int32 = 2

    /// Parses `arguments` (without the program name) and runs the command they name, writing to
    /// `output`; answers the exit status: ``success``, ``failure`` or ``usageError``.
    ///
    /// ```swift
    /// let captured = CapturedOutput()
    /// let status = await CloudStoreCommand.run(["schema", "validate", "Schema/Notes.json"], output: captured.output)
    /// ```
    ///
    /// - Parameters:
    ///   - arguments: the command line without the program name, as a shell passes it.
    ///   - output: where the command writes: ``CommandOutput/standard``, or a ``CapturedOutput``'s.
    ///   - environment: where `CLOUDSTORE_DEBUG` is read.
    ///   - handlesSignals: whether SIGTERM and SIGINT stop `serve` gracefully (the executable);
    ///     otherwise cancelling the calling task does.
    public static func run(
        _ arguments: [String], output: CommandOutput,
        environment: [String: String] = ProcessInfo.processInfo.environment, handlesSignals: Bool = false
    ) async -> Int32 {
        var command: any ParsableCommand
        let (arguments, containers) = ServeCommand.separatingContainers(arguments)
        do {
            command = try parseAsRoot(arguments)
        } catch {
            return report(argumentParserError: error, output: output)
        }
        if !containers.isEmpty, var serve = command as? ServeCommand {
            serve.containers += containers
            command = serve
        }
        guard let subcommand = command as? any CloudStoreSubcommand else {
            // The root, a group or `help`: their runs only print help, through ArgumentParser's errors.
            do {
                var command = command
                try command.run()
                return success
            } catch {
                return report(argumentParserError: error, output: output)
            }
        }
        do {
            try await subcommand.run(output: output, environment: environment, handlesSignals: handlesSignals)
            return success
        } catch let error as ExitCode {
            return error.rawValue
        } catch {
            output.printError("cloudstore: error: \(oneLine(error))")
            return failure
        }
    }

    /// Prints help, the version or a usage error as ArgumentParser words them.
    private static func report(argumentParserError error: any Error, output: CommandOutput) -> Int32 {
        let message = fullMessage(for: error, columns: output.columns)
        let code = exitCode(for: error)
        if code == .success {
            output.print(message)
            return success
        }
        output.printError(message)
        return code == .validationFailure ? usageError : code.rawValue
    }

    /// An error's description on one line.
    static func oneLine(_ error: any Error) -> String {
        String(describing: error).split(whereSeparator: \.isNewline)
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
            .joined(separator: " ")
    }
}
