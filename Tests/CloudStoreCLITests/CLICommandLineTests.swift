import CloudStoreCLI
import Testing

/// The root command: version, help, usage errors and their exit statuses.
@Suite("cloudstore command line")
struct CLICommandLineTests {
    @Test func version_printsTheVersionAndExitsZero() async {
        let result = await cloudstore("--version")
        #expect(result.status == 0)
        #expect(result.standardOutput == "\(CloudStoreVersion.current)\n")
        #expect(result.standardError.isEmpty)
    }

    @Test func help_listsTheSubcommandsAndExitsZero() async {
        let result = await cloudstore("--help")
        #expect(result.status == 0)
        #expect(result.standardError.isEmpty)
        for text in [
            "USAGE: cloudstore", "schema", "serve", "migrate", "status", "history", "conflicts", "shares", "demo",
            "CLOUDSTORE_DEBUG", "Exit status",
        ] {
            #expect(result.standardOutput.contains(text), "help lacks \(text):\n\(result.standardOutput)")
        }
    }

    @Test(arguments: [
        ["schema", "validate"], ["schema", "init"], ["serve"], ["schema"], ["migrate"], ["status"], ["history"],
        ["conflicts"], ["shares"], ["demo"],
    ])
    func help_ofEachCommandHasAnAbstractADiscussionAndAnExample(_ command: [String]) async {
        let result = await cloudstore(command + ["--help"])
        #expect(result.status == 0)
        #expect(result.standardOutput.contains("OVERVIEW: "))
        #expect(result.standardOutput.contains("Example:\n"), "\(command) help has no example:\n\(result.standardOutput)")
        #expect(result.standardOutput.contains("cloudstore \(command.joined(separator: " "))"))
        let viaHelp = await cloudstore(["help"] + command)
        #expect(viaHelp.status == 0 && viaHelp.standardOutput == result.standardOutput)
    }

    @Test func noSubcommand_printsHelp() async {
        let result = await cloudstore()
        #expect(result.status == 0)
        #expect(result.standardOutput.contains("SUBCOMMANDS:"))
    }

    @Test func unknownFlag_isAUsageErrorWithTheUsageOnStandardError() async {
        let result = await cloudstore("schema", "validate", "--frobnicate", Fixtures.notesSchema)
        #expect(result.status == 2)
        #expect(result.standardOutput.isEmpty)
        #expect(result.standardError.contains("Error: Unknown option '--frobnicate'"))
        #expect(result.standardError.contains("Usage: cloudstore schema validate"))
    }

    @Test func unknownSubcommand_isAUsageError() async {
        let result = await cloudstore("frobnicate")
        #expect(result.status == 2)
        #expect(result.standardError.contains("frobnicate"))
    }

    @Test func badDebugLevel_isAUsageErrorNamingTheOption() async {
        for value in ["loud", "5", "1.5"] {
            let result = await cloudstore("schema", "validate", "--debug", value, Fixtures.notesSchema)
            #expect(result.status == 2, "--debug \(value)")
            #expect(result.standardError.contains("'\(value)' is invalid for '--debug <n>': use a level from 0 to 4"))
        }
        let missing = await cloudstore("schema", "validate", Fixtures.notesSchema, "--debug")
        #expect(missing.status == 2)
        #expect(missing.standardError.contains("Missing value for '--debug <n>'"))
    }

    @Test func badOptionValue_isAUsageError() async {
        let port = await cloudstore("serve", "--port", "eighty")
        #expect(port.status == 2)
        #expect(port.standardError.contains("'eighty' is invalid for '--port <port>'"))
        let rate = await cloudstore("serve", "--rate-limit", "0")
        #expect(rate.status == 2)
        #expect(rate.standardError.contains("--rate-limit must be above 0"))
        let key = await cloudstore("serve", "--server-key", "no-equals-sign")
        #expect(key.status == 2)
        #expect(key.standardError.contains("a server key is given as ID=PEMFILE"))
        let outOfRange = await cloudstore("serve", "--port", "70000")
        #expect(outOfRange.status == 2)
        #expect(outOfRange.standardError.contains("--port must be 0 to 65535"))
    }
}
