@testable import CloudStore
import CloudStoreLogging
import CloudStoreTesting
import Foundation
import GRDB
import Logging
import Testing

/// Three devices of one user make random changes (inserts, edits, moves between folders, tags,
/// deletes, folder deletes that cascade) while a random schedule syncs them through fault-injecting
/// proxies, partitions them, kills and restarts the server (SIGKILL), and kills the third device, a
/// child process, at random moments. After healing, every device and a fresh one agree, no object
/// is duplicated, no object nobody deleted is missing, and every written value is either the final
/// one, one its writer's successor saw and replaced, or in a conflict log.
///
/// A failing seed replays with `CLOUDSTORE_CONVERGENCE_SEED=<seed>` (and the seeds after it with
/// `CLOUDSTORE_CONVERGENCE_SEEDS=<count>`); `CLOUDSTORE_SOAK=1` runs 300 from a random seed.
@Suite("Mirroring: randomised convergence of three devices under faults", .serialized)
struct MirroringRandomizedConvergenceTests {
    @Test func threeDevicesConvergeAndLoseNothing() async throws {
        let first = ReliabilityRun.seed(fixed: 1, variable: "CLOUDSTORE_CONVERGENCE_SEED")
        let replaying = ProcessInfo.processInfo.environment["CLOUDSTORE_CONVERGENCE_SEED"] != nil
        let seeds = ProcessInfo.processInfo.environment["CLOUDSTORE_CONVERGENCE_SEEDS"].flatMap(Int.init)
            ?? (replaying ? 1 : ReliabilityRun.count(ci: 24, soak: 300))
        let server = try await RestartableServer.start(
            .childProcess, users: ["alice-token": "_alice"],
            containers: Set((first..<(first + UInt64(seeds))).map(ConvergenceRun.container(seed:))))
        var report = ConvergenceReport()
        do {
            for seed in first..<(first + UInt64(seeds)) {
                var run = ConvergenceRun(seed: seed, server: server)
                TraceBuffer.shared.clear()
                do { try await run.run() } catch {
                    if ConvergenceRun.tracingInMemory { print("seed \(seed) failed; its trace: \(TraceBuffer.shared.write(seed: seed))") }
                    throw error
                }
                if ConvergenceRun.tracingInMemory, run.lost + run.duplicated > 0 {
                    print("seed \(seed) failed; its trace: \(TraceBuffer.shared.write(seed: seed))")
                }
                report.add(run)
            }
        } catch {
            try? await server.shutdown()
            throw error
        }
        try await server.shutdown()
        print("convergence: first seed \(first), \(report)")
        #expect(report.seeds == seeds)
        #expect(report.encryptedSeeds == seeds / 2 + (seeds % 2 == 1 && first % 2 == 1 ? 1 : 0), "\(report)")
        #expect(report.faults > 0 && report.crashes > 0 && report.serverRestarts > 0, "\(report)")
        if seeds >= 6 {
            #expect(report.conflictsLogged > 0, "the schedule should make devices edit the same values concurrently")
            #expect(report.uniqueKeyMerges > 0, "the schedule should make devices create the same tag name concurrently")
        }
    }
}

struct ConvergenceReport: CustomStringConvertible {
    var seeds = 0, operations = 0, syncs = 0, failedSyncs = 0, faults = 0, partitions = 0
    var crashes = 0, serverRestarts = 0, conflictsLogged = 0, uniqueKeyMerges = 0, lost = 0, duplicated = 0
    var encryptedSeeds = 0

    mutating func add(_ run: ConvergenceRun) {
        seeds += 1
        operations += run.operations
        syncs += run.syncs
        failedSyncs += run.failedSyncs
        faults += run.faults
        partitions += run.partitions
        crashes += run.crashes
        serverRestarts += run.serverRestarts
        conflictsLogged += run.conflictsLogged
        uniqueKeyMerges += run.uniqueKeyMerges
        lost += run.lost
        duplicated += run.duplicated
        encryptedSeeds += run.encryptedSeeds
    }

