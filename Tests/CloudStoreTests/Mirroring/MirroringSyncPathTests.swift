@testable import CloudStore
@testable import CloudStoreSync
import CloudStoreTesting
import Foundation
import Synchronization
import Testing

/// What one save costs on its way to the server, counted: the calls between the sync engine and
/// the mirror (each an actor hop, and most a store transaction), and the store's write
/// transactions. With automatic sync, a saved note costs the mirror at most two calls before its
/// request leaves (the send's start, the batch) and one after (the answer with the send's end),
/// and at most two write transactions beyond the save (the batch marks what it hands out, the
/// answer settles it).
@Suite("Mirroring: the path of one save", .timeLimit(.minutes(ReliabilityRun.hangLimitMinutes)))
struct MirroringSyncPathTests {
    /// The counters of a device: its private engine's calls to the mirror and its store's commits.
    struct Counts: Equatable, CustomStringConvertible {
        var crossings: Int
        var writes: Int

        var description: String { "\(crossings) crossings, \(writes) writes" }
    }

    static func counts(_ engine: SyncEngine, _ store: PersistentStore) -> Counts {
        Counts(crossings: engine.delegateCalls.value, writes: store.committedUnitsOfWork.load(ordering: .relaxed))
    }

    /// Waits for the container's next export that ended having saved `saved` records.
    static func export(saving saved: Int, in events: inout AsyncStream<PersistentCloudContainer.Event>.Iterator) async throws {
        while let event = await events.next() {
            if event.kind == .export, event.phase == .ended, event.counts.saved == saved {
                #expect(event.succeeded, "the export failed: \(String(describing: event.error))")
                return
            }
        }
        Issue.record("the container's events ended before the export")
    }

    @Test func oneSavedNote_crossesAtMostTwiceBeforeItsRequestAndOnceAfter_withTwoWritesBeyondTheSave() async throws {
        try await TestServer.with { server in
            let faults = FaultInjectingDatabase.Box()
            let a = try await TestDevice.make("A", server: server.baseURL, automatic: true) { options in
                options.exportDebounce = .milliseconds(10)
                options.configureEngine = { configuration in
                    faults.configureEngine(&configuration)
                    // No fetch of its own write, and no other engine syncing by itself (the
                    // shared database's first fetch, say), so nothing but the send runs between
                    // the counts: the store's writes are counted whoever makes them.
                    configuration.listensForPush = false
                    configuration.pollInterval = nil
                    if configuration.database.scope != .private { configuration.automaticallySync = false }
                }
            }
            var events = a.container.events().makeAsyncIterator()
            let engine = try #require(await a.container.mirror.engine as? SyncEngine)
            let database = try #require(faults.database)

            // The first save also checks the account and saves the zone: not what is counted.
            try await a.write { try $0.insert(Note(title: "first")) }
            try await Self.export(saving: 1, in: &events)
            // And the engine's first fetch is done, however late a loaded machine runs it: a
            // fetch succeeded, so the scheduler asks for none until push or the app does.
            try await a.container.waitUntilSynced()

            let before = Self.counts(engine, a.store)
            let atRequest = Mutex<Counts?>(nil)
            database.observeRequests { operation in
                guard operation == .recordsModify else { return }
                atRequest.withLock { $0 = $0 ?? Self.counts(engine, a.store) }
            }
            try await a.write { try $0.insert(Note(title: "second")) }
            try await Self.export(saving: 1, in: &events)
            let after = Self.counts(engine, a.store)
            let request = try #require(atRequest.withLock { $0 }, "the note was not uploaded")

            #expect(request.crossings - before.crossings <= 2, "before the request: \(request.crossings - before.crossings)")
            #expect(after.crossings - request.crossings <= 1, "after the request: \(after.crossings - request.crossings)")
            #expect(after.writes - before.writes - 1 <= 2, "write transactions beyond the save: \(after.writes - before.writes - 1)")
            #expect(try await a.container.status().pendingUploads == 0)
            await a.close()
        }
    }
}
