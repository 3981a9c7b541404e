@testable import CloudStore
import Foundation
import GRDB
import Synchronization
import Testing

/// The store's unit-of-work hook: an observer writes its bookkeeping in each write's own
/// transaction, sees the write's changes, and can veto it.
@Suite("Store: unit-of-work observers write in the save's transaction")
struct StoreUnitOfWorkObserverTests {
    /// Writes one row per change into its own table, and fails on a title it is told to refuse.
    struct Bookkeeper: UnitOfWorkObserver {
        var name = "test.bookkeeper"
        var refusing: String?

        func unitOfWorkWillCommit(_ unitOfWork: CommittingUnitOfWork) throws {
            try unitOfWork.db.execute(sql: "CREATE TABLE IF NOT EXISTS bookkeeping (entity TEXT, id TEXT, type TEXT, keys TEXT, author TEXT, date INTEGER)")
            for change in unitOfWork.changes {
                if let refusing, try unitOfWork.context.fetchSnapshot(entityName: change.entityName, id: change.objectID)?
                    .values["title"] == .string(refusing)
                {
                    throw StoreError(.invalidValue, "refused \(refusing)")
                }
                try unitOfWork.db.execute(
                    sql: "INSERT INTO bookkeeping VALUES (?, ?, ?, ?, ?, ?)",
                    arguments: [
                        change.entityName, change.objectID.uuidString, change.changeType.rawValue,
                        change.updatedProperties.sorted().joined(separator: ","), unitOfWork.author,
                        unitOfWork.date.millisecondsSince1970,
                    ])
            }
        }
    }

    @Test func anObserverSeesEachChangeAndWritesInTheSameTransaction() throws {
        var configuration = PersistentStore.Configuration()
        configuration.now = { Date(timeIntervalSince1970: 1_000) }
        let fixture = try StoreFixture(configuration: configuration)
        fixture.store.add(Bookkeeper())
        let note = Note(title: "first")
        try fixture.store.write(author: "app") { try $0.insert(note) }
        try fixture.store.write(author: "app") { context in
            var edited = note
            edited.title = "second"
            try context.update(edited)
        }
        try fixture.store.write(author: "app") { _ in }  // changes nothing: the observer is not called
        let rows = try fixture.store.read { context in
            try Row.fetchAll(context.db, sql: "SELECT * FROM bookkeeping").map { row -> String in
                let type: String = row["type"], keys: String = row["keys"], author: String = row["author"]
                let date: Int64 = row["date"]
                return "\(type) \(keys) \(author) \(date)"
            }
        }
        #expect(rows == ["insert  app 1000000", "update title app 1000000"])
        #expect(try fixture.store.history(after: nil).map(\.timestamp) == [Date(timeIntervalSince1970: 1_000), Date(timeIntervalSince1970: 1_000)])
    }

    @Test func anObserverThatThrowsRollsTheWholeUnitOfWorkBack() throws {
        let fixture = try StoreFixture()
        fixture.store.add(Bookkeeper(refusing: "refused"))
        try fixture.store.write(author: "app") { try $0.insert(Note(title: "kept")) }
        let error = storeError { try fixture.store.write(author: "app") { try $0.insert(Note(title: "refused")) } }
        #expect(error?.message == "refused refused")
        #expect(try fixture.store.read { try $0.fetch(Note.self) }.map(\.title) == ["kept"])
        #expect(try fixture.store.history(after: nil).count == 1, "no history for the rolled-back write")
        #expect(try fixture.store.read { try Int.fetchOne($0.db, sql: "SELECT count(*) FROM bookkeeping") } == 1)
    }

    @Test func changesAreTrackedForAnObserverEvenWithoutHistory() throws {
        var configuration = PersistentStore.Configuration()
        configuration.recordsHistory = false
        let fixture = try StoreFixture(configuration: configuration)
        fixture.store.add(Bookkeeper())
        try fixture.store.write(author: "app") { try $0.insert(Note(title: "no history")) }
        #expect(try fixture.store.history(after: nil).isEmpty)
        #expect(try fixture.store.read { try Int.fetchOne($0.db, sql: "SELECT count(*) FROM bookkeeping") } == 1)
    }

    @Test func aFileThatRequiresAnObserverRefusesWritesWithoutIt() throws {
        let fixture = try StoreFixture()
        fixture.store.add(Bookkeeper())
        try fixture.store.write(author: "app") { context in
            try PersistentStore.requireObserver(named: "test.bookkeeper", context.db)
            try context.insert(Note(title: "with the observer"))
        }
        let other = try fixture.reopen()
        defer { try? other.close() }
        let error = storeError { try other.write(author: "app") { try $0.insert(Note(title: "without it")) } }
        #expect(error?.code == .mirroredStore)
        other.add(Bookkeeper())
        try other.write(author: "app") { try $0.insert(Note(title: "with it again")) }
        #expect(try other.read { try $0.count(Note.self) } == 2)
    }
}
