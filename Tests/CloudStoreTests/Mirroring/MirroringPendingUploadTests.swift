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
                    let ledger = Ledger(context.db)
                    return (try ledger.state(.engineState)?.count ?? 0, try ledger.pendingCount())
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

    /// A plain store on a mirrored file (an app extension's, say) records its saves for upload
    /// in its own transactions, as the container does: nothing it writes goes unsent.
    @Test func aPlainStoreOnAMirroredFileRecordsItsSavesForUpload() async throws {
        let directory = try TemporaryDirectory()
        let a = try await TestDevice.make("A", server: nil, directory: directory) { $0.zoneName = "Mine" }
        try await a.write { try $0.insert(Note(title: "through the container")) }
        await a.close()

        let plain = try openStore(directory.file("A.sqlite"), try Schema.notes())
        defer { try? plain.close() }
        let note = Note(title: "from another writer")
        try await plain.write(author: "extension") { [note] in try $0.insert(note) }
        let pending = try await plain.read { context in try Ledger(context.db).find(note.id.uuidString) }
        #expect(try pending?.pendingUpload == .save(full: true, keys: try #require(try pending?.pendingUpload).changeDates))
        #expect(pending?.zone == .primary)
        #expect(try PersistentCloudContainer.status(of: plain).pendingUploads == 2)
    }

    /// One container mirrors a file at a time; the lock goes with the container.
    @Test func aSecondContainerOnTheSameFileIsRefusedUntilTheFirstCloses() async throws {
        let directory = try TemporaryDirectory()
        let server = URL(string: "http://127.0.0.1:9")!  // never contacted: nothing syncs here
        let first = try await TestDevice.make("A", server: server, directory: directory)
        do {
            let second = try await TestDevice.make("A", server: server, directory: directory)
            await second.close()
            Issue.record("a second container should be refused")
        } catch let error as ContainerError where error.code == .alreadyMirrored {
            #expect(error.message.contains(directory.file("A.sqlite").path))
            #expect(error.description.contains("plain PersistentStore"))
        }
        await first.close()
        let reopened = try await TestDevice.make("A", server: server, directory: directory)
        await reopened.close()
    }

    /// Through a real `cloudstore serve` and a second process: the process writes three notes into
    /// the mirrored file with a plain `PersistentStore` and exits without syncing; the container
    /// that mirrors the file notices the commits and sends them, and device B gets them.
    @Test func anotherProcessWritesAMirroredFile_andTheContainerSendsWhatItWrote() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let a = try await TestDevice.make("A", server: server.baseURL, automatic: true)
            try await a.write { try $0.insert(Note(title: "from A")) }
            try await a.container.waitUntilSynced()
            let events = a.container.events()

            let (child, output) = try TestHelperProcess.start([
                "write", a.store.url.path, RepositoryPaths.notesSchema.path, "3",
            ])
            #expect(await output.nextLine() == "done")
            _ = await child.waitForExit()
            // The container sends what the other process recorded, without being asked.
            let sent = try await withTimeout(seconds: 30) {
                var sent = 0
                for await event in events where event.kind == .export && event.phase == .ended {
                    sent += event.counts.saved
                    if sent >= 3 { break }
                }
                return sent
            }
            #expect(sent == 3)
            let b = try await TestDevice.make("B", server: server.baseURL)
            try await b.sync()
            #expect(try b.notes().map(\.title) == ["from A", "helper-0", "helper-1", "helper-2"])
            await a.close()
            await b.close()
        }
    }

    /// Through a real `cloudstore serve`: a note too large for the server is refused, the app
    /// shortens it, and the next upload succeeds, after which waitUntilSynced no longer throws.
    @Test func aRefusedUploadTheAppFixesNoLongerFailsWaitUntilSynced() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let a = try await TestDevice.make("A", server: server.baseURL)
            var note = Note(title: "large")
            // About 600 KB by the save's estimate, 1.2 MB once JSON escapes each quote: the
            // server refuses what the save let through.
            note.body = String(repeating: "\"", count: 600_000)
            try await a.write { [note] in try $0.insert(note) }
            let refused = await #expect(throws: ContainerError.self) {
                try await a.container.waitUntilSynced(timeout: .seconds(30))
            }
            guard let errors = refused?.refusedUploads, refused?.code == .uploadsRefused else {
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

    /// Through a real `cloudstore serve`: the server does not take a note's upload, answering its
    /// record with `THROTTLED` (retry after 30 s), then with `QUOTA_EXCEEDED` (no time given).
    /// The note's state counts the attempts with the last error and when the next one is due,
    /// `failedUploads()` and the status name it, and once the server takes it all of that is gone.
    @Test func anUploadTheServerDidNotTakeYet_countsItsAttemptsUntilItIsTaken() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let now = Date(timeIntervalSince1970: 1_800_000_000)
            let faults = FaultInjectingDatabase.Box()
            let a = try await TestDevice.make("A", server: server.baseURL) { options in
                options.storeConfiguration.now = { now }
                options.configureEngine = faults.configureEngine
            }
            try await a.sync()
            let database = try #require(faults.database)
            let note = Note(title: "waits")
            try await a.write { [note] in try $0.insert(note) }

            // One send each (a sync sends again after its fetch): a create the server did not
            // take goes again once a fetch covered it.
            database.inject(.recordError(.throttled, retryAfter: 30), into: .recordsModify)
            try await a.container.sendChanges()
            let first = try #require(try a.container.syncState(of: Note.self, id: note.id))
            let firstRetry = try #require(first.retry, "the server did not take the upload")
            #expect(firstRetry.error.code == .throttled && firstRetry.error.reason?.isEmpty == false)
            #expect(firstRetry.attempts == 1)
            #expect(firstRetry.nextAttempt == now.addingTimeInterval(30), "when it was answered plus the server's retryAfter")
            #expect(first.refusal == nil && first.pendingUpload != nil)
            #expect(try a.container.failedUploads() == [first])
            #expect(try a.container.refusedUploads().isEmpty, "not refused: it goes again by itself")
            let status = try await a.container.status()
            #expect(status.retryingUploads == 1 && status.pendingUploads == 1 && status.refusedUploads == 0)

            try await a.container.fetchChanges()
            database.inject(.recordError(.quotaExceeded), into: .recordsModify)
            try await a.container.sendChanges()
            let second = try #require(try a.container.syncState(of: Note.self, id: note.id)?.retry)
            #expect(second.error.code == .quotaExceeded)
            #expect(second.attempts == 2, "the attempts count up")
            #expect(second.nextAttempt == nil, "no retryAfter: with the next sync")
            #expect(try PersistentCloudContainer.failedUploads(in: a.store).map(\.retry) == [second])

            try await a.sync()
            let taken = try #require(try a.container.syncState(of: Note.self, id: note.id))
            #expect(taken.retry == nil && taken.isSynced)
            #expect(try a.container.failedUploads().isEmpty)
            #expect(try await a.container.status().retryingUploads == 0)
            await a.close()
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
            guard let failure = error?.failure, error?.code == .syncFailed else {
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
