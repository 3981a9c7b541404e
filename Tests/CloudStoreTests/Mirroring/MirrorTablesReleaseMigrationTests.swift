@testable import CloudStore
import CloudStoreSync
import CloudStoreTesting
import Foundation
import GRDB
import Testing

/// Stores the release before the ledger wrote (Fixtures/ReleaseMirror) open with this version:
/// their tables migrate once, each fact they kept under a state key moves to its one home (the
/// primary zone's row, the last failure with its code), and they sync: unsent changes go up, a
/// share goes on, a decision the app was asked for is still asked.
@Suite("Mirroring: stores of the release before open, migrate and sync", .serialized)
struct MirrorTablesReleaseMigrationTests {
    static let fixture = RepositoryPaths.root.appendingPathComponent("Tests/CloudStoreTests/Fixtures/ReleaseMirror")
    static let container = "iCloud.release.notes"
    static let users = ["alice-token": "_alice", "bob-token": "_bob", "carol-token": "_carol"]
    static func id(_ prefix: String, _ n: Int) -> UUID { UUID(uuidString: "\(prefix)-0000-0000-0000-\(String(format: "%012d", n))")! }

    /// Copies of the fixture's stores and server file in a directory of their own.
    static func copy() throws -> (TemporaryDirectory, URL) {
        let directory = try TemporaryDirectory()
        let data = directory.file("server")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        for name in ["A", "C2"] {
            try FileManager.default.copyItem(at: fixture.appendingPathComponent("\(name).sqlite"), to: directory.file("\(name).sqlite"))
        }
        try FileManager.default.copyItem(
            at: fixture.appendingPathComponent("server/\(container).sqlite"), to: data.appendingPathComponent("\(container).sqlite"))
        return (directory, data)
    }

    static func device(_ name: String, token: String, server: TestServer, directory: TemporaryDirectory? = nil) async throws -> TestDevice {
        try await TestDevice.make(
            name, schema: Schema.notes(), server: server.baseURL, containerIdentifier: container, token: token, directory: directory)
    }

    @Test func aliceStore_migratesKeepsItsFactsOnceAndSyncsEverything() async throws {
        let (directory, data) = try Self.copy()
        // Read-only inspection needs a container to bring the store up to date first.
        let inspected = try PersistentStore(inspecting: directory.file("A.sqlite"), schema: Schema.notes())
        let old = #expect(throws: StoreError.self) { try PersistentCloudContainer.status(of: inspected) }
        #expect(old?.code == .needsUpgrade)
        try inspected.close()

        try await TestServer.with(users: Self.users, containers: [Self.container], storage: .sqlite(directory: data)) { server in
            let a = try await Self.device("A", token: "alice-token", server: server, directory: directory)
            let status = try await a.container.status()
            #expect(status.pendingUploads == 3, "the edit, the insert and the delete")
            #expect(status.lastError?.message == "the server could not be reached")
            #expect(status.lastError?.date == Date(timeIntervalSince1970: 1_700_000_000))
            let (migrations, primary, trip, keys) = try await a.store.read { context in
                let ledger = Ledger(context.db)
                return (
                    try String.fetchAll(context.db, sql: "SELECT identifier FROM grdb_migrations ORDER BY identifier"),
                    try ledger.primaryZone(), try ledger.sharedZones().first,
                    try String.fetchAll(context.db, sql: "SELECT key FROM cloudstore_mirror_state ORDER BY key")
                )
            }
            #expect(migrations == ["mirror-1", "mirror-2-zone-rows"])
            #expect(primary?.zoneID == ZoneID(zoneName: "Notes") && primary?.serverState == .saved && primary?.decision == nil)
            #expect(trip?.role == .ownedShare && trip?.serverState == .saved)
            #expect(!keys.contains("primary_zone") && !keys.contains("primary_zone_name") && !keys.contains("last_error_date"))

            try await a.container.waitUntilSynced(timeout: .seconds(30))
            #expect(try await a.container.status().lastError == nil, "past once an import and an export succeeded")
            let fresh = try await Self.device("A2", token: "alice-token", server: server)
            try await fresh.sync()
            let notes = Dictionary(uniqueKeysWithValues: try fresh.notes().map { ($0.id, $0) })
            #expect(notes[Self.id("A0000000", 1)]?.tags == [Self.id("70000000", 1)])
            #expect(notes[Self.id("A0000000", 2)]?.title == "edited, unsent")
            #expect(notes[Self.id("A0000000", 3)] == nil, "deleted")
            #expect(notes[Self.id("A0000000", 6)]?.title == "inserted, unsent")
            #expect(try fresh.contents() == a.contents())

            // The share made by the release before goes on: a device of bob's sees the trip's note.
            let guid = try #require(try a.container.shares().first?.shortGUID)
            let bob = try await Self.device("B2", token: "bob-token", server: server)
            _ = try await bob.container.acceptShare(shortGUID: guid)
            #expect(try bob.notes().map(\.title) == ["in the trip"])
            for device in [a, fresh, bob] { await device.close() }
        }
    }

    @Test func carolStore_stillAsksTheAppAndSyncsOnceItDecides() async throws {
        let (directory, data) = try Self.copy()
        try await TestServer.with(users: Self.users, containers: [Self.container], storage: .sqlite(directory: data)) { server in
            let c2 = try await Self.device("C2", token: "carol-token", server: server, directory: directory)
            let decision = try #require(try await c2.container.status().localDataDecision)
            #expect(decision.reason == .zoneDeleted && decision.unsentChanges == 1)
            let waiting = await #expect(throws: ContainerError.self) { try await c2.container.sync() }
            #expect(waiting?.code == .localDataDecisionNeeded)
            let primary = try await c2.store.read { try Ledger($0.db).primaryZone() }
            #expect(primary?.decision?.reason == .zoneDeleted && primary?.serverState == .missing)

            try await c2.container.decide(.uploadAgain)
            try await c2.container.waitUntilSynced(timeout: .seconds(30))
            let fresh = try await Self.device("C3", token: "carol-token", server: server)
            try await fresh.sync()
            #expect(try fresh.notes().map(\.title) == ["carol's", "carol's unsent"])
            for device in [c2, fresh] { await device.close() }
        }
    }
}
