/// The `cloudstore` executable: all of it lives in CloudStoreCLI, so tests run the same commands.
import CloudStoreCLI
import Foundation

// A reader that goes away (`cloudstore history … | head`) makes writes fail with EPIPE, which
// `CommandOutput.standard` drops, whether or not a command started the server (which ignores
// SIGPIPE too); the exit status stays the command's.
signal(SIGPIPE, SIG_IGN)
exit(await CloudStoreCommand.run(Array(CommandLine.arguments.dropFirst()), output: .standard, handlesSignals: true))
