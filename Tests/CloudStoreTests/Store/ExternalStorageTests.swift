@testable import CloudStore
import CloudStoreTesting
import CloudStoreWire
import Foundation
import GRDB
import Testing

extension Schema {
    /// Notes with `Note.attachment` kept in files (`"externalStorage": true`).
    static func notesWithExternalAttachments() throws -> Schema {
        var schema = try Schema.notes()
        let note = schema.entities.firstIndex { $0.name == "Note" }!
        let attachment = schema.entities[note].attributes.firstIndex { $0.name == "attachment" }!
        schema.entities[note].attributes[attachment].allowsExternalStorage = true
        return schema
    }
}

@Suite("Store: data attributes with external storage")
struct ExternalStorageTests {
    let fixture: StoreFixture
    var store: PersistentStore { fixture.store }
    var directory: URL { URL(fileURLWithPath: store.url.path + "-external") }

    init() throws {
        fixture = try StoreFixture(schema: try Schema.notesWithExternalAttachments())
    }

    func files() -> Set<String> {
        Set((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).subtracting([".transfers"])
    }

    static func fileName(_ bytes: Data) -> String {
        var checksum = AssetChecksum()
        checksum.update(bytes)
        return AssetChecksum.fileName(of: checksum.base64)!
    }

    @Test func theBytesLiveInAFileNamedByTheirChecksumAndEntitiesStillSeeData() throws {
        let bytes = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        let note = Note(title: "Photo", attachment: bytes)
        try store.write { try $0.insert(note) }

        #expect(files() == [Self.fileName(bytes)])
        #expect(try Data(contentsOf: directory.appendingPathComponent(Self.fileName(bytes))) == bytes)
        let column = try store.pool.read { db in
            try String.fetchOne(db, sql: "SELECT attachment FROM Note WHERE typeof(attachment) = 'text'")
        }
        #expect(column?.hasPrefix("300000:") == true)
        #expect(try store.read { try $0.fetch(Note.self, id: note.id) }?.attachment == bytes)
        #expect(try store.read { try $0.fetch(Note.self) }.first?.attachment == bytes)

        let snapshot = try store.read { try $0.fetchSnapshot(entityName: "Note", id: note.id) }
        guard case .externalData(let external)? = snapshot?.values["attachment"] else {
            Issue.record("a snapshot should carry the reference, not the bytes")
            return
        }
        #expect(external.size == 300_000)
        #expect(try store.externalDataURL(for: external).map { try Data(contentsOf: $0) } == bytes)
    }

    @Test func historyRecordsTheAttributeAsChangedLikeAnyOther() throws {
        var note = Note(title: "A", attachment: Data("one".utf8))
        try store.write { try $0.insert(note) }
        let token = try store.currentHistoryToken()
        note.attachment = Data("two".utf8)
        try store.write { try $0.update(note) }
        let changes = try store.history(after: token).flatMap(\.changes)
        #expect(changes.count == 1)
        #expect(changes.first?.updatedProperties == ["attachment"])
    }

    @Test func replacedAndDeletedBytesAreRemovedAndSharedOnesStay() throws {
        let shared = Data("shared bytes".utf8)
        var first = Note(title: "1", attachment: shared)
        let second = Note(title: "2", attachment: shared)
        try store.write { context in
            try context.insert(first)
            try context.insert(second)
        }
        #expect(files() == [Self.fileName(shared)])

        first.attachment = Data("new bytes".utf8)
        try store.write { try $0.update(first) }
        #expect(files() == [Self.fileName(shared), Self.fileName(Data("new bytes".utf8))])

        try store.write { try $0.delete(Note.self, id: second.id) }
        #expect(files() == [Self.fileName(Data("new bytes".utf8))])

        first.attachment = nil
        try store.write { try $0.update(first) }
        #expect(files().isEmpty)
    }

    @Test func filesACrashLeftBehindAreRemovedWhenTheStoreOpens() throws {
        let note = Note(title: "kept", attachment: Data("kept".utf8))
        try store.write { try $0.insert(note) }
        try Data("half".utf8).write(to: directory.appendingPathComponent(".1234.tmp"))
        try Data("orphan".utf8).write(to: directory.appendingPathComponent(Self.fileName(Data("orphan".utf8))))
        try store.close()

        let reopened = try fixture.reopen()
        defer { try? reopened.close() }
        #expect(files() == [Self.fileName(Data("kept".utf8))])
        #expect(try reopened.read { try $0.fetch(Note.self, id: note.id) }?.attachment == Data("kept".utf8))
    }

    @Test func aMissingFileIsAClearErrorNamingTheObjectAndAttribute() throws {
        let note = Note(title: "lost", attachment: Data("lost".utf8))
        try store.write { try $0.insert(note) }
        try FileManager.default.removeItem(at: directory.appendingPathComponent(Self.fileName(Data("lost".utf8))))

        let error = #expect(throws: StoreError.self) { try store.read { try $0.fetch(Note.self, id: note.id) } }
        #expect(error?.code == .externalData)
        #expect(error?.message.contains("Note.attachment of \(note.id.uuidString)") == true)
        // The rest of the store reads on.
        #expect(try store.read { try $0.fetchSnapshot(entityName: "Note", id: note.id) } != nil)
    }

    /// A full disk, stood for by a file size limit in a child process (writes past it fail with
    /// `EFBIG` as they would with `ENOSPC`): the save fails naming the problem and what to do,
    /// nothing stored before is lost, no partial file stays, and the same save succeeds once the
    /// space is back.
    @Test func aFullDiskFailsTheSaveClearlyAndLosesNothing() async throws {
        let note = Note(title: "before", attachment: Data("before".utf8))
        try await store.write { try $0.insert(note) }
        try store.close()
        let schemaFile = store.url.deletingLastPathComponent().appendingPathComponent("schema.json")
        try Schema.notesWithExternalAttachments().fileData().write(to: schemaFile)

        func writeAttachment(limitKiB: Int?) async throws -> [String] {
            let (child, lines) = try TestHelperProcess.start(
                ["write-attachment", store.url.path, schemaFile.path, "2048"] + (limitKiB.map { ["\($0)"] } ?? []))
            var output: [String] = []
            while let line = await lines.nextLine() { output.append(line) }
            await child.waitForExit()
            return output
        }
        let refused = try await writeAttachment(limitKiB: 1024)
        let message = try #require(refused.first { $0.hasPrefix("error ") }, "\(refused)")
        #expect(message.contains("external-storage value") && message.contains("free space"), "\(message)")

        let reopened = try fixture.reopen()
        defer { try? reopened.close() }
        #expect(try await reopened.read { try $0.fetch(Note.self, id: note.id) }?.attachment == Data("before".utf8))
        #expect(try await reopened.read { try $0.fetch(Note.self) }.count == 1, "the refused save left no row")
        #expect(files() == [Self.fileName(Data("before".utf8))], "no partial file stays")

        try reopened.close()
        #expect(try await writeAttachment(limitKiB: nil) == ["done"])
        let again = try fixture.reopen()
        defer { try? again.close() }
        let notes = try await again.read { try $0.fetch(Note.self) }
        #expect(notes.count == 2)
        #expect(notes.first { $0.title == "attachment" }?.attachment?.count == 2048 << 10)
    }

    @Test func validationNamesExternalStorageOnANonDataAttribute() throws {
        var schema = try Schema.notes()
        let note = schema.entities.firstIndex { $0.name == "Note" }!
        let title = schema.entities[note].attributes.firstIndex { $0.name == "title" }!
        schema.entities[note].attributes[title].allowsExternalStorage = true
        let error = #expect(throws: SchemaError.self) { try schema.validate() }
        #expect("\(error!)".contains("Note.title"))
        #expect("\(error!)".contains("externalStorage applies to data attributes only"))
    }

    @Test func theSchemaFileCarriesTheFlagAndTheRecordFieldIsAnAsset() throws {
        let schema = try Schema.notesWithExternalAttachments()
        let reloaded = try Schema.load(try schema.fileData())
        #expect(reloaded.entity(named: "Note")?.attribute(named: "attachment")?.allowsExternalStorage == true)
        #expect(reloaded.schemaHash != (try Schema.notes()).schemaHash)
        let field = schema.cloudSchema.recordTypes.first { $0.name == "Note" }?.fields.first { $0.name == "attachment" }
        #expect(field?.type == .asset)
    }
}

@Suite("Store: turning external storage on or off moves the bytes")
struct ExternalStorageMigrationTests {
    static func versioned(_ schema: Schema, _ version: Int) -> Schema {
        var schema = schema
        schema.version = version
        return schema
    }

