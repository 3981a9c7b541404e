import ArgumentParser
import CloudStore
import Foundation

/// `cloudstore status --store PATH [--schema FILE] [--failed] [--json]`: where a store's
/// mirroring stands, read from the store file (no server needed); with `--failed`, the objects
/// whose upload the server refused or did not take yet, with why.
///
/// ```sh
/// $ cloudstore status --store notes.sqlite
/// store                    notes.sqlite (schema "Notes" version 2)
/// mirroring                yes, user _alice
/// pending uploads          1
/// refused uploads          1
/// retrying uploads         1
/// …
/// $ cloudstore status --store notes.sqlite --failed
/// ENTITY  OBJECT      ZONE   PENDING       STATE     ERROR           ATTEMPTS  NEXT ATTEMPT              REASON
/// Note    6F1C0A52-…  Notes  whole object  refused   LIMIT_EXCEEDED  -         after a change            record 6F1C0A52-… has 1500124 bytes of fields; the limit is 1048576: make it smaller
/// Note    9B7E33D0-…  Notes  title         retrying  THROTTLED       2         2026-06-01T08:00:30.000Z  slow down
/// ```
public struct StatusCommand: CloudStoreSubcommand {
    public static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show where a store's sync stands, from the store file alone.",
        discussion: """
            Reads the store file (no server needed): the user its mirrored data belongs to, \
            records waiting to be uploaded and uploads the server refused, the server \
            token fetched up to, the last import and export, the last error and how many values \
            the conflict log holds. Retrying uploads are pending uploads the server did not take \
            at their last attempt (throttled, say); they go again by themselves. \
            \(StoreFile.inspectionPromise)

            A store written by the previous CloudStore release keeps its unsent changes in the \
            old mirroring layout, which this release counts as pending uploads only after moving \
            them to its own: status refuses it (exit status 1) and names the command that does \
            the move, cloudstore migrate, which the app does too when it first opens the store. \
            cloudstore history and conflicts read such a store as it is.

            --failed lists every object whose upload failed, with the server's error code and \
            reason. State refused: the server refused it for good (too large, say), and it is \
            not sent again until the app changes the object. State retrying: the server did not \
            take it at its last attempt with an error that may pass (THROTTLED, TRY_AGAIN_LATER, \
            INTERNAL_ERROR, QUOTA_EXCEEDED); it goes again by itself, after the time the server \
            asked for (NEXT ATTEMPT) or with the next sync, and ATTEMPTS counts the attempts \
            that failed so far.

            Example:
              cloudstore status --store notes.sqlite
              cloudstore status --store notes.sqlite --schema Schema/Notes.json --json
              cloudstore status --store notes.sqlite --failed
            """)

    @Option(help: "The store file (SQLite).")
    var store: String

    @Option(help: "The schema file to open the store with; by default the schema the store keeps.")
    var schema: String?

    @Flag(help: "List the objects whose upload the server refused or did not take yet, with why, instead of the summary.")
    var failed = false

    @Option(help: "With --failed: the zone the store mirrors to, if the app names one (by default the schema's name).")
    var zone: String?

    @Flag(help: "Print JSON instead of text.")
    var json = false

    @OptionGroup public var global: GlobalOptions

    public init() {}

    public func run(in context: CommandContext) async throws {
        let opened = try StoreFile.inspect(store, schemaPath: schema, logger: context.logger("store"))
        defer { try? opened.close() }
        let status: PersistentCloudContainer.SyncStatus
        do {
            status = try PersistentCloudContainer.status(of: opened)
        } catch StoreError.Code.needsUpgrade {
            guard try PersistentCloudContainer.holdsLegacyMirrorLayout(at: opened.url) else {
                throw CommandError(
                    "\(store) holds mirroring metadata of an earlier CloudStore version, without columns this version reads: open it with the app once (its container adds them, keeping everything), then status again")
            }
            throw CommandError(
                "\(store) holds mirroring metadata written by the previous CloudStore release, whose unsent changes are counted only once moved to this release's layout: run cloudstore migrate --store \(store) --schema \(schema ?? "<its schema file>") (or open it with the app once), then status again")
        }
        if failed {
            try printFailed(try PersistentCloudContainer.failedUploads(in: opened, primaryZone: zone.map { ZoneID(zoneName: $0) }), in: context)
            return
        }
        let keyStore = FileEncryptionKeyStore(besideStoreAt: opened.url)
        let encryption = try PersistentCloudContainer.encryptionStatus(of: opened, keyStore: keyStore)
        var report = StatusJSON(store: store, schema: opened.schema, status: status)
        if encryption.isUsed {
            report.encryption = .init(
                keyFile: keyStore.url.path, hasKey: encryption.hasKey, recordsAwaitingKey: encryption.recordsAwaitingKey,
                refusedRecords: encryption.refusedRecords,
                sharedZones: encryption.sharedZoneKeys.map {
                    .init(zone: Self.zoneName($0.zoneID), keyID: $0.keyID, generation: $0.generation, grantedTo: $0.grantedTo, held: $0.isHeld)
                },
                waiting: encryption.waitingRecords.map {
                    .init(record: $0.recordName, zone: Self.zoneName($0.zoneID), refused: $0.isRefused, problem: $0.problem)
                })
        }
        if json {
            try context.output.printJSON(report)
            return
        }
        let never = "never"
        var table = TextTable([
            ["store", "\(store) (schema \"\(report.schemaName)\" version \(report.schemaVersion))"],
            ["mirroring", status.isMirroring ? "yes" + (status.user.map { ", user \($0)" } ?? "") : "no (never synced)"],
            ["signed out", status.isSignedOut ? "yes: the server refused the credentials" : "no"],
            ["pending uploads", String(status.pendingUploads)],
            ["refused uploads", String(status.refusedUploads)],
            ["retrying uploads", String(status.retryingUploads)],
            ["server token", status.serverChangeToken ?? "none"],
            ["last import", status.lastImport.map(CommandOutput.timestamp) ?? never],
            ["last export", status.lastExport.map(CommandOutput.timestamp) ?? never],
            ["last error", status.lastError.map { "\($0.message) (\(CommandOutput.timestamp($0.date)))" } ?? "none"],
            ["conflicts logged", String(status.conflictCount)],
        ])
        if let decision = status.localDataDecision {
            table.append(["decision needed", "\(decision) (the app decides; syncing waits)"])
        }
        for ended in status.endedShares {
            table.append(["decision needed", "\(ended) (the app decides; its changes wait, the rest syncs)"])
        }
        if let encryption = report.encryption {
            table.append([
                "encryption key",
                encryption.hasKey
                    ? "on this device (\(encryption.keyFile))"
                    : "not on this device: the app sets up encryption with the passphrase (an app keychain is not read here)",
            ])
            table.append(["awaiting key", "\(encryption.recordsAwaitingKey) fetched records (applied once the key is here)"])
            table.append(["refused records", "\(encryption.refusedRecords) (an encrypted field did not open: altered on the server)"])
            for zone in encryption.sharedZones {
                table.append([
                    "shared zone key",
                    "\(zone.zone): key \(zone.keyID) (generation \(zone.generation)), "
                        + (zone.held ? "held here" : "not held here") + ", granted to "
                        + (zone.grantedTo.isEmpty ? "no participant" : zone.grantedTo.joined(separator: ", ")),
                ])
            }
            for waiting in encryption.waiting.prefix(10) {
                table.append([waiting.refused ? "refused" : "waiting", "\(waiting.record) in \(waiting.zone): \(waiting.problem)"])
            }
            if encryption.waiting.count > 10 {
                table.append(["", "… \(encryption.waiting.count - 10) more (status --json lists them all)"])
            }
        }
        context.output.print(table)
    }
}

