@testable import CloudStore
import CloudStoreSync
import CloudStoreTesting
import CloudStoreWire
import AsyncHTTPClient
import Foundation
import protocol GRDB.FetchableRecord
import Testing

/// A journal entry whose text, mood and photo the server never reads.
@Model
struct JournalEntry: Equatable {
    var id = UUID()
    var day = ""
    @Attribute(.encrypted) var text: String?
    @Attribute(.encrypted) var mood: Int = 0
    @Attribute(.encrypted) var written: Date?
    @Attribute(.encrypted) var photo: Data?
    @Attribute(.encrypted, .externalStorage) var scan: Data?
}

/// End-to-end encrypted attributes through a real `cloudstore serve` child (SQLite, or two on one
/// PostgreSQL): the first device creates the account key, the next unlocks it with the passphrase,
/// the server keeps ciphertext only, and what an operator alters is refused, never applied.
@Suite("Mirroring: end-to-end encryption", .timeLimit(.minutes(ReliabilityRun.hangLimitMinutes)))
struct MirroringEncryptionTests {
    static let users = ["alice-token": "_alice", "bob-token": "_bob"]
    static let passphrase = "correct horse battery staple"

    static func schema() -> Schema {
        Schema(name: "Journal", version: 1, entities: [JournalEntry.entityDescription])
    }

    static func device(_ name: String, server: URL, token: String = "alice-token") async throws -> TestDevice {
        try await TestDevice.make(name, schema: schema(), server: server, token: token)
    }

    static func entries(_ device: TestDevice) throws -> [JournalEntry] {
        try device.store.read { try $0.fetch(JournalEntry.self, sortBy: [.ascending("day")]) }
    }

    /// Random values no log line or page would hold by chance.
    static func secret() -> String { "secret-" + UUID().uuidString + "-" + String(UInt64.random(in: 0...UInt64.max), radix: 36) }

    static func makeEntries(_ count: Int) -> [JournalEntry] {
        (0..<count).map { index in
            JournalEntry(
                day: String(format: "day %04d", index), text: secret(), mood: Int.random(in: 1_000_000_000_000_000...9_000_000_000_000_000_000),
                written: Date(timeIntervalSince1970: 1_800_000_000 + Double(index)), photo: Data(secret().utf8))
        }
    }

