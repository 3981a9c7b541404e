import ArgumentParser
import CloudStoreLogging

/// The options every `cloudstore` subcommand takes.
public struct GlobalOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Log detail: 0 warnings and errors, 1 lifecycle, 2 each request, 3 each record, 4 everything. Overrides CLOUDSTORE_DEBUG.",
            valueName: "n"),
        transform: { text in
            guard let level = DebugLevel(parsing: text) else { throw ValidationError("use a level from 0 to 4") }
            return level
        })
    public var debug: DebugLevel?

    public init() {}
}
