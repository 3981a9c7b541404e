import ArgumentParser

/// `--after SEQ` of the commands that read a log numbered from 1 (`conflicts`, `shares`).
struct SequenceOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Only entries after this sequence number.", valueName: "seq"))
    var after: Int64 = 0

    func validate() throws {
        if after < 0 { throw ValidationError("--after must be 0 or more") }
    }
}
