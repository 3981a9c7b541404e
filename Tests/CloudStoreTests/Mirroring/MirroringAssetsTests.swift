@testable import CloudStore
import CloudStoreSync
import CloudStoreTesting
import CloudStoreWire
import Foundation
import Testing

/// Attributes with external storage sync as assets through a real `cloudstore serve` process:
/// the bytes are uploaded before the record, downloaded and verified before the row that names
/// them commits, never uploaded again while unchanged, and freed on every side once nothing
/// names them.
@Suite("Mirroring: external storage travels as assets", .serialized)
struct MirroringAssetsTests {
    static func bytes(_ count: Int, seed: UInt8) -> Data {
        Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) })
    }

    static func device(
        _ name: String, _ server: URL, uploads: FaultInjectingDatabase.Box? = nil
    ) async throws -> TestDevice {
        try await TestDevice.make(
            name, schema: Schema.notesWithExternalAttachments(), server: server, logger: .quiet
        ) { options in
            // Assets go through the private database's engine (the shared one has no zones here).
            options.configureEngine = uploads?.configureEngine
        }
    }

    static func files(of device: TestDevice) -> Set<String> {
        let directory = device.store.url.path + "-external"
        return Set((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).subtracting([".transfers"])
    }

    static func fileName(_ bytes: Data) -> String {
        var checksum = AssetChecksum()
        checksum.update(bytes)
        return AssetChecksum.fileName(of: checksum.base64)!
    }

    @Test func anAttachmentArrivesByteIdenticalAndIsNotUploadedAgainWhileUnchanged() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let uploads = FaultInjectingDatabase.Box()
            let a = try await Self.device("A", server.baseURL, uploads: uploads)
            let b = try await Self.device("B", server.baseURL)
            let photo = Self.bytes(3 << 20, seed: 1)
            var note = Note(title: "Photo", attachment: photo)
            let inserted = note
            try await a.write { try $0.insert(inserted) }
            try await a.sync()
            #expect(uploads.database?.requestCount(.assetsUpload) == 1)

            try await b.sync()
            #expect(try b.note(note.id)?.attachment == photo)
            #expect(Self.files(of: b) == [Self.fileName(photo)])

            // The server's record carries the asset, not the bytes.
            let admin = HTTPCloudDatabase(
                baseURL: server.baseURL, container: TestDevice.containerIdentifier, token: "alice-token", deviceID: "check")
            let stored = try await admin.lookupRecords(
                RecordsLookupRequest(zoneID: ZoneID(zoneName: "Notes"), recordNames: [note.id.uuidString]))
            guard case .value(let record)? = stored.records.first, case .asset(let asset)? = record.fields["attachment"] else {
                Issue.record("the server's record should hold an ASSETID field")
                return
            }
            #expect(asset.size == Int64(photo.count))
            #expect(asset.downloadURL != nil)

            // Another field changes: the asset goes back as checksum and size, no upload.
            note.title = "Renamed"
            let renamed = note
            try await a.write { try $0.update(renamed) }
            try await a.sync()
            #expect(uploads.database?.requestCount(.assetsUpload) == 1)
            try await b.sync()
            #expect(try b.note(note.id)?.title == "Renamed")
            #expect(try b.note(note.id)?.attachment == photo)
            await a.close()
            await b.close()
        }
    }

    @Test func replacingAndDeletingFreesTheOldBytesOnEveryDevice() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let a = try await Self.device("A", server.baseURL)
            let b = try await Self.device("B", server.baseURL)
            let first = Self.bytes(200_000, seed: 2), second = Self.bytes(300_000, seed: 3)
            var note = Note(title: "Doc", attachment: first)
            let inserted = note
            try await a.write { try $0.insert(inserted) }
            try await a.sync()
            try await b.sync()
            #expect(Self.files(of: b) == [Self.fileName(first)])

            note.attachment = second
            let replaced = note
            try await a.write { try $0.update(replaced) }
            #expect(Self.files(of: a) == [Self.fileName(second)])
            try await a.sync()
            try await b.sync()
            #expect(try b.note(note.id)?.attachment == second)
            #expect(Self.files(of: b) == [Self.fileName(second)])

            try await a.write { try $0.delete(Note.self, id: replaced.id) }
            try await a.sync()
            try await b.sync()
            #expect(try b.note(note.id) == nil)
            #expect(Self.files(of: a).isEmpty)
            #expect(Self.files(of: b).isEmpty)
            await a.close()
            await b.close()
        }
    }

    /// Both devices replace the same attachment: the policy (server wins) picks A's, the log keeps
    /// B's checksum and size, and B's losing bytes are freed once nothing names them.
    @Test func aConflictOnAnAttachmentFollowsThePolicyAndLogsTheLoser() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let a = try await Self.device("A", server.baseURL)
            let b = try await Self.device("B", server.baseURL)
            let original = Self.bytes(10_000, seed: 6), fromA = Self.bytes(20_000, seed: 7), fromB = Self.bytes(30_000, seed: 8)
            let note = Note(title: "Shared", attachment: original)
            try await a.write { try $0.insert(note) }
            try await a.sync()
            try await b.sync()
            var editedA = note, editedB = note
            editedA.attachment = fromA
            editedB.attachment = fromB
            let (changedA, changedB) = (editedA, editedB)
            try await a.write { try $0.update(changedA) }
            try await b.write { try $0.update(changedB) }
            try await a.sync()
            try await b.sync()
            try await a.sync()

            #expect(try b.note(note.id)?.attachment == fromA)
            #expect(try a.note(note.id)?.attachment == fromA)
            let log = try b.container.conflicts()
            #expect(log.count == 1)
            #expect(log.first?.property == "attachment")
            var checksum = AssetChecksum()
            checksum.update(fromB)
            #expect(log.first?.losingValue == .externalData(ExternalData(checksum: checksum.base64, size: 30_000)))
            #expect(Self.files(of: b) == [Self.fileName(fromA)])
            await a.close()
            await b.close()
        }
    }

    /// B's edit of another field conflicts with A's new attachment: B merges the server's copy,
    /// whose bytes the engine downloaded with the conflict, and holds A's file at once.
    @Test func aConflictMergesTheServersAttachmentWithItsBytes() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let a = try await Self.device("A", server.baseURL)
            let b = try await Self.device("B", server.baseURL)
            let note = Note(title: "Shared", attachment: Self.bytes(10_000, seed: 1))
            try await a.write { try $0.insert(note) }
            try await a.sync()
            try await b.sync()
            var editedA = note, editedB = note
            editedA.attachment = Self.bytes(20_000, seed: 2)
            editedB.title = "Renamed on B"
            let (changedA, changedB) = (editedA, editedB)
            try await a.write { try $0.update(changedA) }
            try await a.sync()
            try await b.write { try $0.update(changedB) }
            try await b.sync()
            #expect(try b.note(note.id)?.attachment == editedA.attachment, "B reads A's attachment after merging")
            #expect(try b.note(note.id)?.title == "Renamed on B")
            #expect(Self.files(of: b) == [Self.fileName(editedA.attachment!)])
            try await a.sync()
            #expect(try a.note(note.id)?.title == "Renamed on B")
            await a.close()
            await b.close()
        }
    }

    @Test func aMissingLocalFileFailsOnlyItsObjectAndTheRestSyncs() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let a = try await Self.device("A", server.baseURL)
            let b = try await Self.device("B", server.baseURL)
            let lost = Self.bytes(1000, seed: 4)
            let broken = Note(title: "Broken", attachment: lost)
            let fine = Note(title: "Fine", attachment: Self.bytes(2000, seed: 5))
            try await a.write { context in
                try context.insert(broken)
                try context.insert(fine)
            }
            try FileManager.default.removeItem(
                atPath: a.store.url.path + "-external/" + Self.fileName(lost))
            try? await a.sync()
            try await b.sync()
            #expect(try b.note(fine.id)?.attachment == fine.attachment)
            #expect(try b.note(broken.id) == nil)
            await a.close()
            await b.close()
        }
    }
}
