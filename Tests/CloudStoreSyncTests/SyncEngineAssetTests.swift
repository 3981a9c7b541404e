import CloudStoreSync
import CloudStoreTesting
import CloudStoreWire
import Foundation
import Testing

@testable import CloudStoreSync

/// The engine's asset transfers (WireProtocol.md §7) against ``AssetServerFake``: uploads before a
/// save, and what becomes of their failures.
@Suite(.timeLimit(.minutes(3))) struct SyncEngineAssetTests {
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
}
