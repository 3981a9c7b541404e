import CloudStoreTesting
import CloudStoreWire
import Foundation
import Logging
import PostgresNIO
import Testing

@testable import CloudStoreServer

/// The PostgreSQL backend looks a batch of records up by name through a unique index on the
/// record's key, whatever the planner's statistics say about the zone
/// (``PostgresStorage/lookup(_:_:named:)``).
@Suite(
    "PostgreSQL: a batch is looked up by key, not by scanning its zone", .serialized,
    .enabled(
        if: Backend.postgresURL != nil,
        "set CLOUDSTORE_TEST_POSTGRES_URL (bash .ci/run does) to run these"))
struct PostgresRecordLookupTests {
    /// A zone the statistics do not know (the table was analyzed before it grew): the lookup's
    /// plan goes through `cloudstore_record_by_key` and reads only the rows asked for. (The misplan
    /// it replaces, a scan of the zone through `cloudstore_record_by_type` with the names as a
    /// filter, showed on the benchmark's database, 1.1 million records in 33 partitions; this
    /// smaller table does not reproduce it, so the test pins the plan instead.)
    @Test func aBatchOfAZoneTheStatisticsDoNotKnow_isReadThroughTheKeyIndex() async throws {
        try await Backend.withFreshSchema { url in
            try await TestServer.with(storage: .postgres(url: url)) { server in
                let client = CloudClient(baseURL: server.baseURL)
                try await client.createZone("Notes")
                _ = try await client.save((0..<200).map { note("N-\($0)") })
            }
            try await Self.withConnection(to: url) { storage, connection in
                let record = storage.table("record")
                // Statistics of a table of other users' zones (32 of 1,000 records), then 20,000
                // records more in this zone, unknown to them.
                try await storage.run(
                    PostgresQuery(
                        unsafeSQL: """
                            INSERT INTO \(record) (partition_id, zone, name, type, seq, content)
                            SELECT 1000 + p, 'Notes', 'O-' || g, 'Note', g, '{}'
                            FROM generate_series(1, 32) AS p, generate_series(1, 1000) AS g
                            """), on: connection)
                try await storage.run(PostgresQuery(unsafeSQL: "ANALYZE \(record)"), on: connection)
                try await storage.run(
                    PostgresQuery(
                        unsafeSQL: """
                            INSERT INTO \(record) (partition_id, zone, name, type, seq, content)
                            SELECT partition_id, zone, 'M-' || g || '-' || name, type, 1000 + g, content
                            FROM \(record), generate_series(1, 100) AS g WHERE partition_id < 1000
                            """), on: connection)
                var partitionID: Int64 = 0
                for try await id in try await storage.run(
                    "SELECT DISTINCT partition_id FROM \(unescaped: record) WHERE partition_id < 1000",
                    on: connection
                )
                .decode(Int64.self) {
                    partitionID = id
                }
                let names =
                    ["N-1", "N-7", "M-3-N-5", "missing"] + (0..<196).map { "M-\($0 % 100 + 1)-N-\($0)" }
                let lookup = storage.lookup(partitionID, "Notes", named: names)
                var found: [String] = []
                for try await (name, _, _, _, _) in try await storage.run(lookup, on: connection)
                    .decode((String, String, Int64, Int64?, String?).self)
                {
                    found.append(name)
                }
                #expect(found.count == 199 && found.contains("M-3-N-5") && !found.contains("missing"))
                let explain = PostgresQuery(
                    unsafeSQL: "EXPLAIN (ANALYZE, COSTS OFF) " + lookup.sql, binds: lookup.binds)
                var plan: [String] = []
                for try await line in try await storage.run(explain, on: connection).decode(String.self) {
                    plan.append(line)
                }
                let text = plan.joined(separator: "\n")
                #expect(text.contains("cloudstore_record_by_key"), "\(text)")
                #expect(!text.contains("Rows Removed by Filter"), "\(text)")
            }
        }
    }

