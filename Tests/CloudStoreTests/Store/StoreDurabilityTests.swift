@testable import CloudStore
import CloudStoreTesting
import Foundation
import GRDB
import Testing

/// The "Durability" article promises that an acknowledged save survives a power loss: `synchronous = FULL` on
/// every connection of the store unless the app asks for `NORMAL`. GRDB's `DatabasePool` sets
/// `NORMAL` on its writer when it turns WAL on, after `prepareDatabase`, so this reads the
/// setting back from the connections themselves.
@Suite("Store: durability settings on every connection")
struct StoreDurabilityTests {
    /// SQLite's numbers for `PRAGMA synchronous`.
    static let full = 2, normal = 1

    @Test func synchronousIsFullOnTheWriterAndTheReadersByDefault() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory.file("durable.sqlite"), try Schema.notes())
        defer { try? store.close() }
        #expect(try synchronous(of: store) == (writer: Self.full, reader: Self.full))
    }

    @Test func synchronousIsNormalEverywhereWhenTheAppAsksForIt() throws {
        let directory = try TemporaryDirectory()
        var configuration = PersistentStore.Configuration()
        configuration.synchronous = .normal
        let store = try openStore(directory.file("fast.sqlite"), try Schema.notes(), configuration: configuration)
        defer { try? store.close() }
        #expect(try synchronous(of: store) == (writer: Self.normal, reader: Self.normal))
    }

    @Test func aReopenedStoreIsFullAgain() throws {
        let directory = try TemporaryDirectory()
        try openStore(directory.file("again.sqlite"), try Schema.notes()).close()
        let store = try openStore(directory.file("again.sqlite"), try Schema.notes())
        defer { try? store.close() }
        #expect(try synchronous(of: store) == (writer: Self.full, reader: Self.full))
    }

    private func synchronous(of store: PersistentStore) throws -> (writer: Int, reader: Int) {
        let writer = try store.pool.writeWithoutTransaction { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") }
        let reader = try store.pool.read { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") }
        return (writer ?? -1, reader ?? -1)
    }
}
