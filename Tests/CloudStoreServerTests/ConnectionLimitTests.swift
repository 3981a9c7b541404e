import Testing

@testable import CloudStoreServer

/// How many connections a server keeps open at most, given the descriptors it may open.
@Suite("connection limit: descriptors kept for storage")
struct ConnectionLimitTests {
    /// SQLite opens a pool per container; PostgreSQL one pool for all of them, so 1,200 containers
    /// on PostgreSQL under `ulimit -n 1024` keep their 1,000 connections (they got 16 before, the
    /// floor, as if each container had SQLite files open).
    @Test func theReserve_growsWithContainersOnSQLiteOnly() {
        let postgres = ConnectionLimit.reservedDescriptors(for: .postgres(url: "postgres://u@h/d"), containers: 1_200)
        let sqlite = ConnectionLimit.reservedDescriptors(for: .sqlite(directory: "d"), containers: 1_200)
        #expect(postgres == 80)
        #expect(sqlite == 64 + 16 * 1_200)
        #expect(ConnectionLimit.capacity(maxConnections: 1_000, descriptorLimit: 1_024, reservedDescriptors: postgres) == 944)
        #expect(ConnectionLimit.capacity(maxConnections: 1_000, descriptorLimit: 1_024, reservedDescriptors: sqlite) == 16)
    }
}