    @Test func aLightweightMigrationMovesTheBytesIntoFilesAndBack() throws {
        let directory = try TemporaryDirectory()
        let url = directory.file("moving.sqlite")
        let bytes = Data((0..<50_000).map { UInt8(truncatingIfNeeded: $0) })
        let note = Note(title: "Scan", attachment: bytes)
        let plain = try Schema.notes()
        do {
            let store = try openStore(url, plain)
            try store.write { try $0.insert(note) }
            try store.close()
        }
        let external = URL(fileURLWithPath: url.path + "-external")

        let on = try openStore(url, Self.versioned(try Schema.notesWithExternalAttachments(), plain.version + 1))
        #expect(try on.read { try $0.fetch(Note.self, id: note.id) }?.attachment == bytes)
        guard case .externalData(let value)? = try on.read({ try $0.fetchSnapshot(entityName: "Note", id: note.id) })?.values["attachment"]
        else {
            Issue.record("after the migration the row should name a file")
            return
        }
        #expect(try on.externalDataURL(for: value).map { try Data(contentsOf: $0) } == bytes)
        try on.close()

        let off = try openStore(url, Self.versioned(plain, plain.version + 2))
        defer { try? off.close() }
        #expect(try off.read { try $0.fetchSnapshot(entityName: "Note", id: note.id) }?.values["attachment"] == .data(bytes))
        #expect(try off.read { try $0.fetch(Note.self, id: note.id) }?.attachment == bytes)
        let left = try FileManager.default.contentsOfDirectory(atPath: external.path).filter { $0 != ".transfers" }
        #expect(left.isEmpty)
    }
}
