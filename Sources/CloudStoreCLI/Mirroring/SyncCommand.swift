import ArgumentParser
import CloudStore
import Foundation

/// `cloudstore sync --store PATH --server URL --container ID --token-file FILE`: sends a store's
/// pending changes to a server and fetches what other devices wrote, until both directions are
/// done, showing progress as it goes.
///
/// ```sh
/// $ cloudstore sync --store notes.sqlite --server http://127.0.0.1:8080 \
///       --container iCloud.com.example.notes --token-file alice.token
/// uploading: 10000/10000 (100%) in 1.9s, 5263/s
/// downloading: 250 in 0.1s, 2500/s
/// synced notes.sqlite: 10000 uploaded, 250 fetched, 0 conflicts logged, nothing pending
/// ```
public struct SyncCommand: CloudStoreSubcommand {
    public static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Sync a store with a server now: send its pending changes, fetch other devices' changes.",
        discussion: """
            Opens the store as an app would (with the schema the store keeps, or --schema), sends \
            every pending upload and fetches the server's changes until nothing is left in either \
            direction or --timeout passes, retrying what fails for a while (the network, a \
            throttled or restarting server). Progress goes to standard error: one line rewritten \
            in place on a terminal, a line every two seconds otherwise; the summary goes to \
            standard output.

            The token is read from --token-file or CLOUDSTORE_TOKEN, never from the command line \
            (where other users of the machine could read it). Exit status 1 when the sync could \
            not finish: the server refused the credentials or some uploads, time ran out, or the \
            store's zone was deleted on the server (or the token is another user's) and nobody \
            decided what happens to the local data: --decide uploadAgain, keepLocalOnly or \
            deleteLocalData answers that, and the sync goes on. The choice answers every decision \
            the sync meets, the zone's and each share's that ended with unsent changes here.

            Example:
              cloudstore sync --store notes.sqlite --server http://127.0.0.1:8080 \\
                --container iCloud.com.example.notes --token-file alice.token
              cloudstore sync --store notes.sqlite --server http://127.0.0.1:8080 \\
                --container iCloud.com.example.notes --token-file alice.token --decide uploadAgain
            """)

    @Option(help: "The store file (SQLite).")
    var store: String

    @Option(help: "The schema file to open the store with; by default the schema the store keeps.")
    var schema: String?

    @Option(help: "The server's base URL, e.g. http://127.0.0.1:8080.")
    var server: String

    @Option(help: "The container identifier, e.g. iCloud.com.example.notes.")
    var container: String

    @Option(help: "A file holding the user's bearer token (default: the CLOUDSTORE_TOKEN environment variable).")
    var tokenFile: String?

    @Option(help: "This device's identifier; by default the one the store keeps.")
    var device: String?

    @Option(
        name: .customLong("public-entity"),
        help: ArgumentHelp(
            "An entity mirrored in the public database (repeat for several); by default the ones the store keeps.",
            valueName: "entity"))
    var publicEntities: [String] = []

    @Option(help: ArgumentHelp(
        "A file holding the user's encryption passphrase, for a schema with encrypted attributes: the first device creates the user's key with it, later ones unlock it. Needed until this store's device holds the key.",
        valueName: "file"))
    var passphraseFile: String?

    @Option(help: "Seconds to keep trying before giving up.")
    var timeout: Double = 300

    @Option(help: ArgumentHelp(
        "If syncing waits for a decision about the local data (the zone was deleted on the server, or the token is another user's): uploadAgain, keepLocalOnly or deleteLocalData.",
        valueName: "choice"))
    var decide: String?

    @Flag(help: "Print the summary as JSON.")
    var json = false

    @OptionGroup public var global: GlobalOptions

    public init() {}

    /// Gives the device the user's encryption key when the schema has encrypted attributes: from
    /// the passphrase file, unless the device holds the key already.
    private func setUpEncryption(of cloud: PersistentCloudContainer) async throws {
        let encryption = try await cloud.encryptionStatus()
        guard encryption.isUsed else { return }
        guard let passphraseFile else {
            if encryption.hasKey { return }
            throw CommandError(
                "\(store)'s schema has encrypted attributes and this device does not hold the user's key: run again with --passphrase-file <file holding the passphrase>")
        }
        let text: String
        do {
            text = try String(contentsOfFile: passphraseFile, encoding: .utf8)
        } catch {
            throw CommandError("--passphrase-file \(passphraseFile) cannot be read (\(error.localizedDescription)): give a readable file holding the passphrase")
        }
        try await cloud.setUpEncryption(passphrase: text.trimmingCharacters(in: .newlines))
    }

    public func run(in context: CommandContext) async throws {
        let url = try StoreFile.existing(store)
        let info = try StoreFile.info(store)
        let schema = try schema.map(SchemaFile.load) ?? StoreFile.storedSchema(of: info, at: store)
        guard let serverURL = URL(string: server), serverURL.scheme == "http" || serverURL.scheme == "https", serverURL.host != nil
        else {
            throw CommandError("--server \(server) is not a server URL: give its base URL, e.g. http://127.0.0.1:8080")
        }
        guard timeout > 0, timeout.isFinite else {
            throw CommandError("--timeout \(timeout) is not a number of seconds above 0")
        }
        let choice = try decide.map { value in
            guard let choice = PersistentCloudContainer.LocalDataChoice(rawValue: value) else {
                throw CommandError("--decide \(value) is not a choice: give uploadAgain, keepLocalOnly or deleteLocalData")
            }
            return choice
        }
        var options = PersistentCloudContainer.Options(
            server: .init(url: serverURL, containerIdentifier: container, token: try token(context), deviceID: device))
        options.automaticallySync = false
        options.publicEntities = publicEntities.isEmpty ? try PersistentCloudContainer.publicEntities(at: url) : Set(publicEntities)
        // What went wrong reaches the user once, as this command's error; the container's own
        // error lines add nothing at the default level (--debug 1 and up shows everything).
        var logger = context.logger("mirroring")
        if context.debugLevel == .errors { logger.logLevel = .critical }
        let cloud = try await PersistentCloudContainer(url: url, schema: schema, options: options, logger: logger)
        // Subscribed before anything runs, so no export or import goes uncounted.
        let events = cloud.events()
        let progress = Task { await Self.showProgress(of: events, output: context.output) }
        let outcome: Result<Void, any Error>
        do {
            try await setUpEncryption(of: cloud)
            // Each decision the sync meets (the zone, then every share that ended) gets the choice,
            // once: one asked again was not settled by it, and ends the command.
            var answered: Set<ZoneID> = []
            while true {
                do {
                    try await cloud.waitUntilSynced(timeout: .milliseconds(Int64(timeout * 1000)))
                    break
                } catch let error as ContainerError where error.code == .localDataDecisionNeeded {
                    let decision = error.localDataDecision!
                    guard let choice else {
                        throw CommandError(
                            "\(decision): run again with --decide uploadAgain, keepLocalOnly or deleteLocalData to say what happens to this device's data")
                    }
                    guard answered.insert(decision.zoneID).inserted else { throw error }
                    context.output.printError("\(decision): \(choice.rawValue)")
                    try await cloud.decide(choice, zoneID: decision.zoneID)
                }
            }
            outcome = .success(())
        } catch {
            outcome = .failure(error)
        }
        let status = try await cloud.status()
        try await cloud.close()
        let totals = await progress.value
        if case .failure(let error) = outcome {
            throw CommandError("\(store) did not finish syncing: \(error)")
        }
        let summary = SyncSummary(
            store: store, uploaded: totals.uploaded, fetched: totals.fetched, conflictsLogged: status.conflictCount,
            pendingUploads: status.pendingUploads)
        if json {
            try context.output.printJSON(summary)
        } else {
            context.output.print(
                "synced \(store): \(summary.uploaded) uploaded, \(summary.fetched) fetched, \(summary.conflictsLogged) conflicts logged, "
                    + (summary.pendingUploads == 0 ? "nothing pending" : "\(summary.pendingUploads) pending"))
        }
    }

    private func token(_ context: CommandContext) throws -> String {
        let text: String
        if let tokenFile {
            let file = try InputFile.existing(tokenFile, missing: "no token file at \(tokenFile): check the path", kind: "a file holding the bearer token")
            text = try String(contentsOf: file, encoding: .utf8)
        } else if let variable = context.environment["CLOUDSTORE_TOKEN"] {
            text = variable
        } else {
            throw CommandError("no token: give the user's bearer token with --token-file FILE or CLOUDSTORE_TOKEN")
        }
        let token = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !token.isEmpty else {
            throw CommandError("the token \(tokenFile.map { "in \($0) " } ?? "in CLOUDSTORE_TOKEN ")is empty: put the user's bearer token there")
        }
        return token
    }

    struct Totals {
        var uploaded = 0
        var fetched = 0
    }

    /// One progress line per export and import, as their events come, until the container closes.
    static func showProgress(of events: AsyncStream<PersistentCloudContainer.Event>, output: CommandOutput) async -> Totals {
        var totals = Totals()
        var reporters: [UUID: ProgressReporter] = [:]
        for await event in events where event.kind != .setup {
            switch event.phase {
            case .started:
                reporters[event.id] = ProgressReporter(
                    event.kind == .export ? "uploading" : "downloading", total: event.total, output: output)
            case .progress:
                reporters[event.id]?.update(completed: event.completed)
            case .ended:
                guard let reporter = reporters.removeValue(forKey: event.id) else { continue }
                if event.completed > 0 {
                    reporter.update(completed: event.completed)
                    reporter.finish()
                }
                if event.kind == .export { totals.uploaded += event.completed } else { totals.fetched += event.completed }
            }
        }
        return totals
    }
}

/// What `cloudstore sync --json` prints.
struct SyncSummary: Encodable {
    var store: String
    var uploaded: Int
    var fetched: Int
    var conflictsLogged: Int
    var pendingUploads: Int
}
