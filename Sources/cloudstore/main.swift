/// The `cloudstore` executable: all of it lives in CloudStoreCLI, so tests run the same commands.
import CloudStoreCLI

await CloudStoreCommand.runFromCommandLine()
