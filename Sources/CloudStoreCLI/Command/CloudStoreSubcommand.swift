import ArgumentParser
import Foundation

/// A `cloudstore` subcommand: it takes the ``GlobalOptions`` and does its work in a
/// ``CommandContext`` rather than on the process's standard output, so tests run it in process.
///
/// ```swift
/// struct HelloCommand: CloudStoreSubcommand {
///     static let configuration = CommandConfiguration(commandName: "hello", abstract: "Says hello.")
///     @OptionGroup var global: GlobalOptions
///     func run(in context: CommandContext) async throws { context.output.print("hello") }
/// }
/// ```
public protocol CloudStoreSubcommand: AsyncParsableCommand {
    var global: GlobalOptions { get }

    /// Does the command's work, writing to `context.output`; throws ``CommandError`` (or any error
    /// whose description says what to do) when it cannot.
    func run(in context: CommandContext) async throws
}

extension CloudStoreSubcommand {
    /// Runs the command as the process, as ArgumentParser's `main()` does.
    public func run() async throws {
        try await run(output: .standard, environment: ProcessInfo.processInfo.environment, handlesSignals: true)
    }

    /// Runs the command with a context made of `output`, `environment` and `--debug`, bound to the
    /// task so that loggers created meanwhile write to `output`.
    func run(output: CommandOutput, environment: [String: String], handlesSignals: Bool) async throws {
        CommandLogging.bootstrap()
        let context = CommandContext(
            output: output, environment: environment, debug: global.debug, handlesSignals: handlesSignals)
        try await CommandContext.$current.withValue(context) {
            try await run(in: context)
        }
    }
}