    var description: String {
        let c = ReportFormat.count
        return "seeds \(c(seeds)) (\(c(encryptedSeeds)) with encrypted bodies), operations \(c(operations)), syncs \(c(syncs)) (\(c(failedSyncs)) failed), "
            + "faults \(c(faults)), partitions \(c(partitions)), crashes \(c(crashes)), "
            + "server restarts \(c(serverRestarts)), conflicts logged \(c(conflictsLogged)), "
            + "unique-key merges \(c(uniqueKeyMerges)), lost \(lost), duplicated \(duplicated)"
    }
}

/// One seed's run.
struct ConvergenceRun {
    let seed: UInt64
    let server: RestartableServer
    let container: String
    var random: SeededRandomNumberGenerator
    var operations = 0, syncs = 0, failedSyncs = 0, faults = 0, partitions = 0, crashes = 0, serverRestarts = 0
    var conflictsLogged = 0, uniqueKeyMerges = 0, lost = 0, duplicated = 0, encryptedSeeds = 0

    // The ledger: what every device wrote, and what each write replaced.
    var ledger = ConvergenceLedger()
    var maybeInserted: Set<UUID> = []
    /// Deletions known to have committed (a killed child's last one may not have).
    var certainlyDeleted: Set<UUID> = []
    var maybeWritten: [PropertyKey: Set<String>] = [:]
    var counter = 0
    var childRuns = 0

    /// The Notes schema with a tag's name unique (``MirroringUniqueKeyTests``) on the in-process
    /// devices, which create tags; the child device, which does not, opens the plain one.
    static let schema: Schema = {
        var schema = try! Schema.notes()
        let tag = schema.entities.firstIndex { $0.name == "Tag" }!
        schema.entities[tag].uniquenessConstraints = [["name"]]
        return schema
    }()

    /// Odd seeds run with a note's body end-to-end encrypted (<doc:EndToEndEncryption>): A creates
    /// the key, B and D read it from the key file they share, the child from a copy beside its store.
    var encrypted: Bool { seed % 2 == 1 }

    /// ``schema`` with a note's body encrypted.
    static let encryptedSchema = withEncryptedBody(schema)

    /// The child's schema: the plain Notes one, with the body encrypted on odd seeds.
    var childSchema: Schema { encrypted ? Self.withEncryptedBody(try! Schema.notes()) : try! Schema.notes() }

    var deviceSchema: Schema { encrypted ? Self.encryptedSchema : Self.schema }

    static func withEncryptedBody(_ plain: Schema) -> Schema {
        var schema = plain
        let note = schema.entities.firstIndex { $0.name == "Note" }!
        let body = schema.entities[note].attributes.firstIndex { $0.name == "body" }!
        schema.entities[note].attributes[body].isEncrypted = true
        return schema
    }

    /// The key file the in-process devices share.
    func keyStore(in directory: TemporaryDirectory) -> FileEncryptionKeyStore {
        FileEncryptionKeyStore(url: directory.file("alice.keys"))
    }

    /// Each seed syncs in a container of its own on the one server.
    static func container(seed: UInt64) -> String { "iCloud.convergence.s\(seed)" }

    init(seed: UInt64, server: RestartableServer) {
        self.seed = seed
        self.server = server
        self.container = Self.container(seed: seed)
        self.random = SeededRandomNumberGenerator(seed: seed &* 7919 &+ 17)
    }

    mutating func run() async throws {
        let server = server
        let proxies = [
            try await FaultProxy.start(configuration: Self.proxyConfiguration) { server.baseURL },
            try await FaultProxy.start(configuration: Self.proxyConfiguration) { server.baseURL },
            try await FaultProxy.start(configuration: Self.proxyConfiguration) { server.baseURL },
        ]
        let childDirectory = try TemporaryDirectory()
        let container = container
        let (schema, keyStore) = (deviceSchema, keyStore(in: childDirectory))
        var devices: [TestDevice] = []
        do {
            for (index, name) in ["A", "B"].enumerated() {
                devices.append(
                    try await TestDevice.make(name, schema: schema, server: proxies[index].baseURL, logger: Self.logger(name)) {
                        $0.server?.containerIdentifier = container
                        $0.encryptionKeyStore = keyStore
                    })
            }
            if encrypted {
                // A creates the key; B finds it in the key file; the child gets a copy of it.
                try await devices[0].container.setUpEncryption(passphrase: "convergence \(seed)")
                try await devices[1].container.setUpEncryption(passphrase: "convergence \(seed)")
                try FileManager.default.copyItem(
                    at: keyStore.url, to: FileEncryptionKeyStore(besideStoreAt: childDirectory.file("C.sqlite")).url)
                try childSchema.fileData().write(to: childDirectory.file("schema.json"))
            }
            for (index, proxy) in proxies.enumerated() {
                proxy.setRandomFaults(seed: seed &+ UInt64(index), rate: 0.15, faults: Self.faults)
            }
            let rounds = 30 + random.next(upTo: 15)
            for _ in 0..<rounds {
                try await step(devices: devices, proxies: proxies, child: childDirectory.file("C.sqlite"))
            }
            try await heal(devices: devices, proxies: proxies, child: childDirectory.file("C.sqlite"))
            try await check(devices: devices, child: childDirectory.file("C.sqlite"))
        } catch {
            for device in devices { await device.close() }
            for proxy in proxies { await proxy.shutdown() }
            throw error
        }
        for device in devices { await device.close() }
        faults = proxies.map(\.statistics.faulted).reduce(0, +)
        for proxy in proxies { await proxy.shutdown() }
    }

