@testable import CloudStore
import CloudStoreTesting
import Foundation
import GRDB
import Testing

enum Mood: String, Codable, Comparable, Sendable {
    case calm, busy
    /// Declaration order, which is not the raw values' order.
    static func < (lhs: Mood, rhs: Mood) -> Bool { lhs == .calm && rhs == .busy }
}
enum Level: Int32, Codable, Sendable { case low = 1, high = 9 }
struct Size: Codable, Equatable, Sendable {
    var width: Double
    var height: Double
}

/// A model with a property of every kind `@Model` stores, on an entity named otherwise.
@Model(name: "Device", mirrored: false, indexes: [["name", "count"]])
struct Gadget: Equatable {
    var id = UUID()
    @Attribute(.indexed) var name = ""
    var nickname: String?
    var count = 0
    var big: Int64 = 0
    var medium: Int32 = 0
    var small: Int16 = 0
    var tiny: Int8 = 0
    var byte: UInt8 = 0
    var word: UInt16 = 0
    var long: UInt32 = 0
    var ratio = 0.0
    var scale: Float = 1
    var enabled = true
    var made: Date?
    var blob: Data?
    var serial: UUID?
    var homepage: URL?
    var cost: Decimal?
    var mood: Mood = .calm
    var level: Level?
    var size: Size?
    var labels: [String] = []
    @Attribute(.externalStorage) var photo: Data?
    @Attribute(originalName: "memo") var note: String?
    var owner: Workshop.ID?
    @Transient var scratch = "unsaved"
}

@Model(mirrored: false)
struct Workshop: Equatable {
    var id = UUID()
    var title = ""
    @Relationship(deleteRule: .cascade, inverse: \Gadget.owner) var gadgets: [Gadget.ID] = []
}

@Suite("@Model types are stored column by column")
struct ModelStoreTests {
    static let schema = Schema(name: "Gadgets", version: 1, entities: [Gadget.self, Workshop.self])

    static func full(owner: UUID? = nil) -> Gadget {
        var gadget = Gadget(name: "Widget", nickname: "wid", count: -7, big: .max, medium: .min, small: -300, tiny: 127)
        gadget.byte = 255
        gadget.word = 65_535
        gadget.long = .max
        gadget.ratio = -0.25
        gadget.scale = 2.5
        gadget.enabled = false
        gadget.made = Date(timeIntervalSince1970: 1_763_700_000.1234)
        gadget.blob = Data([0, 1, 2, 255])
        gadget.serial = UUID()
        gadget.homepage = URL(string: "https://example.com/ü?q=1")
        gadget.cost = Decimal(string: "12345678901234567890.125")
        gadget.mood = .busy
        gadget.level = .high
        gadget.size = Size(width: 1.5, height: 2)
        gadget.labels = ["a", "é", ""]
        gadget.photo = Data(repeating: 7, count: 2_000)
        gadget.note = "noted"
        gadget.owner = owner
        gadget.scratch = "changed, not stored"
        return gadget
    }