    /// Alice's first device saves entries before encryption is set up (they wait), sets it up
    /// (they go up sealed); her second device fetches them before it has the key (they wait),
    /// refuses a wrong passphrase without losing them, then reads them with the right one; an
    /// edit travels back.
    func twoDevices(first: URL, second: URL, count: Int) async throws -> [JournalEntry] {
        let phone = try await Self.device("phone", server: first)
        let laptop = try await Self.device("laptop", server: second)
        defer { Task { await phone.close(); await laptop.close() } }
        let entries = Self.makeEntries(count)
        try await phone.write { [entries] context in for entry in entries { try context.insert(entry) } }
        try await phone.sync()
        #expect(try await phone.container.status().pendingUploads == count, "without a key nothing encrypted goes up")
        await #expect(performing: { try await phone.container.waitUntilSynced(timeout: .seconds(30)) }, throws: {
            ($0 as? ContainerError)?.code == .encryptionKeyNeeded && "\($0)".contains("setUpEncryption")
        })
        #expect(try await phone.container.encryptionStatus().hasKey == false)

        try await phone.container.setUpEncryption(passphrase: Self.passphrase)
        try await phone.sync()
        #expect(try await phone.container.status().pendingUploads == 0)
        #expect(try await phone.container.status().lastError == nil, "every acknowledgement of a sealed record was handled")

        try await laptop.sync()
        var status = try await laptop.container.encryptionStatus()
        #expect(status.recordsAwaitingKey == count, "records wait for the key, never dropped")
        #expect(try Self.entries(laptop).isEmpty)

        await #expect(performing: { try await laptop.container.setUpEncryption(passphrase: "wrong horse") }, throws: {
            ($0 as? ContainerError)?.code == .wrongPassphrase
        })
        status = try await laptop.container.encryptionStatus()
        #expect(status.recordsAwaitingKey == count, "a wrong passphrase changes nothing")
        #expect(!status.hasKey)

        try await laptop.container.setUpEncryption(passphrase: Self.passphrase)
        #expect(try Self.entries(laptop) == entries, "the second device reads every encrypted value")
        #expect(try await laptop.container.encryptionStatus().recordsAwaitingKey == 0)

        var edited = entries[0]
        edited.text = Self.secret()
        edited.mood = 7_654_321_012_345_678
        try await laptop.write { [edited] context in try context.update(edited) }
        try await laptop.sync()
        try await phone.sync()
        #expect(try Self.entries(phone).first == edited)
        return Array(entries.dropFirst()) + [edited]
    }

    @Test func secondDeviceJoinsWithThePassphrase_andTheServerKeepsNoPlaintext() async throws {
        let data = try TemporaryDirectory(prefix: "cloudstore-e2e")
        let operatorToken = "operator-\(UUID().uuidString)"
        try Data(operatorToken.utf8).write(to: data.file("operator-token"))
        let server = try await ServerProcess.launch(
            users: Self.users, data: data.file("data"), arguments: ["--debug", "4", "--console", "--operator-token-file", data.file("operator-token").path])
        let entries: [JournalEntry]
        var haystacks: [Data] = []
        do {
            entries = try await twoDevices(first: server.baseURL, second: server.baseURL, count: 1_000)
            // The console's pages as the operator sees them: the zone's, and every fiftieth record's
            // (each page is one request to a server logging at level 4).
            let sample = entries.enumerated().filter { $0.offset % 50 == 0 }.map(\.element.id.uuidString)
            haystacks += try await Self.consolePages(server.baseURL, token: operatorToken, records: sample)
        } catch {
            _ = await server.terminate()
            throw error
        }
        _ = await server.terminate()
        // Every file of the data directory and the server's level-4 log: no value's bytes.
        haystacks.append(Data(server.output.utf8))
        let pages = haystacks.count - 1
        let files = FileManager.default.enumerator(at: data.file("data"), includingPropertiesForKeys: nil)
        var databases = 0
        while let file = files?.nextObject() as? URL {
            if let bytes = try? Data(contentsOf: file) { haystacks.append(bytes) }
            if file.pathExtension == "sqlite" { databases += 1 }
        }
        // The zone's page and every fiftieth record's; the server's database (its -wal and -shm
        // files are there or not, as the shutdown's checkpoint left them).
        #expect(pages == 21 && databases >= 1, "the scan read the console's pages (\(pages)) and the server's database (\(databases))")
        #expect(Self.plaintextHits(of: entries, in: haystacks).isEmpty, "plaintext on the server: \(Self.plaintextHits(of: entries, in: haystacks).prefix(3))")
    }

    /// `pg_dump` of the tables of `schema` in the database at `url`, as SQL text.
    static func postgresDump(_ url: String, schema: String) async throws -> Data {
        let bin = try #require(
            (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql"))?.sorted().last.map { "/usr/lib/postgresql/\($0)/bin/pg_dump" },
            "pg_dump is installed with PostgreSQL")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: bin)
        process.arguments = ["--data-only", "--schema", schema, "--dbname", url]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        // Read on a thread of its own: a test blocks no thread of the cooperative pool.
        let dump = await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: output.fileHandleForReading.readDataToEndOfFile()) }
        }
        #expect(dump.count > 0, "pg_dump wrote nothing")
        return dump
    }

    /// Each entry's encrypted values found in `haystacks`.
    static func plaintextHits(of entries: [JournalEntry], in haystacks: [Data]) -> [String] {
        var hits: [String] = []
        for entry in entries {
            for needle in [entry.text!, String(decoding: entry.photo!, as: UTF8.self), String(entry.mood)] {
                if haystacks.contains(where: { $0.range(of: Data(needle.utf8)) != nil }) { hits.append(needle) }
            }
        }
        return hits
    }

    /// The console's zone page and each record's page, with the operator's token.
    static func consolePages(_ server: URL, token: String, records: [String]) async throws -> [Data] {
        let query = "container=\(TestDevice.containerIdentifier)&environment=development&scope=private&owner=_alice&zone=Journal"
        var pages: [Data] = []
        for path in ["/console/zone?\(query)"] + records.map({ "/console/record?\(query)&record=\($0)" }) {
            var request = HTTPClientRequest(url: server.absoluteString + path)
            request.headers.add(name: "Authorization", value: "Bearer \(token)")
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
            let body = Data(buffer: try await response.body.collect(upTo: 16 << 20))
            #expect(response.status.code == 200, "\(path): \(String(decoding: body.prefix(300), as: UTF8.self))")
            pages.append(body)
        }
        #expect(pages.contains { String(decoding: $0, as: UTF8.self).contains("ENCRYPTED_BYTES") }, "the record pages show the fields")
        return pages
    }

    @Test(.enabled(if: ServerProcess.testPostgresURL != nil || ProcessInfo.processInfo.environment["CI"] != nil))
    func secondDeviceJoinsWithThePassphrase_onPostgreSQL() async throws {
        try await ServerProcess.withTwoOnPostgres(users: Self.users) { first, second, schema in
            let entries = try await twoDevices(first: first, second: second, count: 200)
            // A dump of every table the servers wrote: no value's bytes.
            let dump = try await Self.postgresDump(try #require(ServerProcess.testPostgresURL), schema: schema)
            #expect(dump.count > 10_000, "the dump holds the records")
            #expect(Self.plaintextHits(of: entries, in: [dump]).isEmpty, "plaintext in PostgreSQL")
        }
    }

    /// The passphrase changes: a wrong current one changes nothing; after the change the old one
    /// no longer lets a new device join, the new one does, and the device that holds the key goes on.
    @Test func changingThePassphrase_keepsTheKey_andOnlyTheNewOneJoins() async throws {
        try await ServerProcess.with(users: Self.users) { server in
            let phone = try await Self.device("phone", server: server.baseURL)
            let laptop = try await Self.device("laptop", server: server.baseURL)
            defer { Task { await phone.close(); await laptop.close() } }
            try await phone.container.setUpEncryption(passphrase: Self.passphrase)
            await #expect(performing: {
                try await phone.container.changeEncryptionPassphrase(from: "wrong horse", to: "new horse")
            }, throws: { ($0 as? ContainerError)?.code == .wrongPassphrase })
            try await phone.container.changeEncryptionPassphrase(from: Self.passphrase, to: "new horse")

            let entries = Self.makeEntries(3)
            try await phone.write { [entries] context in for entry in entries { try context.insert(entry) } }
            try await phone.sync()
            #expect(try await phone.container.status().pendingUploads == 0, "the device that holds the key goes on")
            await #expect(performing: { try await laptop.container.setUpEncryption(passphrase: Self.passphrase) }, throws: {
                ($0 as? ContainerError)?.code == .wrongPassphrase
            })
            try await laptop.container.setUpEncryption(passphrase: "new horse")
            try await laptop.sync()
            #expect(try Self.entries(laptop) == entries, "the same key: what the phone sealed opens")
        }
    }

    /// What an operator can do to the stored records, done through the wire: swap two records'
    /// ciphertexts, swap two fields of one record, flip a byte, cut a value short (a plain value
    /// the server itself refuses: the field's type is `ENCRYPTED_BYTES`). Each altered
    /// record is refused with an event naming it and its field; the device keeps what it had, and
    /// the rest syncs.
    @Test func alteredCiphertexts_areRefused_andNothingWrongIsApplied() async throws {
        try await ServerProcess.with(users: Self.users) { server in
            let phone = try await Self.device("phone", server: server.baseURL)
            let laptop = try await Self.device("laptop", server: server.baseURL)
            defer { Task { await phone.close(); await laptop.close() } }
            try await phone.container.setUpEncryption(passphrase: Self.passphrase)
            try await laptop.container.setUpEncryption(passphrase: Self.passphrase)
            let entries = Self.makeEntries(6)
            try await phone.write { [entries] context in for entry in entries { try context.insert(entry) } }
            try await phone.sync()
            try await laptop.sync()
            #expect(try Self.entries(laptop) == entries)

            let operatorView = HTTPCloudDatabase(
                baseURL: server.baseURL, container: TestDevice.containerIdentifier, token: "alice-token", deviceID: "operator")
            let zone = ZoneID(zoneName: "Journal")
            let looked = try await operatorView.lookupRecords(
                RecordsLookupRequest(zoneID: zone, recordNames: entries.prefix(5).map(\.id.uuidString)))
            var records = looked.records.compactMap(\.value)
            #expect(records.count == 5)
            // Records 0 and 1 trade their text; record 2's text and photo trade places; a byte of
            // record 3's mood flips; record 4's text is cut short.
            (records[0].fields["text"], records[1].fields["text"]) = (records[1].fields["text"], records[0].fields["text"])
            (records[2].fields["text"], records[2].fields["photo"]) = (records[2].fields["photo"], records[2].fields["text"])
            guard case .encryptedBytes(var flipped)? = records[3].fields["mood"] else {
                Issue.record("the server holds mood as \(String(describing: records[3].fields["mood"]))")
                return
            }
            flipped[flipped.count - 1] ^= 0x01
            records[3].fields["mood"] = .encryptedBytes(flipped)
            if case .encryptedBytes(let sealed)? = records[4].fields["text"] {
                records[4].fields["text"] = .encryptedBytes(sealed.prefix(20))
            }
            let altered = try await operatorView.modifyRecords(
                RecordsModifyRequest(zoneID: zone, operations: records.map { .init(.forceUpdate, $0) }))
            #expect(altered.records.compactMap(\.error).isEmpty, "the operator's writes: \(altered.records.compactMap(\.error))")

            var changed = entries[5]
            changed.text = "still syncs"
            try await phone.write { [changed] context in try context.update(changed) }
            try await phone.sync()

            let events = laptop.container.events()
            try await laptop.sync()
            let after = try Self.entries(laptop)
            let refusedCount = try await laptop.container.encryptionStatus().refusedRecords
            // Closing finishes the stream: the events the sync sent are all in it.
            await laptop.close()
            var refused: [PersistentCloudContainer.DecryptionRefusal] = []
            for await event in events where event.kind == .decryptionRefused { refused += event.decryptionRefusals }
            #expect(Set(refused.map(\.recordName)) == Set(entries.prefix(5).map(\.id.uuidString)))
            #expect(refused.first { $0.recordName == entries[3].id.uuidString }?.field == "mood")
            #expect(Array(after.prefix(5)) == Array(entries.prefix(5)), "nothing altered was applied")
            #expect(after.last == changed, "the rest synced")
            #expect(refusedCount == 5)
        }
    }

    /// Alice shares an entry with encrypted attributes: refused while bob has no identity key, or
    /// with a public permission; bob (who set up encryption with his own passphrase) reads it and
    /// edits it; alice's second device reads his edit; alice removes bob and writes: the server's
    /// copy is sealed with a new key, which bob's device does not hold and alice's other device learns.
    func sharedThenRemoved(server: URL, secondServer: URL) async throws {
        let phone = try await Self.device("phone", server: server)
        let laptop = try await Self.device("laptop", server: secondServer)
        let bob = try await Self.device("bob", server: secondServer, token: "bob-token")
        defer { Task { await phone.close(); await laptop.close(); await bob.close() } }
        try await phone.container.setUpEncryption(passphrase: Self.passphrase)
        try await laptop.container.setUpEncryption(passphrase: Self.passphrase)
        let entry = JournalEntry(day: "one", text: Self.secret(), mood: 5, photo: Data(Self.secret().utf8), scan: Self.scan(40_000))
        try await phone.write { context in try context.insert(entry) }
        try await phone.sync()

        await #expect(performing: {
            _ = try await phone.container.share(entry, with: [.init(user: "_bob", permission: .readWrite)])
        }, throws: { ($0 as? ContainerError)?.code == .sharing && "\($0)".contains("_bob") && "\($0)".contains("setUpEncryption") })
        #expect(try phone.container.shares().isEmpty, "a refused share changes nothing")
        try await bob.container.setUpEncryption(passphrase: "bob's own passphrase")
        await #expect(performing: {
            _ = try await phone.container.share(entry, with: [.init(user: "_bob", permission: .readWrite)], publicPermission: .readOnly)
        }, throws: { ($0 as? ContainerError)?.code == .sharing && "\($0)".contains("publicPermission") })

        let share = try await phone.container.share(entry, with: [.init(user: "_bob", permission: .readWrite)])
        _ = try await bob.container.acceptShare(shortGUID: try #require(share.shortGUID))
        #expect(try Self.entries(bob) == [entry], "bob reads the shared encrypted values")
        #expect(try await bob.container.encryptionStatus().recordsAwaitingKey == 0)
        let bobsZones = try await bob.container.encryptionStatus().sharedZoneKeys
        #expect(bobsZones.map(\.zoneID.ownerRecordName) == ["_alice"] && bobsZones.allSatisfy(\.isHeld), "bob holds the zone's key")
        #expect(try await phone.container.encryptionStatus().sharedZoneKeys.map(\.grantedTo) == [["_bob"]])

        var edited = entry
        edited.text = Self.secret()
        edited.mood = 6
        try await bob.write { [edited] context in try context.update(edited) }
        try await bob.sync()
        #expect(try await bob.container.status().pendingUploads == 0, "bob's edit went up, sealed with the granted key")
        try await phone.sync()
        try await laptop.sync()
        #expect(try Self.entries(phone) == [edited])
        #expect(try Self.entries(laptop) == [edited], "alice's other device reads bob's edit")

        try await phone.container.removeParticipant("_bob", from: try #require(phone.container.shares().first))
        var after = edited
        after.text = Self.secret()
        try await phone.write { [after] context in try context.update(after) }
        try await phone.sync()
        try await bob.sync()
        #expect(try bob.container.shares().isEmpty, "bob's access ended")

        let zoneID = share.zoneID
        let operatorView = HTTPCloudDatabase(
            baseURL: server, container: TestDevice.containerIdentifier, token: "alice-token", deviceID: "operator")
        let looked = try await operatorView.lookupRecords(RecordsLookupRequest(zoneID: zoneID, recordNames: [entry.id.uuidString]))
        guard case .encryptedBytes(let sealed)? = looked.records.first?.value?.fields["text"] else {
            Issue.record("the server holds text as \(String(describing: looked.records.first))")
            return
        }
        let newKey = try FieldEncryption.keyID(of: sealed)
        let bobsKeys = try #require(await bob.container.mirror.keyring).openingKeys(ZoneID(zoneName: zoneID.zoneName, ownerRecordName: "_alice"))
        #expect(!bobsKeys.isEmpty, "bob held the zone's first key")
        #expect(bobsKeys[newKey] == nil, "what alice writes after removing bob is sealed with a key bob's device does not have")

        try await laptop.sync()
        #expect(try Self.entries(laptop) == [after], "alice's other device learned the new key")
        let status = try await laptop.container.encryptionStatus()
        #expect(status.recordsAwaitingKey == 0)
        #expect(status.sharedZoneKeys.map(\.generation) == [1] && status.sharedZoneKeys.first?.keyID == newKey.description)
        #expect(status.sharedZoneKeys.first?.grantedTo == [] && status.sharedZoneKeys.first?.isHeld == true)
    }

    /// Random bytes for an encrypted external-storage attribute.
    static func scan(_ count: Int) -> Data {
        var generator = SystemRandomNumberGenerator()
        return Data((0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    /// Whether any haystack holds a 64-byte slice of `bytes` (from its start, middle or end).
    static func holds(_ bytes: Data, in haystacks: [Data]) -> Bool {
        let slices = [bytes.prefix(64), bytes.dropFirst(bytes.count / 2).prefix(64), bytes.suffix(64)]
        return haystacks.contains { haystack in slices.contains { haystack.range(of: $0) != nil } }
    }

    /// An encrypted external-storage attribute: its bytes go up sealed as the asset's file (the
    /// server's files hold none of them), open on the other device and on a device that gets the
    /// key only later (the downloaded file kept while the record waits), are not uploaded again
    /// while unchanged, merge through a conflict, and an operator who moves one record's sealed
    /// file to another record is refused.
    @Test func encryptedAssets_travelSealed_andOpenOnlyInTheirPlace() async throws {
        let data = try TemporaryDirectory(prefix: "cloudstore-e2e-assets")
        let server = try await ServerProcess.launch(users: Self.users, data: data.file("data"))
        var scans: [Data] = []
        do {
            let phone = try await Self.device("phone", server: server.baseURL)
            let laptop = try await Self.device("laptop", server: server.baseURL)
            defer { Task { await phone.close(); await laptop.close() } }
            try await phone.container.setUpEncryption(passphrase: Self.passphrase)
            try await laptop.container.setUpEncryption(passphrase: Self.passphrase)
            var entries = (0..<3).map { JournalEntry(day: "day \($0)", text: Self.secret(), scan: Self.scan([300_000, 1, 5_000][$0])) }
            scans = entries.compactMap(\.scan).filter { $0.count > 1 }
            try await phone.write { [entries] context in for entry in entries { try context.insert(entry) } }
            try await phone.sync()
            #expect(try await phone.container.status().pendingUploads == 0)
            try await laptop.sync()
            #expect(try Self.entries(laptop) == entries, "the other device reads every sealed asset")

            let operatorView = HTTPCloudDatabase(
                baseURL: server.baseURL, container: TestDevice.containerIdentifier, token: "alice-token", deviceID: "operator")
            let zone = ZoneID(zoneName: "Journal")
            func serverAssets() async throws -> [Asset] {
                let looked = try await operatorView.lookupRecords(RecordsLookupRequest(zoneID: zone, recordNames: entries.map(\.id.uuidString)))
                return looked.records.compactMap { if case .asset(let asset)? = $0.value?.fields["scan"] { asset } else { nil } }
            }
            let stored = try await serverAssets()
            #expect(
                stored.map(\.size) == entries.map { AssetEncryption.sealedSize(of: Int64($0.scan!.count)) },
                "each asset holds its bytes sealed (a header, then a tag per chunk)")

            // Another field changes: the asset stays as the server holds it, nothing uploaded again.
            entries[0].text = Self.secret()
            try await phone.write { [entries] context in try context.update(entries[0]) }
            try await phone.sync()
            #expect(try await serverAssets().map(\.fileChecksum) == stored.map(\.fileChecksum))

            // A conflict: the phone replaces a scan while the laptop edits the text of the same entry.
            entries[1].scan = Self.scan(7_000)
            scans.append(entries[1].scan!)
            try await phone.write { [entries] context in try context.update(entries[1]) }
            try await phone.sync()
            var laptopEdit = try #require(try Self.entries(laptop).first { $0.id == entries[1].id })
            laptopEdit.text = Self.secret()
            try await laptop.write { [laptopEdit] context in try context.update(laptopEdit) }
            try await laptop.sync()
            try await phone.sync()
            entries[1].text = laptopEdit.text
            #expect(try Self.entries(laptop) == entries, "the laptop merged the phone's new scan with its text")
            #expect(try Self.entries(phone) == entries)
            #expect(try await laptop.container.status().lastError == nil)

            // A device without the key yet: the records wait with their downloaded files, then open.
            let tablet = try await Self.device("tablet", server: server.baseURL)
            defer { Task { await tablet.close() } }
            try await tablet.sync()
            #expect(try await tablet.container.encryptionStatus().recordsAwaitingKey == 3)
            try await tablet.container.setUpEncryption(passphrase: Self.passphrase)
            #expect(try Self.entries(tablet) == entries, "records that waited open with their assets")

            // The operator moves entry 0's sealed file into entry 2's field: refused there.
            let moved = try await serverAssets()[0]
            let file = data.file("moved.bin")
            try await operatorView.downloadAsset(from: try #require(moved.downloadURL), to: file, resumingAt: 0)
            let token = try await operatorView.requestAssetUploads(AssetUploadRequest(
                zoneID: zone, tokens: [.init(recordName: entries[2].id.uuidString, recordType: "JournalEntry", fieldName: "scan")]))
            let uploaded = try await operatorView.uploadAsset(from: file, to: try #require(token.tokens.first?.url))
            let looked = try await operatorView.lookupRecords(RecordsLookupRequest(zoneID: zone, recordNames: [entries[2].id.uuidString]))
            var target = try #require(looked.records.first?.value)
            target.fields["scan"] = .asset(uploaded.asset)
            let altered = try await operatorView.modifyRecords(RecordsModifyRequest(zoneID: zone, operations: [.init(.forceUpdate, target)]))
            #expect(altered.records.compactMap(\.error).isEmpty, "the operator's write: \(altered.records.compactMap(\.error))")
            try await laptop.sync()
            #expect(try Self.entries(laptop) == entries, "nothing moved was applied")
            #expect(try await laptop.container.encryptionStatus().refusedRecords == 1)

            // No file sealed for an upload or kept for a waiting record is left behind.
            for device in [phone, laptop, tablet] {
                let transfers = (try? FileManager.default.contentsOfDirectory(atPath: device.store.url.path + "-external/.transfers")) ?? []
                #expect(transfers.filter { $0.hasSuffix(".sealed") || $0.hasSuffix(".waiting") }.isEmpty, "\(device.name): \(transfers)")
            }
        } catch {
            _ = await server.terminate()
            throw error
        }
        _ = await server.terminate()
        var haystacks: [Data] = []
        let files = FileManager.default.enumerator(at: data.file("data"), includingPropertiesForKeys: nil)
        while let file = files?.nextObject() as? URL {
            if let bytes = try? Data(contentsOf: file) { haystacks.append(bytes) }
        }
        #expect(!haystacks.isEmpty && scans.count == 3)
        #expect(!scans.contains { Self.holds($0, in: haystacks) }, "an asset's plain bytes are in the server's files")
    }

    /// A batch whose save failed in transit goes again with the file sealed for it the first
    /// time: its upload is reused, not sealed and sent again.
    @Test func aBatchSentAgain_reusesItsSealedAsset() async throws {
        try await ServerProcess.with(users: Self.users) { server in
            let faults = FaultInjectingDatabase.Box()
            let phone = try await TestDevice.make("phone", schema: Self.schema(), server: server.baseURL, token: "alice-token") { options in
                options.configureEngine = faults.configureEngine
            }
            let laptop = try await Self.device("laptop", server: server.baseURL)
            defer { Task { await phone.close(); await laptop.close() } }
            try await phone.container.setUpEncryption(passphrase: Self.passphrase)
            try await laptop.container.setUpEncryption(passphrase: Self.passphrase)
            let entry = JournalEntry(day: "one", text: Self.secret(), scan: Self.scan(200_000))
            try await phone.write { context in try context.insert(entry) }
            let database = try #require(faults.database)
            database.inject(.networkFailure, into: .recordsModify)
            _ = try? await phone.sync()
            #expect(database.requestCount(.assetsUpload) == 1 && database.requestCount(.recordsModify) >= 1)
            try await phone.sync()
            #expect(try await phone.container.status().pendingUploads == 0)
            #expect(database.requestCount(.assetsUpload) == 1, "the sealed file uploaded the first time served again")
            try await laptop.sync()
            #expect(try Self.entries(laptop) == [entry])
            let transfers = (try? FileManager.default.contentsOfDirectory(atPath: phone.store.url.path + "-external/.transfers")) ?? []
            #expect(!transfers.contains { $0.hasSuffix(".sealed") }, "\(transfers)")
        }
    }

    /// A version of a record whose encrypted asset is unchanged (another field changed) brings
    /// the same sealed file: neither the device that sealed it nor one that opened it downloads
    /// it again. A new scan is downloaded once.
    @Test func anUnchangedEncryptedAsset_isNotDownloadedAgain() async throws {
        try await ServerProcess.with(users: Self.users) { server in
            let (phoneFaults, laptopFaults) = (FaultInjectingDatabase.Box(), FaultInjectingDatabase.Box())
            func device(_ name: String, _ faults: FaultInjectingDatabase.Box) async throws -> TestDevice {
                try await TestDevice.make(name, schema: Self.schema(), server: server.baseURL, token: "alice-token") { options in
                    options.configureEngine = faults.configureEngine
                }
            }
            let phone = try await device("phone", phoneFaults)
            let laptop = try await device("laptop", laptopFaults)
            defer { Task { await phone.close(); await laptop.close() } }
            try await phone.container.setUpEncryption(passphrase: Self.passphrase)
            try await laptop.container.setUpEncryption(passphrase: Self.passphrase)
            var entry = JournalEntry(day: "one", text: Self.secret(), scan: Self.scan(100_000))
            try await phone.write { [entry] context in try context.insert(entry) }
            try await phone.sync()
            try await laptop.sync()
            let (phoneDatabase, laptopDatabase) = (try #require(phoneFaults.database), try #require(laptopFaults.database))
            #expect(laptopDatabase.assetDownloadCount == 1 && phoneDatabase.assetDownloadCount == 0)

            entry.text = Self.secret()
            try await phone.write { [entry] context in try context.update(entry) }
            try await phone.sync()
            try await laptop.sync()
            #expect(try Self.entries(laptop) == [entry])
            #expect(laptopDatabase.assetDownloadCount == 1, "the laptop opened this sealed file before")
            entry.text = Self.secret()
            try await laptop.write { [entry] context in try context.update(entry) }
            try await laptop.sync()
            try await phone.sync()
            #expect(try Self.entries(phone) == [entry])
            #expect(phoneDatabase.assetDownloadCount == 0, "the phone sealed this file")

            entry.scan = Self.scan(50_000)
            try await phone.write { [entry] context in try context.update(entry) }
            try await phone.sync()
            try await laptop.sync()
            #expect(try Self.entries(laptop) == [entry])
            #expect(laptopDatabase.assetDownloadCount == 2, "a new scan is downloaded once")
            for device in [phone, laptop] {
                let transfers = (try? FileManager.default.contentsOfDirectory(atPath: device.store.url.path + "-external/.transfers")) ?? []
                #expect(transfers.filter { $0.hasSuffix(".sealed") || $0.hasSuffix(".waiting") }.isEmpty, "\(device.name): \(transfers)")
            }

            // What a device remembers of a record's sealed files goes with the record.
            func remembered(_ device: TestDevice) throws -> Int? {
                try device.store.read { try Int.fetchOne($0.db, sql: "SELECT count(*) FROM cloudstore_mirror_sealed_asset") }
            }
            #expect(try remembered(phone) == 1 && remembered(laptop) == 1)
            try await phone.write { [id = entry.id] context in try context.delete(JournalEntry.self, id: id) }
            try await phone.sync()
            try await laptop.sync()
            #expect(try Self.entries(laptop).isEmpty)
            #expect(try remembered(phone) == 0 && remembered(laptop) == 0)
        }
    }

    /// The laptop's edit of the text conflicts with the phone's new scan, and the engine cannot
    /// download the server copy's sealed scan with the conflict: the edit is not refused, it
    /// waits as a retry and merges once a send's conflict brings the copy with its bytes.
    @Test func aConflictWhoseEncryptedAssetDidNotDownload_goesAgain() async throws {
        try await ServerProcess.with(users: Self.users) { server in
            let faults = FaultInjectingDatabase.Box()
            let phone = try await Self.device("phone", server: server.baseURL)
            let laptop = try await TestDevice.make("laptop", schema: Self.schema(), server: server.baseURL, token: "alice-token") { options in
                options.configureEngine = faults.configureEngine
            }
            defer { Task { await phone.close(); await laptop.close() } }
            try await phone.container.setUpEncryption(passphrase: Self.passphrase)
            try await laptop.container.setUpEncryption(passphrase: Self.passphrase)
            let entry = JournalEntry(day: "one", text: Self.secret(), scan: Self.scan(3_000))
            try await phone.write { context in try context.insert(entry) }
            try await phone.sync()
            try await laptop.sync()
            var onPhone = entry, onLaptop = entry
            onPhone.scan = Self.scan(5_000)
            onLaptop.text = Self.secret()
            let (changedPhone, changedLaptop) = (onPhone, onLaptop)
            try await phone.write { context in try context.update(changedPhone) }
            try await phone.sync()
            try await laptop.write { context in try context.update(changedLaptop) }
            let database = try #require(faults.database)
            let downloads = database.assetDownloadCount
            database.failAssetDownloads(times: 1_000)
            // Sent before anything is fetched: the server answers with a conflict (and again to
            // the send's own retries).
            _ = try? await laptop.container.sendChanges()
            #expect(database.assetDownloadCount > downloads, "the conflict's download was tried")
            let state = try await laptop.container.syncState(of: JournalEntry.self, id: entry.id)
            #expect(state?.refusal == nil, "not refused: \(String(describing: state?.refusal))")
            #expect(state?.retry?.error.serverErrorCode == .conflict && (state?.retry?.attempts ?? 0) >= 1)
            #expect(try await laptop.container.status().pendingUploads == 1)
            #expect(try Self.entries(laptop) == [onLaptop], "nothing merged without the bytes")
            database.removeFaults()
            try await laptop.container.sendChanges()
            let merged = JournalEntry(id: entry.id, day: "one", text: onLaptop.text, scan: onPhone.scan)
            #expect(try Self.entries(laptop) == [merged])
            #expect(try await laptop.container.status().pendingUploads == 0)
            try await phone.sync()
            #expect(try Self.entries(phone) == [merged])
        }
    }

    @Test func sharingEncryptedAttributes_grantsTheKey_andRemovalRotatesIt() async throws {
        try await ServerProcess.with(users: Self.users) { server in
            try await sharedThenRemoved(server: server.baseURL, secondServer: server.baseURL)
        }
    }

    /// The same through two servers on one PostgreSQL: alice's phone on one, her laptop and bob on the other.
    @Test(.enabled(if: ServerProcess.testPostgresURL != nil || ProcessInfo.processInfo.environment["CI"] != nil))
    func sharingEncryptedAttributes_onPostgreSQL() async throws {
        try await ServerProcess.withTwoOnPostgres(users: Self.users) { first, second, _ in
            try await sharedThenRemoved(server: first, secondServer: second)
        }
    }

}

/// ``RecordSealing`` driven directly: what it seals opens only as the same field of the same
/// record of the same zone, with the same account key.
@Suite("Record sealing")
struct RecordSealingTests {
    let entity = JournalEntry.entityDescription
    let keyring = EncryptionKeyring(user: "_alice", account: EncryptionKey())

    func record(_ text: String, name: String = UUID().uuidString, zone: String = "Journal") -> Record {
        var record = Record(recordType: "JournalEntry", recordID: RecordID(recordName: name, zoneID: ZoneID(zoneName: zone)))
        record.fields = ["day": .string("monday"), "text": .string(text), "mood": .int64(7), "written": .null]
        return record
    }

    @Test func sealedFields_openOnlyInTheirPlace() throws {
        let sealing = RecordSealing(keyring: keyring)
        let plain = record("dear diary")
        var sealed = plain
        try sealing.seal(&sealed, of: entity)
        guard case .encryptedBytes? = sealed.fields["text"], case .encryptedBytes? = sealed.fields["mood"] else {
            Issue.record("not sealed: \(sealed.fields)")
            return
        }
        #expect(sealed.fields["day"] == .string("monday"), "a plain attribute stays plain")
        #expect(sealed.fields["written"] == .null, "a null clears the field, sealed or not")
        #expect(try sealing.open(sealed, of: entity) == plain)

        var moved = record("other", name: UUID().uuidString)
        moved.fields["text"] = sealed.fields["text"]
        #expect(throws: RecordSealing.Failure.self) { try sealing.open(moved, of: entity) }
        var swapped = sealed
        (swapped.fields["text"], swapped.fields["mood"]) = (sealed.fields["mood"], sealed.fields["text"])
        #expect(throws: RecordSealing.Failure.self) { try sealing.open(swapped, of: entity) }
        var otherZone = record("other", name: sealed.recordName, zone: "Elsewhere")
        otherZone.fields = sealed.fields
        #expect(throws: RecordSealing.Failure.self) { try sealing.open(otherZone, of: entity) }
    }

    /// An encrypted asset's file opens only as the same field of the same record (a missing key
    /// waits, anything else is refused); `seal` and `open` leave the asset to the file step,
    /// `readable` leaves out one it cannot read without its file.
    @Test func sealedAssets_openOnlyInTheirPlace() throws {
        let directory = try TemporaryDirectory(prefix: "sealing")
        let sealing = RecordSealing(keyring: keyring)
        var plain = record("dear diary")
        let scan = Asset(fileChecksum: "plain", size: 3)
        plain.fields["scan"] = .asset(scan)
        var sealed = plain
        let sealedHere = try sealing.seal(&sealed, of: entity)
        #expect(sealed.fields["scan"] == .asset(scan) && sealedHere["scan"] == nil, "the file step seals an asset, not seal(_:of:)")
        try Data("scan".utf8).write(to: directory.file("plain"))
        let file = try sealing.sealAsset(from: directory.file("plain"), to: directory.file("sealed"), field: "scan", of: plain)
        #expect(file.size == AssetEncryption.sealedSize(of: 4))
        _ = try sealing.openAsset(from: directory.file("sealed"), to: directory.file("opened"), field: "scan", of: plain)
        #expect(try Data(contentsOf: directory.file("opened")) == Data("scan".utf8))
        #expect(throws: RecordSealing.Failure.self) {
            try sealing.openAsset(from: directory.file("sealed"), to: directory.file("opened"), field: "photo", of: plain)
        }
        #expect(throws: RecordSealing.Failure.self) {
            try sealing.openAsset(from: directory.file("sealed"), to: directory.file("opened"), field: "scan", of: record("other"))
        }
        let stranger = RecordSealing(keyring: EncryptionKeyring(user: "_alice", account: EncryptionKey()))
        do {
            _ = try stranger.openAsset(from: directory.file("sealed"), to: directory.file("opened"), field: "scan", of: plain)
            Issue.record("opened without the key")
        } catch {
            #expect(error == .missingKey(keyring.sealingKey(plain.recordID.zoneID)?.id), "a missing key waits")
        }

        var fetched = sealed
        fetched.fields["scan"] = .asset(Asset(fileChecksum: "sealed", size: 50))
        #expect(try sealing.sealedAssets(of: fetched, entity).map(\.field) == ["scan"])
        let answered = sealing.readable(fetched, of: entity, sealedHere: sealedHere)
        #expect(answered.fields["scan"] == nil && answered.fields["text"] == plain.fields["text"])
        fetched.fields["scan"] = .encryptedBytes(Data(count: 50))
        #expect(throws: RecordSealing.Failure.self) { try sealing.sealedAssets(of: fetched, entity) }
    }

    /// The acknowledgement of a save reads the server's copy: a ciphertext sent from here is its
    /// sealed value without opening it; one that differs (another device's) is opened.
    @Test func ciphertextsSealedHere_readAsTheirValues_othersAreOpened() throws {
        let sealing = RecordSealing(keyring: keyring)
        var mine = record("mine")
        let sealedHere = try sealing.seal(&mine, of: entity)
        #expect(Set(sealedHere.keys) == ["text", "mood"])
        #expect(sealedHere["text"]?.value == .string("mine"))
        // Without a key, only what was sealed here reads.
        #expect(try RecordSealing.none.open(mine, of: entity, sealedHere: sealedHere) == record("mine", name: mine.recordName))

        var theirs = record("theirs", name: mine.recordName)
        try sealing.seal(&theirs, of: entity)
        var server = mine
        server.fields["text"] = theirs.fields["text"]
        let read = try sealing.open(server, of: entity, sealedHere: sealedHere)
        #expect(read.fields["text"] == .string("theirs"), "a ciphertext that is not the one sent is opened")
        #expect(read.fields["mood"] == .int64(7))
        var altered = mine
        if case .encryptedBytes(var bytes)? = mine.fields["text"] {
            bytes[bytes.count - 1] ^= 1
            altered.fields["text"] = .encryptedBytes(bytes)
        }
        #expect(throws: RecordSealing.Failure.self) { try sealing.open(altered, of: entity, sealedHere: sealedHere) }
    }

    @Test func plainValuesWhereEncrypted_areRefused_andMissingKeysWait() throws {
        let sealing = RecordSealing(keyring: keyring)
        #expect(performing: { try sealing.open(record("plain"), of: entity) }, throws: {
            if case .refused(field: "text", _)? = $0 as? RecordSealing.Failure { true } else { false }
        })
        var sealed = record("dear diary")
        try sealing.seal(&sealed, of: entity)
        #expect(performing: { try RecordSealing.none.open(sealed, of: entity) }, throws: {
            if case .missingKey(let id?)? = $0 as? RecordSealing.Failure { id == keyring.derivedKey(ZoneID(zoneName: "Journal"))!.id } else { false }
        })
        let stranger = RecordSealing(keyring: EncryptionKeyring(user: "_alice", account: EncryptionKey()))
        #expect(performing: { try stranger.open(sealed, of: entity) }, throws: {
            if case .missingKey? = $0 as? RecordSealing.Failure { true } else { false }
        })
        var unsealable = record("x")
        #expect(throws: RecordSealing.Failure.self) { try RecordSealing.none.seal(&unsealable, of: entity) }
    }

    @Test func everyDeviceDerivesTheSameZoneKey() {
        let again = EncryptionKeyring(user: "_alice", account: EncryptionKey(id: keyring.account.id, rawBytes: keyring.account.rawBytes)!)
        #expect(keyring.derivedKey(ZoneID(zoneName: "Journal"))!.id == again.derivedKey(ZoneID(zoneName: "Journal"))!.id)
        #expect(keyring.derivedKey(ZoneID(zoneName: "Journal"))!.rawBytes == again.derivedKey(ZoneID(zoneName: "Journal"))!.rawBytes)
        #expect(keyring.derivedKey(ZoneID(zoneName: "Journal"))!.id != keyring.derivedKey(ZoneID(zoneName: "Other"))!.id)
    }
}

