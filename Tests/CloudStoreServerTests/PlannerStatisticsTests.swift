import CloudStoreTesting
import CloudStoreWire
import Foundation
import Logging
import PostgresNIO
import Testing

@testable import CloudStoreServer

/// The PostgreSQL backend refreshes the planner's statistics of its record tables as they grow
/// (``PlannerStatistics``): without them, a batch looked up by name scanned the whole zone.
@Suite("PostgreSQL: the planner's statistics follow the record tables' growth")
struct PlannerStatisticsTests {
    /// Which of the writes of `counts`, in turn, refresh the statistics.
    static func refreshes(_ statistics: inout PlannerStatistics, _ counts: [Int]) -> [Bool] {
        counts.map { statistics.written($0) }
    }

    @Test func aNeverAnalyzedTable_isRefreshedAfterTheFirstThousandRowsThenEachTimeItMayHaveDoubled() {
        var statistics = PlannerStatistics()
        // 1,000 rows written; then 1,000 more (the statistics counted 1,000); then 2,000 more.
        let first = Self.refreshes(&statistics, [999, 1, 999, 1, 1_999, 1])
        #expect(first == [false, true, false, true, false, true])
        #expect(statistics.rowsAtRefresh == 4_000 && statistics.writtenSinceRefresh == 0)
        let load = Self.refreshes(&statistics, Array(repeating: 400, count: 250))
        #expect(load.filter { $0 }.count == 4, "104,000 rows: at 8,000, 16,000, 32,000, 64,000")
    }

    @Test func aTableAnalyzedBefore_waitsUntilAsManyRowsAsItsStatisticsCounted() {
        var statistics = PlannerStatistics(rowsAtRefresh: 50_000)
        #expect(Self.refreshes(&statistics, [49_999, 1]) == [false, true])
        #expect(PlannerStatistics(rowsAtRefresh: -1) == PlannerStatistics(), "PostgreSQL's -1: never analyzed")
    }

    /// A fresh schema, 4,000 notes saved through a real server: the server analyzed the record
    /// table as it grew, and a batch looked up by name goes through the primary key, not a scan of
    /// the zone (the plan without the refresh; checked by removing it).
    @Test(.enabled(if: Backend.postgresURL != nil, "set CLOUDSTORE_TEST_POSTGRES_URL (bash .ci/run does) to run this"))
    func afterABulkUpload_aBatchIsLookedUpThroughThePrimaryKey() async throws {
        let base = try #require(Backend.postgresURL)
        let schema = Backend.freshSchemaName()
        try await TestServer.with(storage: .postgres(url: Backend.url(base, schema: schema))) { server in
            let client = CloudClient(baseURL: server.baseURL)
            try await client.createZone("Notes")
            for batch in 0..<20 {
                _ = try await client.save((0..<200).map { note("N-\(batch)-\($0)") })
            }
        }
        let url = try PostgresURL(base)
        let configuration = PostgresClient.Configuration(
            host: url.host, port: url.port, username: url.user, password: url.password, database: url.database, tls: .disable)
        let postgres = PostgresClient(configuration: configuration)
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { await postgres.run() }
            defer { group.cancelAll() }
            let table = "\"\(schema)\".cloudstore_record"
            var counted = 0.0
            for try await rows in try await postgres.query(
                "SELECT reltuples::float8 FROM pg_class WHERE oid = \(table)::regclass"
            ).decode(Double.self) {
                counted = rows
            }
            #expect(counted >= 4_000, "analyzed at 1,000, 2,000 and 4,000 rows written")
            let names = (0..<50).map { "N-7-\($0)" }
            var plan: [String] = []
            for try await line in try await postgres.query(
                PostgresQuery(
                    unsafeSQL: """
                        EXPLAIN SELECT name, content FROM \(table)
                        WHERE partition_id = 1 AND zone = 'Notes' AND name = ANY('{\(names.joined(separator: ","))}'::text[])
                        """)
            ).decode(String.self) {
                plan.append(line)
            }
            #expect(plan.first?.contains("cloudstore_record_pkey") == true, "\(plan.first ?? "no plan")")
        }
    }
}