    @Test func theSchema_isDerivedFromTheTypes() throws {
        try Self.schema.validate()
        let device = try #require(Self.schema.entity(named: "Device"))
        #expect(device.attributes.map(\.name) == [
            "name", "nickname", "count", "big", "medium", "small", "tiny", "byte", "word", "long", "ratio", "scale",
            "enabled", "made", "blob", "serial", "homepage", "cost", "mood", "level", "size", "labels", "photo", "note",
        ])
        func type(_ name: String) -> AttributeType? { device.attribute(named: name)?.type }
        #expect(type("count") == .int64 && type("tiny") == .int64 && type("long") == .int64)
        #expect(type("scale") == .double && type("mood") == .string && type("level") == .int64)
        #expect(type("size") == .json && type("labels") == .json && type("cost") == .decimal)
        #expect(device.attribute(named: "mood")?.defaultValue == .string("calm"))
        #expect(device.attribute(named: "labels")?.defaultValue == .json("[]"))
        #expect(device.attribute(named: "level")?.isOptional == true)
        #expect(device.attribute(named: "photo")?.allowsExternalStorage == true)
        #expect(device.attribute(named: "note")?.renamedFrom == "memo")
        #expect(device.attribute(named: "scratch") == nil, "transient")
        #expect(device.indexes == [["name", "count"], ["name"]])
        #expect(device.isMirrored == false)
        // The inverse declared on Workshop.gadgets is filled in on Gadget.owner.
        #expect(device.relationship(named: "owner")?.inverse == "gadgets")
        #expect(device.relationship(named: "owner")?.destination == "Workshop")
        #expect(Self.schema.entity(named: "Workshop")?.relationship(named: "gadgets")?.destination == "Device")
        #expect(Gadget.propertyName(for: \Gadget.cost) == "cost")
        #expect(Gadget.propertyName(for: \Gadget.id) == "id")
        #expect(Gadget.propertyName(for: \Gadget.scratch) == nil)
        // The file form reads back as the same schema.
        #expect(try Schema.load(Self.schema.fileData()) == Self.schema)
    }

    @Test func everyKindOfProperty_roundTrips_andTransientOnesStartOver() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory.file("gadgets.sqlite"), Self.schema)
        let workshop = Workshop(title: "Shed")
        let full = Self.full(owner: workshop.id)
        let empty = Gadget()
        try store.write { context in
            try context.insert(workshop)
            try context.insert(full)
            try context.insert(empty)
        }
        var expected = full
        expected.made = Date(millisecondsSince1970: full.made!.millisecondsSince1970)
        expected.scratch = "unsaved"
        try store.read { context in
            #expect(try context.fetch(Gadget.self, id: full.id) == expected)
            #expect(try context.fetch(Gadget.self, id: empty.id) == empty)
            #expect(try context.fetch(FetchDescriptor<Gadget>(sortBy: [SortDescriptor(\.count)])) == [expected, empty])
            #expect(try context.fetch(Workshop.self, id: workshop.id)?.gadgets == [full.id])
            // Stored as the schema says: enums by raw value, JSON canonical, decimals exact.
            let stored = try #require(try context.fetchSnapshot(entityName: "Device", id: full.id))
            #expect(stored["mood"] == .string("busy"))
            #expect(stored["level"] == .int64(9))
            #expect(stored["size"] == .json(#"{"height":2,"width":1.5}"#))
            #expect(stored["labels"] == .json(#"["a","é",""]"#))
            #expect(stored["cost"] == .decimal(Decimal(string: "12345678901234567890.125")!))
            guard case .externalData(let photo)? = stored["photo"] else {
                Issue.record("the photo is not in a file: \(String(describing: stored["photo"]))")
                return
            }
            #expect(store.externalDataURL(for: photo) != nil)
        }
        // Typed queries on enums compare raw values. (#Predicate takes a case from a variable.)
        let mood = Mood.busy
        let busy = try store.read { try $0.fetchIDs(FetchDescriptor<Gadget>(predicate: #Predicate { $0.mood == mood })) }
        #expect(busy == [full.id])
        let levels: [Level?] = [.high, nil]
        let inLevels = try store.read { try $0.fetchCount(FetchDescriptor<Gadget>(predicate: #Predicate { levels.contains($0.level) })) }
        #expect(inLevels == 2)
        let ordered = storeError {
            _ = try store.read { try $0.fetch(FetchDescriptor<Gadget>(predicate: #Predicate { $0.mood < mood })) }
        }
        #expect(ordered?.code == .unsupportedQuery)
        #expect(ordered?.message.contains("$0.mood is stored by raw value, whose order need not be the enum's") == true)
        let photo = Data(repeating: 7, count: 2_000)
        let external = storeError {
            _ = try store.read { try $0.fetch(FetchDescriptor<Gadget>(predicate: #Predicate { $0.photo == photo })) }
        }
        #expect(external?.message.contains("$0.photo keeps its bytes in a file; compare it only with nil") == true)
        try store.close()
    }

    @Test func update_recordsOnlyWhatChanged_andDeleteByDescriptorAppliesDeleteRules() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory.file("gadgets.sqlite"), Self.schema)
        let workshop = Workshop(title: "Shed")
        var gadget = Self.full(owner: workshop.id)
        try store.write { context in
            try context.insert(workshop)
            try context.insert(gadget)
        }
        let before = try store.currentHistoryToken()
        gadget.mood = .calm
        gadget.scratch = "transient changes are not stored"
        gadget.labels.append("new")
        try store.write { [gadget] (context: WriteContext) in try context.update(gadget) }
        let change = try #require(try store.history(after: before).first?.changes.first)
        #expect(change.updatedProperties == ["labels", "mood"])
        // Saving an unchanged value records nothing.
        try store.write { [gadget] (context: WriteContext) in try context.save(gadget) }
        #expect(try store.history(after: before).count == 1)

        let deleted = try store.write { context in
            try context.delete(FetchDescriptor<Workshop>(predicate: #Predicate { $0.title == "Shed" }))
        }
        #expect(deleted == 1)
        #expect(try store.read { try $0.fetchCount(FetchDescriptor<Gadget>()) } == 0, "cascade")
        try store.close()
    }

    @Test func aModelAgainstASchemaThatDiffers_namesEachProperty() throws {
        var schema = NotesModel.schema
        let note = schema.entities.firstIndex { $0.name == "Note" }!
        let priority = schema.entities[note].attributes.firstIndex { $0.name == "priority" }!
        schema.entities[note].attributes[priority].type = .string
        schema.entities[note].attributes[priority].defaultValue = .string("")
        schema.entities[note].attributes.append(AttributeDescription("mood", .string, optional: true))
        let body = schema.entities[note].attributes.firstIndex { $0.name == "body" }!
        schema.entities[note].attributes[body].isOptional = false
        schema.entities[note].attributes[body].defaultValue = .string("")
        let directory = try TemporaryDirectory()
        let store = try openStore(directory.file("notes.sqlite"), schema)
        let error = #expect(throws: SchemaError.self) { try store.write { (context: WriteContext) in try context.insert(Note(title: "x")) } }
        let problems = (error?.problems ?? []).map { $0.description }
        #expect(problems.contains("Note.priority: the Swift property is stored as an int64 but the attribute is a string; declare it as String"))
        #expect(problems.contains("Note.body: the Swift property is optional but the attribute is not; declare it without `?`"))
        #expect(problems.contains("Note.mood: the attribute is not a property of the Swift type Note; declare it"))
        #expect(throws: SchemaError.self) { try store.read { _ = try $0.fetch(FetchDescriptor<Note>()) } }
        #expect(throws: SchemaError.self) { try schema.check(Note.self) }
        try NotesModel.schema.check(Note.self)
        try store.close()
    }

    @Test func aDamagedRow_namesTheProperty() throws {
        let fixture = try StoreFixture(schema: NotesModel.schema)
        let note = Note(title: "fine", priority: 3)
        try fixture.store.write { try $0.insert(note) }
        try fixture.store.close()
        func damage(_ sql: String) throws {
            let queue = try DatabaseQueue(path: fixture.url.path)
            try queue.write { db in try db.execute(sql: sql) }
            try queue.close()
        }
        try damage("UPDATE \"Note\" SET priority = 'three'")
        var store = try fixture.reopen()
        let damaged = storeError { _ = try store.read { try $0.fetch(FetchDescriptor<Note>()) } }
        #expect(damaged?.code == .invalidValue)
        #expect(damaged?.message.hasPrefix("Note.priority of \(note.id.uuidString) holds \"three\", which is not an int64") == true)
        try store.close()
        try damage("UPDATE \"Note\" SET priority = 3, title = NULL")
        store = try fixture.reopen()
        let null = #expect(throws: EntityError.self) { try store.read { try $0.fetch(Note.self, id: note.id) } }
        #expect(null?.description.hasPrefix("Note.title: the stored value is null but the Swift property is not optional (object \(note.id.uuidString);") == true)
        try store.close()
    }

    @Test func theExampleSchemaFile_isWrittenFromTheExampleTypes() throws {
        let file = try Schema.load(contentsOf: RepositoryPaths.notesSchema)
        let differences = NotesModel.schema.differences(from: file)
        #expect(differences.isEmpty, "Schema/Notes.json and NotesExample differ: \(differences.map(\.description))")
        let written = String(decoding: try NotesModel.schema.fileData(), as: UTF8.self)
        let onDisk = try String(contentsOf: RepositoryPaths.notesSchema, encoding: .utf8)
        #expect(onDisk == written, "regenerate Schema/Notes.json from NotesModel.schema.fileData()")
    }
}
