import CloudStoreCLI
import CloudStoreSync
import CloudStoreTesting
import Foundation
import Testing

/// `cloudstore serve` run in process: it serves, stops, and refuses bad files with one line.
@Suite("cloudstore serve", .timeLimit(.minutes(ReliabilityRun.hangLimitMinutes)))
struct CLIServeTests {
    @Test func serve_printsWhereItListensServesAndStops() async throws {
        try await TemporaryDirectory.with { directory in
            let data = directory.appendingPathComponent("data")
            let serve = try await ServeRun.start(["--data", data.path, "--tokens", try writeTokensFile(in: directory)])
            #expect(
                serve.captured.standardOutput
                    == "cloudstore: listening on http://127.0.0.1:\(serve.port) (storage: SQLite in \(data.path))\n")
            try await serve.saveANote()
            #expect(FileManager.default.fileExists(atPath: data.appendingPathComponent("iCloud.cli.test.sqlite").path))
            #expect(await serve.stop() == 0)
            #expect(serve.captured.standardError.isEmpty, "level 0 logs nothing when all goes well")
        }
    }

    @Test func wrongToken_isRefusedByTheServer() async throws {
        try await TemporaryDirectory.with { directory in
            let serve = try await ServeRun.start([
                "--data", directory.appendingPathComponent("data").path, "--tokens", try writeTokensFile(in: directory),
            ])
            await #expect(throws: CloudError.self) { _ = try await serve.database(token: "mallory-token").listZones() }
            #expect(await serve.stop() == 0)
        }
    }

    @Test func missingTokensFile_failsWithOneLineNamingIt() async throws {
        try await TemporaryDirectory.with { directory in
            let missing = directory.appendingPathComponent("nope.json").path
            let result = await cloudstore("serve", "--port", "0", "--container", "iCloud.cli.test", "--data", directory.path, "--tokens", missing)
            #expect(result.isOneLineFailure(mentioning: "cannot read the tokens file \(missing)"), "\(result.standardError)")
        }
    }

    @Test func invalidTokensFile_failsWithOneLineShowingTheFormat() async throws {
        try await TemporaryDirectory.with { directory in
            let tokens = directory.appendingPathComponent("tokens.json")
            try Data("[1, 2]".utf8).write(to: tokens)
            let result = await cloudstore("serve", "--port", "0", "--container", "iCloud.cli.test", "--data", directory.path, "--tokens", tokens.path)
            #expect(result.isOneLineFailure(mentioning: tokens.path, "is not a JSON object of strings"))
        }
    }

    @Test func missingServerKeyFile_failsWithOneLineNamingIt() async throws {
        try await TemporaryDirectory.with { directory in
            let pem = directory.appendingPathComponent("key.pem").path
            let result = await cloudstore("serve", "--port", "0", "--container", "iCloud.cli.test", "--data", directory.path, "--server-key", "k1=\(pem)")
            #expect(result.isOneLineFailure(mentioning: "cannot read the server key file \(pem) of key k1"))
        }
    }

    /// An unreachable PostgreSQL fails (after the 10 s connect timeout at most) in one line naming
    /// host, port and database, never the password. That it gives up rather than retrying on is
    /// that the command returns: a server that kept retrying would run into the suite's time
    /// limit (how long it takes is not checked: the whole suite on two cores made it 34 s once).
    @Test func unreachablePostgreSQL_failsWithOneLineNamingItWithoutThePassword() async throws {
        try await TemporaryDirectory.with { directory in
            let result = await cloudstore(
                "serve", "--port", "0", "--container", "iCloud.cli.test", "--tokens", try writeTokensFile(in: directory),
                environment: ["CLOUDSTORE_POSTGRES": "postgres://cloudstore:hunter2@127.0.0.1:1/notes"])
            #expect(
                result.isOneLineFailure(mentioning: "cannot reach PostgreSQL at 127.0.0.1:1", "database notes", "CLOUDSTORE_POSTGRES"),
                "\(result.standardError)")
            #expect(!result.standardError.contains("hunter2") && !result.standardOutput.contains("hunter2"))
        }
    }

    @Test func portInUse_failsWithOneLine() async throws {
        let server = try await TestServer.start()
        try await TemporaryDirectory.with { directory in
            let result = await cloudstore(
                "serve", "--port", "\(server.port)", "--container", "iCloud.cli.test", "--data", directory.path, "--tokens",
                try writeTokensFile(in: directory))
            #expect(
                result.isOneLineFailure(mentioning: "port \(server.port) is in use", "choose another port with --port"),
                "\(result.standardError)")
        }
        try await server.shutdown()
    }
}