/// ``ZoneKeyPlan`` and ``EncryptionKeyring`` driven directly: who gets which zone key.
@Suite("Zone keys")
struct ZoneKeyTests {
    let alice = EncryptionKeyring(user: "_alice", account: EncryptionKey())
    let bob = EncryptionKeyring(user: "_bob", account: EncryptionKey())
    let carol = EncryptionKeyring(user: "_carol", account: EncryptionKey())
    let own = ZoneID(zoneName: "Journal.share-1")
    var asShared: ZoneID { ZoneID(zoneName: own.zoneName, ownerRecordName: "_alice") }

    @Test func removingAnyoneOrStopping_rotates_addingOnlyGrants() {
        #expect(ZoneKeyPlan.plan(current: [], next: ["_bob"]) == .grant(["_bob"]))
        #expect(ZoneKeyPlan.plan(current: ["_bob"], next: ["_bob", "_carol"]) == .grant(["_bob", "_carol"]))
        #expect(ZoneKeyPlan.plan(current: ["_bob", "_carol"], next: ["_carol"]) == .rotate(grantedTo: ["_carol"]))
        #expect(ZoneKeyPlan.plan(current: ["_bob"], next: ["_carol"]) == .rotate(grantedTo: ["_carol"]))
        #expect(ZoneKeyPlan.plan(current: ["_bob"], next: nil) == .rotate(grantedTo: []))
    }

