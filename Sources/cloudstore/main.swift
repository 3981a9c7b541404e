/// The `cloudstore` executable: all of it lives in CloudStoreCLI, so tests run the same commands.
import CloudStoreCLI
import Foundation

exit(await CloudStoreCommand.run(Array(CommandLine.arguments.dropFirst()), output: .standard, handlesSignals: true))
