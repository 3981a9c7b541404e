@testable import CloudStore
import CloudStoreTesting
import Foundation
import Testing

/// A device whose upload the server applied but whose answer was lost, and that edits the same
/// field again before it retries. Its retry used to meet its own earlier value as a conflict, which
/// serverWins kept, logging the later edit as lost.
@Suite("Mirroring: an upload whose answer was lost")
struct MirroringLostAnswerTests {
    /// Runs `body` with a `cloudstore serve` child, a fault proxy in front of it and device A
    /// behind the proxy; closes A and the proxy afterwards.
    func withDeviceBehindAProxy(
        _ body: (_ serverURL: URL, _ proxy: FaultProxy, _ a: TestDevice) async throws -> Void
    ) async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let serverURL = server.baseURL
            let proxy = try await FaultProxy.start { serverURL }
            let a = try await TestDevice.make("A", server: proxy.baseURL)
            do {
                try await body(serverURL, proxy, a)
            } catch {
                await a.close()
                await proxy.shutdown()
                throw error
            }
            await a.close()
            await proxy.shutdown()
        }
    }

    /// Sends A's pending uploads with the answer dropped: the server applies them, A never hears.
    func sendUnheard(_ a: TestDevice, through proxy: FaultProxy) async {
        proxy.inject(.dropResponse, into: .recordsModify)
        await #expect(throws: (any Error).self) { try await a.container.sendChanges() }
    }

    @Test func aLaterEditOfTheSameFieldAfterALostAnswer_winsOverTheDevicesOwnEarlierValue() async throws {
        try await withDeviceBehindAProxy { serverURL, proxy, a in
            let note = Note(title: "first")
            try await a.write { try $0.insert(note) }
            try await a.sync()
            try await a.edit(note) { $0.title = "second" }
            await sendUnheard(a, through: proxy)
            try await a.edit(note) { $0.title = "third" }
            try await a.container.waitUntilSynced(timeout: .seconds(30))
            let b = try await TestDevice.make("B", server: serverURL)
            try await b.sync()
            // The retry meets the device's own earlier value: not a conflict, the later edit wins.
            #expect(try a.note(note.id)?.title == "third")
            #expect(try a.container.conflicts().isEmpty)
            #expect(try b.note(note.id)?.title == "third")
            await b.close()
        }
    }

    /// Found by the convergence soak: a new object whose upload landed unheard (the device was killed
    /// in the soak) and that was then deleted counted as never uploaded, so its delete stayed on the
    /// device and the object came back everywhere.
    @Test func anObjectCreatedUnheardThenDeleted_isDeletedOnTheServer() async throws {
        try await withDeviceBehindAProxy { serverURL, proxy, a in
            try await a.sync()
            let note = Note(title: "short-lived")
            try await a.write { try $0.insert(note) }
            await sendUnheard(a, through: proxy)
            try await a.write { try $0.delete(Note.self, id: note.id) }
            try await a.container.waitUntilSynced(timeout: .seconds(30))
            let b = try await TestDevice.make("B", server: serverURL)
            try await b.sync()
            #expect(try b.notes().isEmpty, "the delete reached the server")
            #expect(try a.notes().isEmpty, "and the object did not come back")
            await b.close()
        }
    }

    /// A retry that finds this device's own write applied, with another device's later edit of
    /// another field on top: the retry meets a CONFLICT, and the merge brings the other device's
    /// edit here, so this device's next edit of that field builds on it instead of overwriting it
    /// unseen. (When the server's copy holds every value sent, the engine counts the conflict as
    /// saved; ``MirrorWriteAcknowledgeTests`` covers that acknowledgement.)
    @Test func aRetryThatFindsItsOwnWriteApplied_takesAnotherDevicesLaterEdit() async throws {
        try await withDeviceBehindAProxy { serverURL, proxy, a in
            let b = try await TestDevice.make("B", server: serverURL)
            var note = Note(title: "t0")
            note.body = "b0"
            try await a.write { [note] in try $0.insert(note) }
            try await a.sync()
            try await b.sync()

            var onA = note
            onA.title = "A's title"
            try await a.write { [onA] in try $0.update(onA) }
            await sendUnheard(a, through: proxy)

            try await b.sync()
            var onB = try #require(try b.note(note.id))
            #expect(onB.title == "A's title")
            onB.body = "B's body"
            try await b.write { [onB] in try $0.update(onB) }
            try await b.sync()

            try await a.sync()  // the retry: CONFLICT, and the server holds what A sent
            #expect(try a.note(note.id)?.body == "B's body", "the acknowledgement brings B's edit")
            onA = try #require(try a.note(note.id))
            onA.body = onA.body! + ", then A's"
            try await a.write { [onA] in try $0.update(onA) }
            try await a.sync()
            try await b.sync()
            #expect(try b.note(note.id)?.body == "B's body, then A's")
            #expect(try a.container.conflicts().isEmpty && b.container.conflicts().isEmpty)
            #expect(try a.contents() == b.contents())
            await b.close()
        }
    }

    /// The convergence soak's lost update (seed 900003): a device's create landed on the server
    /// unheard (it was killed in the soak), another device deleted the record, and the device,
    /// editing its note, sent the create again. The server took it over the tombstone and the note
    /// came back everywhere with the device's title: the deletion, and the other devices' edits
    /// before it, were gone without a trace. Now the create waits for a fetch, which brings the
    /// tombstone: the deletion wins and the edit is logged as lost.
    @Test func aCreateWhoseAnswerWasLost_isNotBroughtBackAfterAnotherDeviceDeletedIt() async throws {
        try await withDeviceBehindAProxy { serverURL, proxy, a in
            let b = try await TestDevice.make("B", server: serverURL)
            try await a.sync()
            var note = Note(title: "created unheard")
            try await a.write { [note] in try $0.insert(note) }
            await sendUnheard(a, through: proxy)

            try await b.sync()
            #expect(try b.notes().map(\.title) == ["created unheard"])
            try await b.write { [note] in try $0.delete(note) }
            try await b.sync()

            note.title = "edited after the create"
            try await a.write { [note] in try $0.update(note) }
            try await a.sync()
            try await b.sync()
            #expect(try b.notes().isEmpty, "the deleted note did not come back")
            #expect(try a.notes().isEmpty, "the deletion reached the device whose create was unheard")
            let log = try a.container.conflicts()
            #expect(log.map(\.property).contains("title"), "the edit that lost to the deletion is logged: \(log)")
            #expect(log.first { $0.property == "title" }?.losingValue == "edited after the create")
            await b.close()
        }
    }

    /// The same create, unheard, is then deleted on the device itself before any fetch: the fetch
    /// brings the device's own create, which does not bring the object back; the delete goes up.
    @Test func aCreateWhoseAnswerWasLost_thenDeletedHere_staysDeleted() async throws {
        try await withDeviceBehindAProxy { serverURL, proxy, a in
            try await a.sync()
            let note = Note(title: "short-lived")
            try await a.write { try $0.insert(note) }
            await sendUnheard(a, through: proxy)
            try await a.write { try $0.delete(Note.self, id: note.id) }
            try await a.container.fetchChanges()
            #expect(try a.notes().isEmpty, "the device's own create does not undo its delete")
            #expect(try a.container.conflicts().isEmpty)
            try await a.container.waitUntilSynced(timeout: .seconds(30))
            let b = try await TestDevice.make("B", server: serverURL)
            try await b.sync()
            #expect(try b.notes().isEmpty)
            await b.close()
        }
    }

    /// Found by the soak after the engine began preparing the next batch while one is in flight:
    /// that second ask found every pending upload in flight and cleared the engine's "more may be
    /// pending" flag, so when the request in flight failed, no later send asked for its uploads.
    @Test func anEditWhoseRequestFailed_goesOnTheNextSend() async throws {
        try await withDeviceBehindAProxy { serverURL, proxy, a in
            var note = Note(title: "first")
            try await a.write { [note] in try $0.insert(note) }
            try await a.sync()
            note.title = "second"
            try await a.write { [note] in try $0.update(note) }
            proxy.inject(.dropRequest, into: .recordsModify)
            await #expect(throws: (any Error).self) { try await a.container.sendChanges() }
            #expect(try await a.container.status().pendingUploads == 1)
            try await a.container.sendChanges()
            #expect(try await a.container.status().pendingUploads == 0, "the failed edit went on the next send")
            let b = try await TestDevice.make("B", server: serverURL)
            try await b.sync()
            #expect(try b.note(note.id)?.title == "second")
            await b.close()
        }
    }
}
