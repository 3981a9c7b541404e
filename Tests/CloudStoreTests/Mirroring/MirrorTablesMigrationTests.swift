@testable import CloudStore
import CloudStoreSync
import CloudStoreTesting
import Foundation
import GRDB
import Testing

/// A store written by the previous mirroring core (Fixtures/LegacyMirror: an upload folded but not
/// sent, and history the old core had not folded yet) migrates once when a container opens it, and
/// every one of its changes reaches a second device.
@Suite("Mirroring: a store written by the previous core migrates and loses nothing", .serialized)
struct MirrorTablesMigrationTests {
    static let fixture = RepositoryPaths.root.appendingPathComponent("Tests/CloudStoreTests/Fixtures/LegacyMirror")
    static let container = "iCloud.legacy.notes"
    static let n1 = UUID(uuidString: "A0000000-0000-0000-0000-000000000001")!
    static let n2 = UUID(uuidString: "A0000000-0000-0000-0000-000000000002")!
    static let n3 = UUID(uuidString: "A0000000-0000-0000-0000-000000000003")!
    static let n4 = UUID(uuidString: "A0000000-0000-0000-0000-000000000004")!
    static let tag = UUID(uuidString: "70000000-0000-0000-0000-000000000001")!

    @Test func everyChangeOfALegacyStoreReachesASecondDevice() async throws {
        let directory = try TemporaryDirectory()
        let data = directory.file("server")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            at: Self.fixture.appendingPathComponent("A.sqlite"), to: directory.file("A.sqlite"))
        try FileManager.default.copyItem(
            at: Self.fixture.appendingPathComponent("server/\(Self.container).sqlite"),
            to: data.appendingPathComponent("\(Self.container).sqlite"))
        try await ServerProcess.with(users: TestServer.defaultUsers, containers: [Self.container], data: data) { server in
            let a = try await TestDevice.make("A", server: server.baseURL, directory: directory) {
                $0.server?.containerIdentifier = Self.container
            }
            // Before any sync: exactly the legacy store's unsent changes are pending, in the new layout.
            let pending = try await a.store.read { context in
                try Row.fetchAll(
                    context.db,
                    sql: "SELECT record_name, pending_upload FROM cloudstore_record_metadata WHERE pending_upload IS NOT NULL ORDER BY record_name"
                ).map { row -> String in
                    let name: String = row["record_name"]
                    let upload = try MirrorTables.decode(PendingUpload.self, row["pending_upload"])
                    switch upload {
                    case .delete: return "\(name) delete"
                    case .save(let full, let keys): return "\(name) \(full ? "whole" : keys.keys.sorted().joined(separator: ","))"
                    }
                }
            }
            #expect(
                pending == [
                    "A0000000-0000-0000-0000-000000000001 body",
                    "A0000000-0000-0000-0000-000000000002 title",
                    "A0000000-0000-0000-0000-000000000003 delete",
                    "A0000000-0000-0000-0000-000000000004 whole",
                    "Note.tags.A0000000-0000-0000-0000-000000000002.70000000-0000-0000-0000-000000000001 whole",
                ])
            let leftovers = try await a.store.read { context in
                (
                    try context.db.tableExists("cloudstore_mirror_record"),
                    try context.db.tableExists("cloudstore_mirror_pending_reference"),
                    try Int.fetchOne(
                        context.db, sql: "SELECT count(*) FROM cloudstore_mirror_state WHERE key IN ('exported_through', 'zone_saved')"),
                    try Ledger(context.db).primaryZone()?.serverState
                )
            }
            #expect(leftovers == (false, false, 0, .saved), "the old layout is gone; its zone_saved flag is the primary zone's state")
            #expect(await a.container.mirror.engine?.state.pendingRecordZoneChanges.isEmpty == true)

            try await a.container.waitUntilSynced(timeout: .seconds(30))
            let b = try await TestDevice.make("B", server: server.baseURL) { $0.server?.containerIdentifier = Self.container }
            try await b.sync()
            let notes = Dictionary(uniqueKeysWithValues: try b.notes().map { ($0.id, $0) })
            #expect(notes[Self.n1]?.body == "body, unexported")
            #expect(notes[Self.n2]?.title == "edited and folded")
            #expect(notes[Self.n2]?.tags == [Self.tag])
            #expect(notes[Self.n3] == nil, "deleted")
            #expect(notes[Self.n4]?.title == "inserted, unexported")
            #expect(try b.contents() == a.contents())
            let state = try await a.store.read { try Ledger($0.db).state(.engineState) }.map { String(decoding: $0, as: UTF8.self) }
            #expect(state?.contains("\"pendingRecordZoneChanges\":[]") == true, "the saved engine state lists no record changes: \(state ?? "none")")
            await a.close()
            await b.close()
        }
    }
}