    func grant(_ key: EncryptionKey, to users: [EncryptionKeyring]) throws -> [KeyGrant] {
        try users.map {
            try KeyWrapping.grant(key, zoneName: own.zoneName, zoneOwner: "_alice", to: $0.user, publicKey: $0.identity.publicKey)
        }
    }

    @Test func participantsLearnGrantedKeys_andSealWithTheNewest() throws {
        let first = try #require(alice.derivedKey(own))
        #expect(bob.sealingKey(asShared) == nil, "no key of alice's zone before a grant")
        try #require(try bob.learn(ZoneKeyRecord(keyID: first.id, generation: 0, wrapped: nil, grants: grant(first, to: [bob, carol]), writer: "_alice"), in: asShared))
        #expect(bob.sealingKey(asShared)?.rawBytes == first.rawBytes)

        let rotated = EncryptionKey()
        let wrapped = try KeyWrapping.wrap(rotated, zoneName: own.zoneName, zoneOwner: "_alice", with: alice.account)
        let record = ZoneKeyRecord(keyID: rotated.id, generation: 1, wrapped: wrapped, grants: try grant(rotated, to: [carol]), writer: "_alice")
        #expect(try bob.learn(record, in: asShared) == false, "bob was removed: nothing for him")
        #expect(bob.openingKeys(asShared).keys.sorted(by: { $0.description < $1.description }) == [first.id])
        #expect(try carol.learn(ZoneKeyRecord(keyID: first.id, generation: 0, wrapped: nil, grants: grant(first, to: [bob, carol]), writer: "_alice"), in: asShared))
        #expect(try carol.learn(record, in: asShared))
        #expect(carol.sealingKey(asShared)?.id == rotated.id, "later writes use the newest key")
        #expect(carol.openingKeys(asShared).count == 2, "older values still open")

        let laptop = EncryptionKeyring(user: "_alice", account: alice.account)
        #expect(laptop.sealingKey(own)?.id == first.id)
        #expect(try laptop.learn(record, in: own), "alice's other device unwraps the rotated key")
        #expect(laptop.sealingKey(own)?.rawBytes == rotated.rawBytes)
    }

