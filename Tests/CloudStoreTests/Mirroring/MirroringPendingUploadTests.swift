@testable import CloudStore
import CloudStoreSync
import CloudStoreTesting
import Foundation
import GRDB
import Testing

/// The record metadata is the one queue of pending uploads: the sync engine's state does not grow
/// with it, nothing writes a mirrored store behind its back, and `waitUntilSynced()` tells the truth
/// about what the server refused or who it refused.
@Suite("Mirroring: pending uploads live in one place and waitUntilSynced tells the truth", .serialized)
struct MirroringPendingUploadTests {
    @Test func theEngineStateHasTheSameSizeWith10And10000PendingUploads() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let a = try await TestDevice.make("A", server: server.baseURL)
            try await a.write { try $0.insert(Note(title: "first")) }
            try await a.sync()

            func sizes() async throws -> (memory: Int, stored: Int, pending: Int) {
                let engine = try #require(await a.container.mirror.engine)
                let memory = try JSONEncoder().encode(engine.state.serialization).count
                let (stored, pending) = try await a.store.read { context in
                    (try context.db.mirrorState(.engineState)?.count ?? 0, try context.db.pendingUploadCount())
                }
                return (memory, stored, pending)
            }
            try await a.write { context in for index in 0..<10 { try context.insert(Note(title: "n\(index)")) } }
            try await a.container.fetchChanges()
            let ten = try await sizes()
            try await a.write { context in for index in 10..<10_000 { try context.insert(Note(title: "n\(index)")) } }
            try await a.container.fetchChanges()
            let tenThousand = try await sizes()
            #expect(ten.pending == 10 && tenThousand.pending == 10_000)
            #expect(ten.memory == tenThousand.memory, "the engine's state keeps tokens and zone bookkeeping only")
            #expect(ten.stored == tenThousand.stored)
            #expect(await a.container.mirror.engine?.state.pendingRecordZoneChanges.isEmpty == true)
            await a.close()
        }
    }

    @Test func aPlainStoreCannotWriteAMirroredStoreBehindItsBack() async throws {
        let directory = try TemporaryDirectory()
        let a = try await TestDevice.make("A", server: nil, directory: directory)
        try await a.write { try $0.insert(Note(title: "through the container")) }
        await a.close()

        let plain = try openStore(directory.file("A.sqlite"), try Schema.notes())
        defer { try? plain.close() }
        let error = storeError { try plain.write(author: "app") { try $0.insert(Note(title: "behind its back")) } }
        #expect(error?.code == .mirroredStore)
        #expect(error?.message.contains("PersistentCloudContainer") == true, "\(error?.message ?? "")")
        let titles = try await plain.read { try $0.fetch(Note.self) }.map(\.title)
        #expect(titles == ["through the container"], "reading is fine")
    }

    /// Through a real `cloudstore serve`: a note too large for the server is refused, the app
    /// shortens it, and the next upload succeeds, after which waitUntilSynced no longer throws.
    @Test func aRefusedUploadTheAppFixesNoLongerFailsWaitUntilSynced() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let a = try await TestDevice.make("A", server: server.baseURL)
            var note = Note(title: "large")
            note.body = String(repeating: "x", count: 1_500_000)
            try await a.write { [note] in try $0.insert(note) }
            let refused = await #expect(throws: ContainerError.self) {
                try await a.container.waitUntilSynced(timeout: .seconds(30))
            }
            guard case .uploadsRefused(let errors)? = refused else {
                Issue.record("expected uploadsRefused, got \(String(describing: refused))")
                return
            }
            #expect(errors.keys.sorted() == [note.id.uuidString])
            #expect(errors.values.first?.code == .limitExceeded)
            #expect(try await a.container.status().refusedUploads == 1)
            // The object's own state says the same, and the list of refused uploads names it.
            let refusedState = try #require(try a.container.syncState(of: Note.self, id: note.id))
            #expect(refusedState.refusal?.code == .limitExceeded)
            #expect(refusedState.refusal?.reason?.isEmpty == false)
            #expect(refusedState.pendingUpload == .save(keys: refusedState.pendingUpload.map(Self.keys) ?? [], wholeObject: true))
            #expect(refusedState.changeTag == nil && !refusedState.isSynced)
            #expect(refusedState.sharing.zoneID == a.container.zoneID && !refusedState.sharing.isShared)
            #expect(try a.container.refusedUploads() == [refusedState])

            note.body = "short now"
            try await a.write { [note] in try $0.update(note) }
            try await a.container.waitUntilSynced(timeout: .seconds(30))
            #expect(try await a.container.status().refusedUploads == 0)
            #expect(try a.container.refusedUploads().isEmpty)
            let synced = try #require(try a.container.syncState(of: Note.self, id: note.id))
            #expect(synced.isSynced && synced.refusal == nil && synced.serverModified != nil)

            let b = try await TestDevice.make("B", server: server.baseURL)
            try await b.sync()
            #expect(try b.notes().map(\.body) == ["short now"])

            note.title = "renamed"
            try await a.write { [note] in try $0.update(note) }
            let edited = try #require(try a.container.syncState(of: Note.self, id: note.id))
            #expect(edited.pendingUpload.map(Self.keys)?.contains("title") == true)
            #expect(edited.pendingUpload.map(Self.keys)?.contains("body") == false, "only what changed since the server's version")
            #expect(edited.changeTag == synced.changeTag)
            try await a.write { [note] in try $0.delete(note) }
            #expect(try a.container.syncState(of: Note.self, id: note.id)?.pendingUpload == .delete, "a delete waits to go up")
            try await a.sync()
            #expect(try a.container.syncState(of: Note.self, id: note.id) == nil, "nothing is known of it once deleted on the server")
            #expect(try a.container.syncState(entityName: "Folder", id: note.id) == nil, "not a folder")
            await a.close()
            await b.close()
        }
    }

    static func keys(_ upload: PersistentCloudContainer.ObjectSyncState.Upload) -> Set<String> {
        if case .save(let keys, _) = upload { return keys }
        return []
    }

    /// Through a real `cloudstore serve`: a token the server does not know makes waitUntilSynced
    /// throw the container's error, in the container's words, and keeps the pending upload.
    @Test func rejectedCredentialsThrowTheContainersError() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let a = try await TestDevice.make("A", server: server.baseURL, token: "not-a-known-token")
            try await a.write { try $0.insert(Note(title: "kept locally")) }
            let error = await #expect(throws: ContainerError.self) {
                try await a.container.waitUntilSynced(timeout: .seconds(30))
            }
            guard case .syncFailed(let failure)? = error else {
                Issue.record("expected syncFailed, got \(String(describing: error))")
                return
            }
            #expect(failure.code == .authenticationFailed)
            #expect("\(error!)".contains("rejected the container's credentials"), "\(error!)")
            let status = try await a.container.status()
            #expect(status.isSignedOut && status.pendingUploads == 1)
            await a.close()
        }
    }
}