    /// The key computed here is the key the index holds: `recordKeySQL` of a stored row.
    @Test func theKeyComputedHere_isTheIndexedExpression() async throws {
        try await Backend.withFreshSchema { url in
            let zone = "Zone: with spaces / and ünïcode"
            try await TestServer.with(storage: .postgres(url: url)) { server in
                let client = CloudClient(baseURL: server.baseURL)
                try await client.createZone(zone)
                _ = try await client.save(zone, [note("name:with:separators")])
            }
            try await Self.withConnection(to: url) { storage, connection in
                let sql =
                    "SELECT partition_id, zone, name, \(PostgresStorage.recordKeySQL) FROM \(storage.table("record"))"
                var rows = 0
                for try await (partition, zone, name, key) in try await storage.run(
                    PostgresQuery(unsafeSQL: sql), on: connection
                )
                .decode((Int64, String, String, String).self) {
                    #expect(PostgresStorage.recordKey(partition, zone, name) == key)
                    rows += 1
                }
                #expect(rows == 1)
            }
        }
    }

    /// Runs `body` with the storage of the schema `url` names and one of its connections; what
    /// PostgreSQL refuses is recorded with its message (PostgresNIO's error hides it).
    static func withConnection(
        to url: String, _ body: @escaping @Sendable (PostgresStorage, PostgresConnection) async throws -> Void
    ) async throws {
        let storage = try PostgresStorage(
            url: url, logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { await storage.client.run() }
            defer { group.cancelAll() }
            do {
                try await storage.client.withConnection { connection in try await body(storage, connection) }
            } catch let error as PSQLError {
                Issue.record("PostgreSQL refused: \(error.serverInfo?[.message] ?? "\(error.code)")")
            }
        }
    }
}

/// The statements of `records/modify` and `changes/zone` are prepared once per connection with
/// unqualified table names (PostgresStatements.swift); each server's connections find its own
/// schema through `search_path`.
@Suite(
    "PostgreSQL: prepared statements stay in their server's schema", .serialized,
    .enabled(
        if: Backend.postgresURL != nil,
        "set CLOUDSTORE_TEST_POSTGRES_URL (bash .ci/run does) to run these"))
struct PostgresPreparedStatementTests {
    /// Two servers on two schemas of one database write the same record names with different
    /// titles, more times than PostgreSQL runs a prepared statement before it may plan it once for
    /// all values (5): each server reads back only its own writes, in every page.
    @Test func twoSchemasOfOneDatabase_keepTheirRecordsApart() async throws {
        try await Backend.withFreshSchema { first in
            try await Backend.withFreshSchema { second in
                try await TestServer.with(storage: .postgres(url: first)) { one in
                    try await TestServer.with(storage: .postgres(url: second)) { two in
                        let clients = [("one", CloudClient(baseURL: one.baseURL)), ("two", CloudClient(baseURL: two.baseURL))]
                        for (_, client) in clients { _ = try await client.createZone("Notes") }
                        for batch in 0..<8 {
                            for (server, client) in clients {
                                _ = try await client.save((0..<3).map { note("N-\(batch)-\($0)", title: "\(server) \(batch)") })
                            }
                        }
                        for (server, client) in clients {
                            let changes = try await client.allZoneChanges(limit: 5)
                            #expect(changes.pages == 5)
                            #expect(changes.records.count == 24)
                            #expect(Set(changes.records.map(\.recordName)).count == 24)
                            #expect(
                                changes.records.allSatisfy {
                                    if case .string(let title)? = $0.fields["title"] { title.hasPrefix(server) } else { false }
                                })
                            let first = try #require(changes.records.first { $0.recordName == "N-0-0" })
                            let updated = try await client.save(
                                [note("N-0-0", title: "\(server) again", tag: first.recordChangeTag)], .update)
                            #expect(updated.first?.fields["title"] == .string("\(server) again"))
                        }
                    }
                }
            }
        }
    }
}