    @Test func aGrantMovedToAnotherZoneOrUser_doesNotOpen() throws {
        let key = EncryptionKey()
        var grants = try grant(key, to: [bob])
        grants[0].participant = "_carol"
        #expect(throws: EncryptionError.self) {
            try carol.learn(ZoneKeyRecord(keyID: key.id, generation: 1, wrapped: nil, grants: grants, writer: "_alice"), in: asShared)
        }
        let elsewhere = ZoneID(zoneName: "Other", ownerRecordName: "_alice")
        #expect(throws: EncryptionError.self) {
            try bob.learn(ZoneKeyRecord(keyID: key.id, generation: 1, wrapped: nil, grants: try grant(key, to: [bob]), writer: "_alice"), in: elsewhere)
        }
        // A key record another participant wrote (a read-write share) is not the owner's.
        let planted = EncryptionKey()
        #expect(throws: EncryptionError.self) {
            try bob.learn(ZoneKeyRecord(keyID: planted.id, generation: 9, wrapped: nil, grants: try grant(planted, to: [bob]), writer: "_carol"), in: asShared)
        }
        #expect(bob.sealingKey(elsewhere) == nil && carol.sealingKey(asShared) == nil, "nothing altered was learned")
    }

    @Test func zoneKeyRecords_roundTripThroughTheirRecord() throws {
        let key = EncryptionKey()
        let value = ZoneKeyRecord(
            keyID: key.id, generation: 3, wrapped: try KeyWrapping.wrap(key, zoneName: own.zoneName, zoneOwner: "_alice", with: alice.account),
            grants: try grant(key, to: [bob]))
        var saved = try value.record(in: own)
        saved.modified = Record.Stamp(timestamp: Date(), userRecordName: "_alice")
        var expected = value
        expected.writer = "_alice"
        #expect(try ZoneKeyRecord(saved) == expected)
        var record = try value.record(in: own)
        record.fields["grants"] = .bytes(Data("nope".utf8))
        #expect(throws: EncryptionError.self) { try ZoneKeyRecord(record) }
    }
}

