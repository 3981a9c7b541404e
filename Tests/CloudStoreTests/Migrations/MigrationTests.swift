import CloudStore
import CloudStoreTesting
import Foundation
import GRDB
import Testing

@Suite struct MigrationTests {
    static let migrations = RepositoryPaths.root.appendingPathComponent("Migrations")

    static func notesV1() throws -> Schema { try Schema.load(contentsOf: RepositoryPaths.notesSchemaV1) }

    /// A Notes v1 store with 3 folders, 4 tags and 30 notes (ranks -5...24, tags and folders set).
    static func v1Store(in directory: TemporaryDirectory) throws -> (url: URL, notes: [EntitySnapshot]) {
        let url = directory.file("notes.sqlite")
        let store = try openStore(url, try notesV1())
        let folders = (0..<3).map { EntitySnapshot(entityName: "Folder", id: UUID(), values: ["title": .string("folder \($0)")]) }
        let tags = (0..<4).map { EntitySnapshot(entityName: "Tag", id: UUID(), values: ["name": .string("tag \($0)")]) }
        let notes = (0..<30).map { index in
            v1Note(index, folder: folders[index % 3].id, tags: [tags[index % 4].id, tags[(index + 1) % 4].id])
        }
        try store.write(author: "app") { context in
            for snapshot in folders + tags + notes { try context.insert(snapshot) }
        }
        try store.close()
        return (url, notes)
    }

    static func v1Note(_ index: Int, folder: UUID, tags: [UUID]) -> EntitySnapshot {
        var values: [String: AttributeValue] = ["title": .string("note \(index)"), "rank": .int64(Int64(index - 5))]
        values["pinned"] = .bool(index % 3 == 0)
        values["price"] = .decimal(Decimal(index) / 4)
        values["folder"] = .uuid(folder)
        return EntitySnapshot(entityName: "Note", id: UUID(), values: values, toMany: ["tags": tags])
    }

    /// Everything in a store file, to compare before and after.
    static func dump(_ url: URL) throws -> [String] {
        let queue = try DatabaseQueue(path: url.path, configuration: { var c = Configuration(); c.readonly = true; return c }())
        defer { try? queue.close() }
        return try queue.read { db in
            var lines: [String] = []
            for row in try Row.fetchAll(db, sql: "SELECT type, name, sql FROM sqlite_master ORDER BY name") {
                lines.append("\(row)")
                let type: String = row["type"]
                let name: String = row["name"]
                if type == "table" {
                    lines += try Row.fetchAll(db, sql: "SELECT * FROM \"\(name)\" ORDER BY 1").map { "\(name): \($0)" }
                }
            }
            return lines
        }
    }

    @Test func notesV1ToV2_keepsEveryRow() throws {
        let directory = try TemporaryDirectory()
        let (url, v1Notes) = try Self.v1Store(in: directory)
        let historyBefore = try openStore(url, try Self.notesV1()).history(after: nil)

        let plan = try MigrationPlan.load(directory: Self.migrations, schemaName: "Notes")
        #expect(plan.steps.map(\.name) == ["2-clamp-priority.sql"])
        let store = try openStore(url, try Schema.notes(), migrations: plan)
        try store.read { context throws in
            #expect(try context.count(Folder.self) == 3)
            #expect(try context.count(Tag.self) == 4)
            let notes = try context.fetch(Note.self)
            #expect(notes.count == 30)
            for old in v1Notes {
                let note = try #require(notes.first { $0.id == old.id })
                guard case .int64(let rank) = old["rank"], case .string(let title) = old["title"],
                    case .uuid(let folder) = old["folder"]
                else { Issue.record("bad fixture"); continue }
                #expect(note.title == title)
                #expect(note.priority == max(0, min(rank, 3)))  // renamed by the schema, clamped by the step
                #expect(note.folder == folder)
                #expect(Set(note.tags) == Set(old.toMany["tags"]!))
                #expect((note.price.map(AttributeValue.decimal) ?? .null) == old["price"])
                #expect(note.created == nil && note.metadata == nil)  // new optional attributes
            }
            // v2's new index on (pinned, created) is used by queries on it.
            #expect(try context.count(Note.self, where: .equals("pinned", true)) == 10)
        }
        #expect(try store.history(after: nil) == historyBefore)
        try store.write { try $0.insert(Note(title: "v2", created: Date(), metadata: NoteMetadata(wordCount: 1, language: "en"))) }
        #expect(try store.read { try $0.count(Note.self) } == 31)
        try store.close()
        let indexes = try Self.dump(url).filter { $0.contains("type:\"index\"") }.joined()
        #expect(indexes.contains("cloudstore_index_Note_pinned_created"))
    }

