import CloudStore
import CloudStoreServer
import CloudStoreTesting
import Foundation
import Testing

@Suite("Mirroring: a fetch from scratch after the server purged tombstones")
struct MirroringRefetchTests {
    /// A device whose zone token is older than the server's purged tombstones fetches the zone from
    /// scratch; what it does not see again was deleted elsewhere and goes, what it still has to
    /// upload stays.
    @Test func refetch_removesSettledObjectsTheServerNoLongerHasAndKeepsPendingOnes() async throws {
        let clock = ManualClock()
        let server = try await TestServer.start(limits: ServerLimits(tombstoneHorizon: 30 * 24 * 3600), clock: clock)
        let a = try await TestDevice.make("A", server: server.baseURL)
        let b = try await TestDevice.make("B", server: server.baseURL)
        do {
            let kept = Note(title: "kept")
            let deleted = Note(title: "deleted on A")
            try await a.write { context in
                try context.insert(kept)
                try context.insert(deleted)
            }
            try await a.sync()
            try await b.sync()
            #expect(try b.notes().map(\.title) == ["deleted on A", "kept"])

            try await a.write { try $0.delete(deleted) }
            try await a.sync()
            try await b.write { try $0.insert(Note(title: "new on B, not sent")) }
            clock.advance(by: 31 * 24 * 3600)

            try await b.container.fetchChanges()
            #expect(try b.notes().map(\.title) == ["kept", "new on B, not sent"])
            #expect(try await b.container.status().hasNothingToUpload == false, "B's new note still goes up")
        } catch {
            await a.close()
            await b.close()
            try await server.shutdown()
            throw error
        }
        await a.close()
        await b.close()
        try await server.shutdown()
    }
}
