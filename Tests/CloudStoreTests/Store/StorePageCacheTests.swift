@testable import CloudStore
import CloudStoreTesting
import Foundation
import GRDB
import Testing

/// The connection that writes keeps more of the store in memory than SQLite's default
/// (``PersistentStore/Configuration/writerCacheSize``); readers keep the default. Read back from
/// the connections themselves (`PRAGMA cache_size`, negative: KiB).
@Suite("Store: the writer's page cache")
struct StorePageCacheTests {
    @Test func theWriterCachesEightMiBAndReadersSQLitesDefault() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory.file("cache.sqlite"), try Schema.notes())
        defer { try? store.close() }
        #expect(try cacheSizes(of: store) == (writer: -8_192, reader: -2_000))
    }

    @Test func anAppSetsTheWritersCache() throws {
        let directory = try TemporaryDirectory()
        var configuration = PersistentStore.Configuration()
        configuration.writerCacheSize = 1 << 20
        let store = try openStore(directory.file("small.sqlite"), try Schema.notes(), configuration: configuration)
        defer { try? store.close() }
        #expect(try cacheSizes(of: store) == (writer: -1_024, reader: -2_000))
    }

    private func cacheSizes(of store: PersistentStore) throws -> (writer: Int, reader: Int) {
        let writer = try store.pool.writeWithoutTransaction { db in try Int.fetchOne(db, sql: "PRAGMA cache_size") }
        let reader = try store.pool.read { db in try Int.fetchOne(db, sql: "PRAGMA cache_size") }
        return (writer ?? 0, reader ?? 0)
    }
}
