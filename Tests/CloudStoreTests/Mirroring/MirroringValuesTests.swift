import CloudStore
import CloudStoreTesting
import Foundation
import GRDB
import Testing

/// Every attribute type's edge values through a real `cloudstore serve`: each arrives exactly on
/// the second device, or its save was refused; nothing waits in the upload queue.
@Suite("Mirroring: edge values arrive exactly or are refused at save", .timeLimit(.minutes(ReliabilityRun.hangLimitMinutes)))
struct MirroringValuesTests {
    /// Notes holding the edge values of every attribute type a note has.
    static func edgeNotes() -> [Note] {
        let cases: [(Double, Date?, Decimal?, Int64)] = [
            (.greatestFiniteMagnitude, Date(timeIntervalSince1970: 8_640_000_000_000), .greatestFiniteMagnitude, .max),
            (-.greatestFiniteMagnitude, Date(timeIntervalSince1970: -8_640_000_000_000), .leastFiniteMagnitude, .min),
            (.leastNonzeroMagnitude, .distantFuture, .leastNonzeroMagnitude, 0),
            (-.leastNonzeroMagnitude, .distantPast, Decimal(string: "-12345678901234567890.125"), -1),
            (Double(Float.greatestFiniteMagnitude), Date(timeIntervalSince1970: 1_763_700_000.123), nil, 1 << 53 + 1),
        ]
        return cases.enumerated().map { index, values in
            var note = Note(title: "edge \(index): \u{0}\u{1F}\"\\\u{1F600}", priority: values.3)
            note.rating = values.0
            note.created = values.1
            note.price = values.2
            note.body = index == 0 ? String(repeating: "ü", count: 200_000) : index == 1 ? "" : nil
            note.attachment = index == 1 ? Data((0...255).map { UInt8($0) }) : index == 2 ? Data() : nil
            note.link = URL(string: "https://example.com/ä/\(index)?q=a%20b#frag")
            note.externalID = index == 3 ? UUID() : nil
            note.metadata = NoteMetadata(wordCount: index, language: "de\u{0}")
            return note
        }
    }

    func arriveExactly(server: URL, second: URL) async throws {
        let a = try await TestDevice.make("A", server: server)
        let b = try await TestDevice.make("B", server: second)
        let notes = Self.edgeNotes()
        try await a.write { context in for note in notes { try context.insert(note) } }

        // Values the store cannot keep, or a record cannot carry, are refused at save.
        let changes: [(inout Note) -> Void] = [
            { $0.rating = .nan }, { $0.rating = .infinity }, { $0.created = Date(timeIntervalSince1970: 1e13) },
            { $0.price = .nan }, { $0.attachment = Data(count: 900_000) },
        ]
        for (index, change) in changes.enumerated() {
            var note = Note(title: "refused \(index)")
            change(&note)
            let refused = note
            do {
                try await a.write { try $0.insert(refused) }
                Issue.record("saved: \(refused)")
            } catch {
                #expect((error as? StoreError)?.code == .invalidValue, "\(error)")
            }
        }
        try await a.sync()
        let status = try await a.container.status()
        #expect(status.pendingUploads == 0 && status.refusedUploads == 0, "nothing waits in the upload queue: \(status)")
        try await b.sync()
        let arrived = try notes.map { try b.note($0.id) }
        for (sent, got) in zip(notes, arrived) {
            var expected = sent
            expected.created = sent.created.map { Date(millisecondsSince1970: $0.millisecondsSince1970) }
            #expect(got == expected, "\(sent.title)")
        }
        #expect(try b.notes().count == notes.count, "no refused note reached B")
        #expect(try a.contents() == b.contents())
        await a.close()
        await b.close()
    }

    @Test func throughCloudStoreServeOnSQLite() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            try await arriveExactly(server: server.baseURL, second: server.baseURL)
        }
    }

    /// An infinity saved before the store refused it: the export refuses that object alone (its
    /// batch goes on), says why, and sends it once the app changes the value.
    @Test func anInfinitySavedBeforeTheRule_isRefusedAlone_untilTheAppChangesIt() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let directory = try TemporaryDirectory()
            var a = try await TestDevice.make("A", server: server.baseURL, directory: directory)
            let far = Note(title: "far", priority: 1)
            let near = Note(title: "near", priority: 2)
            try await a.write { context in
                try context.insert(far)
                try context.insert(near)
            }
            let file = a.store.url
            await a.close()
            // What an earlier version stored for `rating = .infinity` (SQLite reads 9e999 as infinity).
            let queue = try DatabaseQueue(path: file.path)
            try await queue.write { db in try db.execute(sql: "UPDATE \"Note\" SET rating = 9e999 WHERE id = ?", arguments: [far.id.uuidString]) }
            try queue.close()

            a = try await TestDevice.make("A", server: server.baseURL, directory: directory)
            #expect(try a.note(far.id)?.rating == .infinity)
            try await a.sync()
            let status = try await a.container.status()
            #expect(status.pendingUploads == 0 && status.refusedUploads == 1, "\(status)")
            let refused = try a.container.refusedUploads()
            #expect(refused.map(\.id) == [far.id])
            #expect(refused.first?.refusal?.reason?.hasPrefix("Note.rating of \(far.id.uuidString) is inf, which cannot travel to the server") == true, "\(refused)")
            let b = try await TestDevice.make("B", server: server.baseURL)
            try await b.sync()
            #expect(try b.notes().map(\.title) == ["near"], "the rest of the batch went")

            try await a.edit(try #require(try a.note(far.id))) { $0.rating = 5 }
            try await a.sync()
            #expect(try await a.container.status().refusedUploads == 0)
            try await b.sync()
            #expect(try b.note(far.id)?.rating == 5)
            await a.close()
            await b.close()
        }
    }

    @Test(.enabled(if: ServerProcess.testPostgresURL != nil || ProcessInfo.processInfo.environment["CI"] != nil))
    func throughTwoServersOnPostgreSQL() async throws {
        try await ServerProcess.withTwoOnPostgres(users: TestServer.defaultUsers) { first, second in
            try await arriveExactly(server: first, second: second)
        }
    }
}