extension StatusCommand {
    /// A zone as the CLI names it: `name`, or `name (owner)` for a zone another user owns.
    static func zoneName(_ zoneID: ZoneID) -> String {
        zoneID.ownerRecordName.map { "\(zoneID.zoneName) (\($0))" } ?? zoneID.zoneName
    }

    private func printFailed(_ failed: [PersistentCloudContainer.ObjectSyncState], in context: CommandContext) throws {
        if json {
            try context.output.printJSON(failed.map(FailedUploadJSON.init))
            return
        }
        guard !failed.isEmpty else {
            context.output.print("no failed uploads")
            return
        }
        var table = TextTable([["ENTITY", "OBJECT", "ZONE", "PENDING", "STATE", "ERROR", "ATTEMPTS", "NEXT ATTEMPT", "REASON"]])
        for state in failed {
            let error = state.refusal ?? state.retry?.error
            table.append([
                state.entityName, state.id.uuidString, Self.zone(state.sharing), state.pendingUpload.map(Self.text) ?? "nothing",
                state.refusal == nil ? "retrying" : "refused", error?.code.rawValue ?? "",
                state.refusal == nil ? state.retry.map { String($0.attempts) } ?? "" : "-", Self.nextAttempt(state),
                error?.reason ?? "",
            ])
        }
        context.output.print(table)
    }