/// `cloudstore serve` takes every setting from its option, the environment or a config file.
@Suite("cloudstore serve: settings from the environment and a config file", .timeLimit(.minutes(ReliabilityRun.hangLimitMinutes)))
struct CLIServeSettingsTests {
    @Test func configFileAndEnvironment_configureTheServerWithNothingOnTheCommandLine() async throws {
        try await TemporaryDirectory.with { directory in
            let config = directory.appendingPathComponent("serve.json")
            let settings: [String: Any] = [
                "data": directory.appendingPathComponent("data").path, "tokens": try writeTokensFile(in: directory),
                "containers": ["iCloud.cli.test", "iCloud.cli.other"], "idleTimeout": 5, "maxConnections": 50,
            ]
            try JSONSerialization.data(withJSONObject: settings).write(to: config)
            let serve = try await ServeRun.start(
                ["--config", config.path], environment: ["CLOUDSTORE_OPERATOR_TOKEN": "the-operator"],
                declaringContainer: false)
            try await serve.saveANote()

            let other = HTTPCloudDatabase(
                baseURL: URL(string: "http://127.0.0.1:\(serve.port)")!, container: "iCloud.cli.other", token: "alice-token",
                deviceID: "cli-test")
            #expect(try await other.listZones().zones.count == 1, "the second container of the file is served")
            let unlisted = HTTPCloudDatabase(
                baseURL: URL(string: "http://127.0.0.1:\(serve.port)")!, container: "iCloud.cli.unlisted",
                token: "alice-token", deviceID: "cli-test")
            await #expect(throws: CloudError.self) { _ = try await unlisted.listZones() }

            let schema = CloudSchema(recordTypes: [.init(name: "Note", fields: [.init(name: "title", type: .string)])])
            let production = { (token: String) in
                HTTPCloudDatabase(
                    baseURL: URL(string: "http://127.0.0.1:\(serve.port)")!, container: "iCloud.cli.test",
                    environment: .production, token: token, deviceID: "cli-test")
            }
            await #expect(throws: CloudError.self, "a user may not change the production schema") {
                _ = try await production("alice-token").modifySchema(schema)
            }
            #expect(try await production("the-operator").modifySchema(schema).version == 1, "the operator token from the environment may")
            #expect(await serve.stop() == 0)
            #expect(!serve.captured.standardError.contains("the-operator"), "the operator token is never logged")
        }
    }

    @Test func commandLine_winsOverTheEnvironment_whichWinsOverTheFile() async throws {
        try await TemporaryDirectory.with { directory in
            let config = directory.appendingPathComponent("serve.json")
            try Data(#"{"containers": ["iCloud.from.file"], "port": 1}"#.utf8).write(to: config)
            let serve = try await ServeRun.start(
                ["--config", config.path, "--data", directory.appendingPathComponent("data").path, "--tokens",
                 try writeTokensFile(in: directory)],
                environment: ["CLOUDSTORE_CONTAINERS": "iCloud.cli.test,iCloud.from.environment"], declaringContainer: false)
            try await serve.saveANote()
            #expect(serve.port != 1, "--port 0 of the command line wins over the file's 1")
            let fromFile = HTTPCloudDatabase(
                baseURL: URL(string: "http://127.0.0.1:\(serve.port)")!, container: "iCloud.from.file", token: "alice-token",
                deviceID: "cli-test")
            await #expect(throws: CloudError.self, "the environment's containers replace the file's") {
                _ = try await fromFile.listZones()
            }
            #expect(await serve.stop() == 0)
        }
    }

    @Test func badSettings_failWithOneLineNamingTheSetting() async throws {
        try await TemporaryDirectory.with { directory in
            let none = await cloudstore("serve", "--port", "0", "--data", directory.path)
            #expect(none.isOneLineFailure(mentioning: "no containers", "--container"), "\(none.standardError)")

            let missing = directory.appendingPathComponent("nope.json").path
            let noFile = await cloudstore("serve", "--config", missing)
            #expect(noFile.isOneLineFailure(mentioning: "no config file at \(missing)"), "\(noFile.standardError)")

            let config = directory.appendingPathComponent("serve.json")
            try Data(#"{"containers": ["iCloud.cli.test"], "maxConnections": "many"}"#.utf8).write(to: config)
            let wrongType = await cloudstore("serve", "--config", config.path, "--data", directory.path)
            #expect(
                wrongType.isOneLineFailure(mentioning: "maxConnections", "CLOUDSTORE_MAX_CONNECTIONS", "whole number"),
                "\(wrongType.standardError)")

            let badPort = await cloudstore(
                "serve", "--data", directory.path, "--container", "iCloud.cli.test",
                environment: ["CLOUDSTORE_PORT": "70000"])
            #expect(badPort.isOneLineFailure(mentioning: "port 70000", "0 to 65535"), "\(badPort.standardError)")

            let misspelt = directory.appendingPathComponent("misspelt.json")
            try Data(#"{"containers": ["iCloud.cli.test"], "maxconnections": 5}"#.utf8).write(to: misspelt)
            let unknown = await cloudstore("serve", "--config", misspelt.path, "--data", directory.path)
            #expect(unknown.isOneLineFailure(mentioning: "unknown setting \"maxconnections\"", "maxConnections"), "\(unknown.standardError)")

            let badNotifications = await cloudstore(
                "serve", "--data", directory.path, "--container", "iCloud.cli.test", "--notifications", "push")
            #expect(
                badNotifications.isOneLineFailure(mentioning: "notifications \"push\"", "listen", "poll"),
                "\(badNotifications.standardError)")
            let intervalAlone = await cloudstore(
                "serve", "--data", directory.path, "--container", "iCloud.cli.test", "--notifications-poll-interval", "0.5")
            #expect(
                intervalAlone.isOneLineFailure(mentioning: "notificationsPollInterval", "--notifications poll"),
                "\(intervalAlone.standardError)")
            let zeroInterval = await cloudstore(
                "serve", "--data", directory.path, "--container", "iCloud.cli.test", "--notifications", "poll",
                "--notifications-poll-interval", "0")
            #expect(zeroInterval.isOneLineFailure(mentioning: "poll interval", "above 0"), "\(zeroInterval.standardError)")

            let replicaOfSQLite = await cloudstore(
                "serve", "--data", directory.path, "--container", "iCloud.cli.test", "--postgres-replica",
                "postgres://u@127.0.0.1:1/cloudstore")
            #expect(
                replicaOfSQLite.isOneLineFailure(mentioning: "read replicas are PostgreSQL's", "--postgres"),
                "\(replicaOfSQLite.standardError)")

            let notJSON = directory.appendingPathComponent("bad.json")
            try Data("containers = [1]".utf8).write(to: notJSON)
            let unparsable = await cloudstore("serve", "--config", notJSON.path)
            #expect(unparsable.isOneLineFailure(mentioning: notJSON.path, "not a JSON object"), "\(unparsable.standardError)")
        }
    }
}
