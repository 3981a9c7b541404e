import ArgumentParser

/// The options of the commands that list entries (`history`, `conflicts`): `--limit N` and `--json`.
struct ListingOptions: ParsableArguments {
    @Option(help: "At most this many entries.")
    var limit: Int?

    @Flag(help: "Print JSON instead of text.")
    var json = false

    func validate() throws {
        if let limit, limit < 1 { throw ValidationError("--limit must be at least 1") }
    }
}