    @Test(arguments: ["sql", "swift"])
    func failingStep_rollsBackEverythingAndNamesTheStep(kind: String) throws {
        let directory = try TemporaryDirectory()
        let (url, _) = try Self.v1Store(in: directory)
        let before = try Self.dump(url)
        struct StepFailure: Error, CustomStringConvertible { var description: String { "the data does not fit" } }
        let failing =
            kind == "sql"
            ? MigrationStep(version: 2, name: "9-broken.sql", sql: "UPDATE \"Note\" SET \"priority\" = 1; UPDATE \"Nowhere\" SET x = 1")
            : MigrationStep(version: 2, name: "broken-code") { db in
                try db.execute(sql: "DELETE FROM \"Note\"")
                throw StepFailure()
            }
        var plan = try MigrationPlan.load(directory: Self.migrations, schemaName: "Notes")
        plan.steps.append(failing)
        let error = storeError { _ = try openStore(url, try Schema.notes(), migrations: plan) }
        #expect(error?.code == .migrationFailed)
        #expect(error?.message.contains(failing.name) == true)
        #expect(error?.message.contains(kind == "sql" ? "no such table: Nowhere" : "the data does not fit") == true)
        #expect(try Self.dump(url) == before)
        // The store still opens with its old schema, with everything in it.
        let v1 = try openStore(url, try Self.notesV1())
        #expect(try v1.read { try $0.count(entityName: "Note") } == 30)
    }

    @Test func destructiveChange_isRefusedWithoutAStep_andAppliedWithOne() throws {
        let directory = try TemporaryDirectory()
        let url = directory.file("notes.sqlite")
        let note = Note(title: "t", body: "to be dropped", priority: 2)
        do {
            let store = try openStore(url, try Schema.notes())
            try store.write { try $0.insert(note) }
            try store.close()
        }
        var v3 = try Schema.notes()
        v3.version = 3
        v3.entities[1].attributes.removeAll { $0.name == "body" }
        v3.entities[1].attributes[v3.entities[1].attributes.firstIndex { $0.name == "priority" }!].type = .string
        v3.entities[1].attributes[v3.entities[1].attributes.firstIndex { $0.name == "priority" }!].defaultValue = .string("0")

        let before = try Self.dump(url)
        let refused = storeError { _ = try openStore(url, v3) }
        #expect(refused?.code == .destructiveMigration)
        #expect(refused?.message.contains("Note.body is removed") == true)
        #expect(refused?.message.contains("Note.priority changes from an int64 to a string") == true)
        #expect(try Self.dump(url) == before)

        let step = MigrationStep(version: 3, name: "fold-body-into-title", sql: "UPDATE \"Note\" SET \"title\" = \"title\" || ': ' || \"body\"")
        let store = try openStore(url, v3, migrations: MigrationPlan([step]))
        let migrated = try #require(try store.read { try $0.fetchSnapshot(entityName: "Note", id: note.id) })
        #expect(migrated["title"] == .string("t: to be dropped"))
        #expect(migrated["priority"] == .string("2"))
        #expect(migrated["body"] == nil)
    }

    @Test func lightweight_addsAndRenamesEntitiesAttributesAndRelationships() throws {
        let directory = try TemporaryDirectory()
        let url = directory.file("notes.sqlite")
        let tag = Tag(name: "blue")
        let note = Note(title: "n", tags: [tag.id])
        do {
            let store = try openStore(url, try Schema.notes())
            try store.write { context in
                try context.insert(tag)
                try context.insert(note)
            }
            try store.close()
        }
        // v3: Tag becomes Label (its link table's orientation flips: "Label.notes" sorts before
        // "Note.tags"), Note gains a defaulted attribute and an index, and a new entity appears.
        var v3 = try Schema.notes()
        v3.version = 3
        v3.entities[2].name = "Label"
        v3.entities[2].renamedFrom = "Tag"
        v3.entities[1].relationships[1].destination = "Label"
        v3.entities[1].attributes.append(AttributeDescription("wordCount", .int64, default: .int64(7)))
        v3.entities[1].indexes.append(["wordCount"])
        v3.entities.append(
            EntityDescription("Reminder", attributes: [AttributeDescription("due", .date, optional: true)]))
        let store = try openStore(url, v3)
        try store.read { context throws in
            let migrated = try #require(try context.fetchSnapshot(entityName: "Note", id: note.id))
            #expect(migrated["wordCount"] == .int64(7))
            #expect(try context.relatedIDs(entityName: "Note", id: note.id, relationship: "tags") == [tag.id])
            #expect(try context.relatedIDs(entityName: "Label", id: tag.id, relationship: "notes") == [note.id])
            #expect(try context.fetchSnapshot(entityName: "Label", id: tag.id)?["name"] == .string("blue"))
            #expect(try context.count(entityName: "Reminder") == 0)
        }
        try store.close()
        let schemaObjects = try Self.dump(url).joined(separator: "\n")
        #expect(schemaObjects.contains("cloudstore_link_Label_notes"))
        #expect(!schemaObjects.contains("cloudstore_link_Note_tags"))
        #expect(schemaObjects.contains("cloudstore_index_Note_wordCount"))
    }
}