    /// `CLOUDSTORE_CONVERGENCE_TRACE=1` prints each operation and sync, and the in-process devices'
    /// log at the level of `CLOUDSTORE_DEBUG`, on standard error: how a failing seed is read.
    /// `CLOUDSTORE_CONVERGENCE_TRACE=memory` keeps them in memory instead (``TraceBuffer``), to be
    /// written out for a failing seed only: a flake that printing every line hides shows up so.
    static let tracing = ProcessInfo.processInfo.environment["CLOUDSTORE_CONVERGENCE_TRACE"] != nil
    static let tracingInMemory = ProcessInfo.processInfo.environment["CLOUDSTORE_CONVERGENCE_TRACE"] == "memory"

    static func logger(_ device: String) -> Logger {
        guard tracing else { return .quiet }
        var logger = Logger(label: "device.\(device)") { label in
            tracingInMemory ? TraceBuffer.Handler(label: label) as any LogHandler : StreamLogHandler.standardError(label: label)
        }
        logger.logLevel = DebugLevel.fromEnvironment.logLevel
        return logger
    }

    static func trace(_ line: @autoclosure () -> String) {
        guard tracing else { return }
        if tracingInMemory { return TraceBuffer.shared.append("trace: \(line())") }
        FileHandle.standardError.write(Data("trace: \(line())\n".utf8))
    }

    static let faults: [FaultProxy.Fault] = [
        .dropRequest, .dropResponse, .duplicateRequest, .delay(.milliseconds(5)), .reorder, .cutResponse,
        .unavailable(retryAfter: 0), .throttle(retryAfter: 0),
    ]

    static var proxyConfiguration: FaultProxy.Configuration {
        var configuration = FaultProxy.Configuration()
        configuration.holdTimeout = .milliseconds(100)
        return configuration
    }

    // MARK: The schedule

    mutating func step(devices: [TestDevice], proxies: [FaultProxy], child: URL) async throws {
        switch random.next(upTo: 20) {
        case 0..<8:
            if random.next(upTo: 4) == 0 {
                try await createOnBoth(devices)
                return
            }
            for _ in 0..<(1 + random.next(upTo: 3)) {
                try await change(on: devices[random.next(upTo: devices.count)])
            }
        case 8..<14:
            let (synced, failed) = await ConvergenceSteps.syncSome(devices, random: &random)
            syncs += synced
            failedSyncs += failed
        case 14..<16:
            if ConvergenceSteps.togglePartition(of: proxies, random: &random) { partitions += 1 }
        case 16:
            Self.trace("server restarts")
            serverRestarts += 1
            try await server.restart()
        default:
            try await runChild(store: child, proxy: proxies[2], drain: false)
        }
    }

