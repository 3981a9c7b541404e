import CloudStoreTesting
import CloudStoreWire
import Foundation
import GRDB
import Testing

@testable import CloudStoreServer

/// A data directory written before sharing existed upgrades in place when the server starts on it.
@Suite("sharing: upgrading existing data")
struct ServerSharingMigrationTests {
    @Test func sqlite_aContainerFileFromBeforeSharingUpgradesInPlace() async throws {
        let directory = try TemporaryDirectory(prefix: "cloudstore-upgrade")
        defer { withExtendedLifetime(directory) {} }
        do {
            let pool = try DatabasePool(path: directory.file("iCloud.test.sqlite").path)
            try SQLiteStorage.migrator.migrate(pool, upTo: "v2-assets")
            try await pool.write { db in
                try db.execute(sql: "INSERT INTO cloudstore_partition (environment, scope, owner, db_seq) VALUES ('development', 'private', '_alice', 1)")
                try db.execute(sql: "INSERT INTO cloudstore_zone (partition_id, name, seq, db_seq, incarnation) VALUES (1, 'List', 1, 1, 1)")
                try db.execute(
                    sql: """
                        INSERT INTO cloudstore_record (partition_id, zone, name, type, seq, content)
                        VALUES (1, 'List', 'L-1', 'Note', 1, '{"created":{"timestamp":1},"fields":{},"modified":{"timestamp":1}}')
                        """)
            }
            try pool.close()
        }
        try await TestServer.with(storage: .sqlite(directory: directory.url)) { server in
            let alice = CloudClient(baseURL: server.baseURL)
            #expect(try await alice.lookup("List", ["L-1"]).first?.value != nil, "the data from before is there")
            let share = try await alice.share("List", [("_bob", .readOnly)])
            let bob = alice.asUser("bob-token")
            _ = try await bob.accept([try #require(share.share?.shortGUID)])
            #expect(try await bob.sharedZoneIDs() == [ZoneID(zoneName: "List", ownerRecordName: "_alice")])
        }
    }
}