    /// When a failed upload goes again: after the app changes the object (refused), at the time
    /// the server asked for, or with the next sync.
    static func nextAttempt(_ state: PersistentCloudContainer.ObjectSyncState) -> String {
        guard state.refusal == nil else { return "after a change" }
        return state.retry?.nextAttempt.map(CommandOutput.timestamp) ?? "next sync"
    }

    static func zone(_ sharing: PersistentCloudContainer.ObjectSharing) -> String {
        sharing.owner.map { "\(sharing.zoneID.zoneName) (owner \($0))" } ?? sharing.zoneID.zoneName
    }

    static func text(_ upload: PersistentCloudContainer.ObjectSyncState.Upload) -> String {
        switch upload {
        case .save(_, wholeObject: true): "whole object"
        case .save(let keys, wholeObject: false): keys.sorted().joined(separator: ",")
        case .delete: "delete"
        }
    }
}

/// An object whose upload failed, as `status --failed --json` prints it: `state` is `refused` or
/// `retrying`, and a retrying one has its `attempts` and `nextAttempt` (none: the next sync).
private struct FailedUploadJSON: Encodable {
    var entity: String
    var id: UUID
    var zone: String
    var zoneOwner: String?
    var changeTag: String?
    var pending: String?
    var pendingKeys: [String]?
    var state: String
    var code: String?
    var reason: String?
    var attempts: Int?
    var nextAttempt: Date?

    init(_ state: PersistentCloudContainer.ObjectSyncState) {
        entity = state.entityName
        id = state.id
        zone = state.sharing.zoneID.zoneName
        zoneOwner = state.sharing.owner
        changeTag = state.changeTag
        switch state.pendingUpload {
        case .save(let keys, let whole)?:
            pending = whole ? "save" : "update"
            pendingKeys = whole ? nil : keys.sorted()
        case .delete?:
            pending = "delete"
        case nil:
            pending = nil
        }
        let error = state.refusal ?? state.retry?.error
        self.state = state.refusal == nil ? "retrying" : "refused"
        code = error?.code.rawValue
        reason = error?.reason
        if state.refusal == nil {
            attempts = state.retry?.attempts
            nextAttempt = state.retry?.nextAttempt
        }
    }
}

/// The status as `status --json` prints it.
private struct StatusJSON: Encodable {
    struct Failure: Encodable {
        var code: String?
        var message: String
        var date: Date
    }

    var store: String
    var schemaName: String
    var schemaVersion: Int
    var isMirroring: Bool
    var user: String?
    var isSignedOut: Bool
    var pendingUploads: Int
    var refusedUploads: Int
    var retryingUploads: Int
    var serverChangeToken: String?
    var lastImport: Date?
    var lastExport: Date?
    var lastError: Failure?
    var conflictCount: Int
    var localDataDecision: String?
    var endedShares: [String]
    /// With encrypted attributes: where the key is and what waits.
    var encryption: Encryption?

    struct Encryption: Encodable {
        var keyFile: String
        var hasKey: Bool
        var recordsAwaitingKey: Int
        var refusedRecords: Int
        var sharedZones: [SharedZone]
        var waiting: [Waiting]

        struct SharedZone: Encodable {
            var zone: String
            var keyID: String
            var generation: Int64
            var grantedTo: [String]
            var held: Bool
        }

        struct Waiting: Encodable {
            var record: String
            var zone: String
            var refused: Bool
            var problem: String
        }
    }

    init(store: String, schema: Schema, status: PersistentCloudContainer.SyncStatus) {
        self.store = store
        schemaName = schema.name
        schemaVersion = schema.version
        isMirroring = status.isMirroring
        user = status.user
        isSignedOut = status.isSignedOut
        pendingUploads = status.pendingUploads
        refusedUploads = status.refusedUploads
        retryingUploads = status.retryingUploads
        serverChangeToken = status.serverChangeToken
        lastImport = status.lastImport
        lastExport = status.lastExport
        lastError = status.lastError.map { Failure(code: $0.code?.rawValue, message: $0.message, date: $0.date) }
        conflictCount = status.conflictCount
        localDataDecision = status.localDataDecision?.description
        endedShares = status.endedShares.map(\.description)
    }
}