    /// Runs the crashing device for a few steps and usually kills it somewhere.
    mutating func runChild(store: URL, proxy: FaultProxy, drain: Bool) async throws {
        childRuns += 1
        let steps = drain ? 0 : 3 + random.next(upTo: 8)
        var kill = ChildDevice.Kill.never
        if !drain {
            switch random.next(upTo: 4) {
            case 0: kill = .never
            case 1: kill = .afterLine(1 + random.next(upTo: steps))
            default: kill = .duringSync(1, delay: .milliseconds(random.next(upTo: 30)))
            }
        }
        let schemaFile = encrypted ? store.deletingLastPathComponent().appendingPathComponent("schema.json") : RepositoryPaths.notesSchema
        let run = try await ChildDevice.run(
            store: store, schema: schemaFile, server: proxy.baseURL, container: container, steps: steps,
            seed: seed &* 1000 &+ UInt64(childRuns), drain: drain, kill: kill)
        if run.wasKilled { crashes += 1 }
        Self.trace("C ran \(steps) steps, killed: \(run.wasKilled), output: \(run.output)")
        if drain { #expect(run.output.contains("drained"), "seed \(seed): the child did not drain: \(run.output)") }
        for change in run.committed { record(change, certain: true) }
        if let change = run.inFlight { record(change, certain: false) }
        operations += run.committed.count
    }

    mutating func record(_ change: ChildDevice.Change, certain: Bool) {
        let key = PropertyKey(object: change.id, property: "title")
        switch change.kind {
        case .insert:
            if certain { ledger.inserted[change.id] = "Note" } else { maybeInserted.insert(change.id) }
            wrote(key, change.title!, replacing: nil, certain: certain)
        case .update:
            wrote(key, change.title!, replacing: change.previous, certain: certain)
        case .delete:
            Self.trace("C deletes \(change.id)\(certain ? "" : " (maybe)")")
            ledger.deleted.insert(change.id)
            if certain { certainlyDeleted.insert(change.id) }
            if let previous = change.previous { ledger.replaced[key, default: []].insert(previous) }
        case .nothing:
            break
        }
    }

    mutating func wrote(_ key: PropertyKey, _ value: String, replacing previous: String?, certain: Bool) {
        guard !certain else { return ledger.wrote(key, value, replacing: previous) }
        Self.trace("\(key) = \(value) replacing \(previous ?? "nothing") (maybe)")
        maybeWritten[key, default: []].insert(value)
        if let previous { ledger.replaced[key, default: []].insert(previous) }
    }

    mutating func unique(_ device: TestDevice) -> String {
        counter += 1
        return "\(device.name.lowercased())\(seed)-\(counter)"
    }

    /// One random local change on an in-process device; it reads what it replaces in the same
    /// transaction, so the ledger knows which values it saw.
    mutating func change(on device: TestDevice) async throws {
        operations += 1
        let store = device.store
        let notes = try await store.read { try $0.fetchIDs(entityName: "Note") }
        let folders = try await store.read { try $0.fetchIDs(entityName: "Folder") }
        let tags = try await store.read { try $0.fetchIDs(entityName: "Tag") }
        let roll = notes.isEmpty ? 0 : random.next(upTo: 100)
        switch roll {
        case 0..<25:
            let id = UUID()
            let title = unique(device)
            let folder = folders.isEmpty || random.next(upTo: 2) == 0 ? nil : folders[random.next(upTo: folders.count)]
            try await device.write { context in
                try context.insert(
                    EntitySnapshot(
                        entityName: "Note", id: id,
                        values: ["title": .string(title), "folder": folder.map(AttributeValue.uuid) ?? .null]))
            }
            ledger.inserted[id] = "Note"
            wrote(PropertyKey(object: id, property: "title"), title, replacing: nil, certain: true)
            wrote(PropertyKey(object: id, property: "folder"), folder?.uuidString ?? "-", replacing: nil, certain: true)
        case 25..<50, 50..<60:
            let id = notes[random.next(upTo: notes.count)]
            let property = roll < 50 ? "title" : "body"
            let value = unique(device)
            let previous = try await store.write(author: "app", contextName: device.name) { context -> String? in
                let old = try context.fetchSnapshot(entityName: "Note", id: id)?.values[property]
                try context.update(EntitySnapshot(entityName: "Note", id: id, values: [property: .string(value)]))
                return old.map(Self.text)
            }
            wrote(PropertyKey(object: id, property: property), value, replacing: previous, certain: true)
        case 60..<70:
            let id = notes[random.next(upTo: notes.count)]
            let folder = folders.isEmpty || random.next(upTo: 4) == 0 ? nil : folders[random.next(upTo: folders.count)]
            let previous = try await store.write(author: "app", contextName: device.name) { context -> String? in
                let old = try context.fetchSnapshot(entityName: "Note", id: id)?.values["folder"]
                try context.move(note: id, to: folder)
                return old.map(Self.text)
            }
            wrote(PropertyKey(object: id, property: "folder"), folder?.uuidString ?? "-", replacing: previous, certain: true)
        case 70..<78:
            let id = notes[random.next(upTo: notes.count)]
            let shared = random.next(upTo: 2) == 0
            if shared || tags.isEmpty || random.next(upTo: 3) == 0 {
                // Half the time the tag's name comes from a pool of two every device draws from: a
                // device without that tag creates it, so two devices create the same unique key
                // concurrently, and the sync merges them.
                let tag = UUID()
                let name = shared ? "shared\(seed)-\(random.next(upTo: 2))" : unique(device)
                let inserted = try await device.store.write(author: "app", contextName: device.name) { context -> Bool in
                    let existing = try context.fetchIDs(entityName: "Tag", where: .equals("name", name)).first
                    if existing == nil {
                        try context.insert(EntitySnapshot(entityName: "Tag", id: tag, values: ["name": .string(name)]))
                    }
                    try context.addRelated(entityName: "Note", id: id, relationship: "tags", existing ?? tag)
                    return existing == nil
                }
                if inserted {
                    ledger.inserted[tag] = "Tag"
                    wrote(PropertyKey(object: tag, property: "name"), name, replacing: nil, certain: true)
                }
            } else {
                let tag = tags[random.next(upTo: tags.count)]
                let add = random.next(upTo: 2) == 0
                try await device.write { context in
                    if add {
                        try context.addRelated(entityName: "Note", id: id, relationship: "tags", tag)
                    } else {
                        try context.removeRelated(entityName: "Note", id: id, relationship: "tags", tag)
                    }
                }
            }
        case 78..<86:
            let id = UUID()
            let title = unique(device)
            try await device.write { context in
                try context.insert(EntitySnapshot(entityName: "Folder", id: id, values: ["title": .string(title)]))
            }
            ledger.inserted[id] = "Folder"
            wrote(PropertyKey(object: id, property: "title"), title, replacing: nil, certain: true)
        case 86..<95:
            let id = notes[random.next(upTo: notes.count)]
            let previous = try await store.write(author: "app", contextName: device.name) { context in
                let old = try context.fetchSnapshot(entityName: "Note", id: id)
                try context.delete(entityName: "Note", id: id)
                return old.map { [$0] } ?? []
            }
            Self.trace("\(device.name) deletes note \(id)")
            ledger.deleted.insert(id)
            certainlyDeleted.insert(id)
            ledger.deleted(previous)
        default:
            guard !folders.isEmpty else { return }
            let id = folders[random.next(upTo: folders.count)]
            let previous = try await store.write(author: "app", contextName: device.name) { context in
                let notes = try context.relatedIDs(entityName: "Folder", id: id, relationship: "notes")
                let old = try ([(entityName: "Folder", id: id)] + notes.map { (entityName: "Note", id: $0) }).compactMap {
                    try context.fetchSnapshot(entityName: $0.entityName, id: $0.id)
                }
                try context.delete(entityName: "Folder", id: id)
                return old
            }
            Self.trace("\(device.name) deletes folder \(id) and its notes \(previous.dropFirst().map(\.id))")
            ledger.deleted.formUnion(previous.map(\.id))
            certainlyDeleted.formUnion(previous.map(\.id))
            ledger.deleted(previous)
        }
    }

    /// Both in-process devices create a tag of the same new name (its name is unique), each on
    /// one of its notes, before either syncs: the sync must end with one tag holding both links.
    mutating func createOnBoth(_ devices: [TestDevice]) async throws {
        counter += 1
        let name = "both\(seed)-\(counter)"
        for device in devices {
            operations += 1
            let tag = UUID()
            let notes = try await device.store.read { try $0.fetchIDs(entityName: "Note") }
            let note = notes.isEmpty ? nil : notes[random.next(upTo: notes.count)]
            try await device.write { context in
                try context.insert(EntitySnapshot(entityName: "Tag", id: tag, values: ["name": .string(name)]))
                if let note { try context.addRelated(entityName: "Note", id: note, relationship: "tags", tag) }
            }
            Self.trace("\(device.name) creates tag \(name) \(tag)")
            ledger.inserted[tag] = "Tag"
            wrote(PropertyKey(object: tag, property: "name"), name, replacing: nil, certain: true)
        }
    }

    static func text(_ value: AttributeValue) -> String { ConvergenceLedger.text(value) }

    // MARK: Healing and checking

    mutating func heal(devices: [TestDevice], proxies: [FaultProxy], child: URL) async throws {
        for proxy in proxies {
            proxy.removeFaults()
            proxy.isPartitioned = false
        }
        if !server.isRunning { try await server.restart() }
        // Two passes: what the child uploads last reaches the others in the second.
        for _ in 0..<2 {
            for device in devices { try await device.container.waitUntilSynced(timeout: .seconds(60)) }
            try await runChild(store: child, proxy: proxies[2], drain: true)
        }
        for device in devices { try await device.container.waitUntilSynced(timeout: .seconds(60)) }
    }

    mutating func check(devices: [TestDevice], child: URL) async throws {
        let container = container
        let keyStore = FileEncryptionKeyStore(url: child.deletingLastPathComponent().appendingPathComponent("alice.keys"))
        let fresh = try await TestDevice.make("D", schema: deviceSchema, server: server.baseURL) {
            $0.server?.containerIdentifier = container
            $0.encryptionKeyStore = keyStore
        }
        let childStore: PersistentStore
        do {
            try await fresh.sync()
            childStore = try PersistentStore(url: child, schema: childSchema, logger: .quiet)
        } catch {
            await fresh.close()
            throw error
        }
        defer { try? childStore.close() }
        if encrypted {
            let status = try await fresh.container.encryptionStatus()
            #expect(status.hasKey && status.recordsAwaitingKey == 0 && status.refusedRecords == 0, "seed \(seed): \(status)")
            encryptedSeeds += 1
        }
        try await compare(devices: devices, fresh: fresh, childStore: childStore)
        await fresh.close()
    }

    mutating func compare(devices: [TestDevice], fresh: TestDevice, childStore: PersistentStore) async throws {
        // Every device agrees with a fresh one, which has what the server has.
        let final = try fresh.contents()
        for device in devices {
            #expect(try device.contents() == final, "seed \(seed): \(device.name) differs from the server")
        }
        #expect(try childStore.mirroredContents() == final, "seed \(seed): C differs from the server")

        // Nothing duplicated: every title was written once, so no two objects carry the same one.
        duplicated = ConvergenceLedger.duplicates(in: final)
        #expect(duplicated == 0, "seed \(seed): duplicated objects")

        // Nothing lost: an object nobody deleted exists, or was merged into one that does, which
        // had its unique key (the conflict log says so).
        let logs = try devices.map { try $0.container.conflicts() }
            + [try PersistentCloudContainer.conflicts(in: childStore)]
        let present = Dictionary(uniqueKeysWithValues: final.map { ($0.id, $0) })
        let mergedInto = ConvergenceLedger.uniqueKeyMerges(logs.joined())
        uniqueKeyMerges = mergedInto.count
        let missing = ledger.missing(from: present).filter { id in mergedInto[id].map { present[$0] == nil } ?? true }
        #expect(missing.isEmpty, "seed \(seed): objects nobody deleted are gone: \(missing)")

        // Every value written to an object that still exists is its final value, was replaced by a
        // writer who saw it, or is in a conflict log as the losing value.
        let logged = ConvergenceLedger.losingValues(logs.joined())
        conflictsLogged = logs.map(\.count).reduce(0, +)
        var unexplained = ledger.unexplainedValues(in: present, logged: logged)
        // A deletion that another device's concurrent edit undid is in a conflict log (as `*`).
        for id in certainlyDeleted where present[id] != nil && logged[PropertyKey(object: id, property: "*")] == nil {
            unexplained.append("\(id) deleted, back without a conflict-log entry")
        }
        lost = missing.count + unexplained.count
        #expect(unexplained.isEmpty, "seed \(seed): overwritten values missing from the conflict log: \(unexplained)")
        let integrity = try await childStore.read { try String.fetchAll($0.db, sql: "PRAGMA integrity_check") }
        #expect(integrity == ["ok"], "seed \(seed)")
    }
}
