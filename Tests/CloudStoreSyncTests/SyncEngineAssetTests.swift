import CloudStoreSync
import CloudStoreTesting
import CloudStoreWire
import Foundation
import Testing

@testable import CloudStoreSync

/// The engine's asset transfers (WireProtocol.md §7) against ``AssetServerFake``: uploads before a
/// save, downloads before a fetched page is delivered, and what becomes of their failures.
@Suite(.timeLimit(.minutes(ReliabilityRun.hangLimitMinutes))) struct SyncEngineAssetTests {
    let notes = ZoneID(zoneName: "Notes")
    let directory: TemporaryDirectory

    init() throws {
        directory = try TemporaryDirectory(prefix: "cloudstore-asset-tests")
    }

    /// A file holding `bytes`, and the asset for it.
    func asset(_ name: String, _ bytes: Data) throws -> Asset {
        let file = directory.file(name)
        try bytes.write(to: file)
        return try Asset(contentsOf: file)
    }

    func note(_ name: String, photo: Asset? = nil, gallery: [Asset] = []) -> Record {
        var fields: [String: FieldValue] = ["title": .string("t")]
        if let photo { fields["photo"] = .asset(photo) }
        if !gallery.isEmpty { fields["gallery"] = .list(gallery.map { .asset($0) }) }
        return Record(recordName: name, recordType: "Note", zoneID: notes, fields: fields)
    }

    func recordID(_ name: String) -> RecordID { RecordID(recordName: name, zoneID: notes) }

    static func sent(_ device: EngineDevice) async -> [SyncEngine.Event.SentRecordZoneChanges] {
        await device.events.compactMap { event in
            if case .sentRecordZoneChanges(let sent) = event { return sent }
            return nil
        }
    }

    static func bytes(_ count: Int, _ seed: UInt8 = 1) -> Data {
        Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) })
    }

    // MARK: Send

    @Test func send_uploadsNewAssetsThenSavesThemWithTheirReceipts() async throws {
        let server = AssetServerFake()
        let device = await EngineDevice("A", database: server)
        let photo = try asset("photo.jpg", Self.bytes(3000))
        let extra = try asset("extra.jpg", Self.bytes(500, 7))
        await device.save(note("N1", photo: photo, gallery: [extra]))
        try await device.engine.sendChanges()

        #expect(server.uploadCount == 2)
        #expect(
            server.tokenRequests.map(\.tokens) == [
                [.init(recordName: "N1", recordType: "Note", fieldName: "gallery"),
                 .init(recordName: "N1", recordType: "Note", fieldName: "photo")]
            ])
        guard case .asset(let sentPhoto)? = server.savedFields.first?["photo"] else {
            Issue.record("the photo was not sent")
            return
        }
        #expect(sentPhoto.receipt != nil)
        #expect(sentPhoto.fileChecksum == photo.fileChecksum && sentPhoto.size == 3000)
        let stored = try #require(server.record("N1", in: "Notes"))
        #expect(stored.fields["photo"].map(\.assets)?.first?.fileChecksum == photo.fileChecksum)
        #expect(stored.fields["gallery"].map(\.assets)?.first?.fileChecksum == extra.fileChecksum)
        let sent = await Self.sent(device)
        #expect(sent.map(\.savedRecords.count) == [1])
        #expect(device.engine.state.pendingRecordZoneChanges.isEmpty)
    }

    @Test func send_unchangedAssetIsNotUploadedAgain() async throws {
        let server = AssetServerFake()
        let device = await EngineDevice("A", database: server)
        await device.save(note("N1", photo: try asset("photo.jpg", Self.bytes(2000))))
        try await device.engine.sendChanges()
        #expect(server.uploadCount == 1)

        // The device now holds the server's copy: the asset with its download URL, no file.
        await device.edit(recordID("N1"), ["title": .string("edited")])
        try await device.engine.sendChanges()
        #expect(server.uploadCount == 1)
        guard case .asset(let resent)? = server.savedFields.last?["photo"] else {
            Issue.record("the photo was not sent back")
            return
        }
        #expect(resent.receipt == nil && resent.downloadURL == nil, "sent back as checksum and size only")
        #expect(server.record("N1", in: "Notes")?.fields["title"] == .string("edited"))
        #expect(await Self.sent(device).last?.failedRecordSaves.isEmpty == true)
    }

    @Test func send_missingOrChangedFileFailsOnlyItsRecord() async throws {
        let server = AssetServerFake()
        let device = await EngineDevice("A", database: server)
        let missing = directory.file("gone.jpg")
        let changed = try asset("changed.jpg", Self.bytes(1000))
        try Self.bytes(1000, 9).write(to: try #require(changed.fileURL))
        await device.save(note("N1", photo: try asset("fine.jpg", Self.bytes(800))))
        await device.save(note("N2", photo: Asset(fileChecksum: changed.fileChecksum, size: 5, fileURL: missing)))
        await device.save(note("N3", photo: changed))
        try await device.engine.sendChanges()

        let sent = try #require(await Self.sent(device).first)
        #expect(sent.savedRecords.map(\.recordName) == ["N1"])
        let failures = Dictionary(uniqueKeysWithValues: sent.failedRecordSaves.map { ($0.record.recordName, $0.error) })
        #expect(failures["N2"]?.code == .assetFileUnavailable)
        #expect(failures["N2"]?.recordName == "N2")
        let unavailable = failures["N2"]?.reason ?? ""
        #expect(unavailable.contains("N2") && unavailable.contains("photo") && unavailable.contains(missing.path))
        #expect(failures["N3"]?.code == .assetFileChanged)
        let mismatch = failures["N3"]?.reason ?? ""
        var actual = AssetChecksum()
        actual.update(Self.bytes(1000, 9))
        #expect(mismatch.contains("N3") && mismatch.contains("photo"))
        #expect(mismatch.contains(changed.fileChecksum) && mismatch.contains(actual.base64))
        #expect(server.record("N3", in: "Notes") == nil)
        #expect(device.engine.state.pendingRecordZoneChanges.isEmpty, "failed saves are final: the delegate decides")
    }

    @Test func send_assetTooLargeFailsItsRecordWithoutSplittingTheBatch() async throws {
        let server = AssetServerFake(maxAssetSize: 1000)
        let database = FaultInjectingDatabase(server)
        let device = await EngineDevice("A", database: database)
        await device.save(note("N1", photo: try asset("huge.jpg", Self.bytes(4000))))
        await device.save(note("N2", photo: try asset("small.jpg", Self.bytes(100))))
        try await device.engine.sendChanges()

        let sent = try #require(await Self.sent(device).first)
        #expect(sent.savedRecords.map(\.recordName) == ["N2"])
        let failure = try #require(sent.failedRecordSaves.first)
        #expect(failure.record.recordName == "N1")
        #expect(failure.error.code == .limitExceeded)
        #expect(failure.error.reason?.hasPrefix("asset photo of record N1 is 3 KiB, more than the server accepts") == true)
        #expect(database.requestCount(.recordsModify) == 1, "no split: one records/modify with N2 alone")
        #expect(server.savedFields.count == 1)
    }

    @Test func send_transientAssetFailureKeepsEverythingPendingForTheNextSend() async throws {
        let server = AssetServerFake()
        let device = await EngineDevice("A", database: server)
        await device.save(note("N1", photo: try asset("photo.jpg", Self.bytes(1200))))
        await device.save(note("N2"))

        server.failNextUploadRequest(with: .server(ServerError(.tryAgainLater, retryAfter: 5), httpStatus: 503))
        let first = await #expect(throws: CloudError.self) { try await device.engine.sendChanges() }
        #expect(first?.retryAfter == 5)
        #expect(device.engine.state.pendingRecordZoneChanges.count == 2)

        server.failNextUpload(with: CloudError(.network, message: "connection reset"))
        let second = await #expect(throws: CloudError.self) { try await device.engine.sendChanges() }
        #expect(second?.kind == .network)
        #expect(device.engine.state.pendingRecordZoneChanges.count == 2)
        #expect(server.savedFields.isEmpty)

        try await device.engine.sendChanges()
        #expect(device.engine.state.pendingRecordZoneChanges.isEmpty)
        #expect(server.uploadCount == 1)
        #expect(server.record("N1", in: "Notes")?.fields["photo"] != nil)
    }

    @Test func send_batchSentAgainSoonReusesItsReceipt() async throws {
        let clock = TestClock()
        let server = AssetServerFake()
        let database = FaultInjectingDatabase(server)
        let device = await EngineDevice("A", database: database) { $0.clock = clock }
        await device.save(note("N1", photo: try asset("photo.jpg", Self.bytes(1500))))

        database.inject(.networkFailure, into: .recordsModify)
        await #expect(throws: CloudError.self) { try await device.engine.sendChanges() }
        #expect(server.uploadCount == 1)
        try await device.engine.sendChanges()
        #expect(server.uploadCount == 1, "the receipt of a minute ago still holds")
        #expect(device.engine.state.pendingRecordZoneChanges.isEmpty)

        await device.save(note("N2", photo: try asset("other.jpg", Self.bytes(1500, 3))))
        database.inject(.networkFailure, into: .recordsModify)
        await #expect(throws: CloudError.self) { try await device.engine.sendChanges() }
        clock.advance(by: .seconds(601))
        try await device.engine.sendChanges()
        #expect(server.uploadCount == 3, "a receipt older than 10 minutes is not reused")
    }

    // MARK: Fetch

    func fetchingDevice(_ server: AssetServerFake, assetDirectory: URL) async -> EngineDevice {
        await EngineDevice("B", database: server) { $0.assetDirectory = assetDirectory }
    }

    /// A server holding note N1 whose photo is `count` bytes, made from a local file `fileName`.
    func serverWithPhoto(_ count: Int, fileName: String = "photo.jpg") throws -> (AssetServerFake, Data, Asset) {
        let server = AssetServerFake()
        let bytes = Self.bytes(count)
        let photo = try asset(fileName, bytes)
        server.store(note("N1", photo: photo), in: "Notes", assetBytes: [bytes])
        return (server, bytes, photo)
    }

    func assetFiles(in directory: URL) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
    }

    @Test func fetch_downloadsEachAssetOnceAndDeliversItsFile() async throws {
        let server = AssetServerFake()
        let bytes = Self.bytes(5000)
        let photo = try asset("photo.jpg", bytes)
        server.store(note("N1", photo: photo), in: "Notes", assetBytes: [bytes])
        server.store(note("N2", photo: photo), in: "Notes", assetBytes: [bytes])
        let assets = directory.file("assets")
        let device = await fetchingDevice(server, assetDirectory: assets)
        try await device.engine.fetchChanges()

        #expect(server.downloads.map(\.offset) == [0], "the same bytes twice in a page: one download")
        #expect(await device.deliveredAssetBytes == ["N1.photo": bytes, "N2.photo": bytes])
        let fetched = try #require(await device.record(recordID("N1")))
        guard case .asset(let delivered)? = fetched.fields["photo"] else {
            Issue.record("no photo")
            return
        }
        let name = try #require(AssetChecksum.fileName(of: photo.fileChecksum))
        #expect(delivered.fileURL?.lastPathComponent == "\(name).asset")
        #expect(delivered.downloadURL != nil)
        #expect(try assetFiles(in: assets).isEmpty, "the engine deletes its files once the page was handled")
    }

    @Test func fetch_keptAssetsSurviveAndAnEngineRemovesLeftoversAtStart() async throws {
        let (server, _, _) = try serverWithPhoto(700)
        let assets = directory.file("assets")
        let kept = directory.file("kept")
        try FileManager.default.createDirectory(at: kept, withIntermediateDirectories: true)
        let device = await fetchingDevice(server, assetDirectory: assets)
        await device.keepAssets(in: kept)
        try await device.engine.fetchChanges()
        #expect(try assetFiles(in: kept).count == 1)

        try Data("left".utf8).write(to: assets.appendingPathComponent("old.asset"))
        try Data("half".utf8).write(to: assets.appendingPathComponent("old.partial"))
        _ = await fetchingDevice(server, assetDirectory: assets)
        #expect(try assetFiles(in: assets) == ["old.partial"])
    }

    @Test func fetch_existingFileSkipsTheDownload() async throws {
        let (server, bytes, photo) = try serverWithPhoto(900, fileName: "mine.jpg")
        let device = await fetchingDevice(server, assetDirectory: directory.file("assets"))
        await device.setAssetFile(try #require(photo.fileURL), for: photo.fileChecksum)
        try await device.engine.fetchChanges()

        #expect(server.downloads.isEmpty)
        #expect(await device.deliveredAssetBytes == ["N1.photo": bytes])
        #expect(FileManager.default.fileExists(atPath: try #require(photo.fileURL).path), "the app's file is never deleted")
    }

    @Test func fetch_cutDownloadResumesFromThePartialFile() async throws {
        let (server, bytes, photo) = try serverWithPhoto(4096)
        let assets = directory.file("assets")
        let device = await fetchingDevice(server, assetDirectory: assets)

        server.failNextDownload(.cut(after: 1000))
        let error = await #expect(throws: CloudError.self) { try await device.engine.fetchChanges() }
        #expect(error?.kind == .network)
        #expect(await device.savedState?.zoneTokens.isEmpty == true, "the zone's token stays before the page")
        #expect(await device.eventNames().contains("fetchedRecordZoneChanges") == false)
        let name = try #require(AssetChecksum.fileName(of: photo.fileChecksum))
        #expect(try assetFiles(in: assets) == ["\(name).partial"])

        try await device.engine.fetchChanges()
        #expect(server.downloads.map(\.offset) == [0, 1000])
        #expect(await device.deliveredAssetBytes == ["N1.photo": bytes])
        #expect(await device.savedState?.zoneTokens.isEmpty == false)
    }

    @Test func fetch_corruptDownloadIsRetriedOnceThenFailsTheFetch() async throws {
        let (server, bytes, photo) = try serverWithPhoto(2048)
        let device = await fetchingDevice(server, assetDirectory: directory.file("assets"))

        server.failNextDownload(.corrupt)
        try await device.engine.fetchChanges()
        #expect(server.downloads.map(\.offset) == [0, 0], "a corrupt download is downloaded again from zero")
        #expect(await device.deliveredAssetBytes == ["N1.photo": bytes])

        server.store(note("N2", photo: photo), in: "Notes", assetBytes: [bytes])
        let tokenBefore = await device.savedState?.zoneTokens.first?.syncToken
        server.failNextDownload(.corrupt)
        server.failNextDownload(.corrupt)
        let error = await #expect(throws: CloudError.self) { try await device.engine.fetchChanges() }
        #expect(error?.kind == .invalidResponse)
        let message = error?.message ?? ""
        var corrupt = Self.bytes(2048)
        corrupt[0] ^= 0xFF
        var received = AssetChecksum()
        received.update(corrupt)
        #expect(message.contains("asset photo of record N2") && message.contains(photo.fileChecksum))
        #expect(message.contains(received.base64))
        #expect(await device.savedState?.zoneTokens.first?.syncToken == tokenBefore, "the token did not advance")
        let did = await device.waitForEvent { event in
            if case .didFetchRecordZoneChanges(let did) = event { return did.error != nil }
            return false
        }
        #expect(did.description.contains("checksum"), "the zone's fetch reports why it stopped")
    }
}
