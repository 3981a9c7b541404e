import CloudStore
import Foundation
import GRDB

/// The benchmark's note: 10 attributes of the common types.
struct BenchNote: Entity, Codable, FetchableRecord, PersistableRecord {
    static let entityName = "Note"
    static let databaseTableName = "Note"

    var id: UUID
    var title: String
    var body: String
    var pinned: Bool
    var created: Date
    var modified: Date
    var priority: Int64
    var wordCount: Int64
    var rating: Double
    var color: String?
    var archived: Bool

    // GRDB stores these as the store does: UUIDs as upper-case text, dates as milliseconds.
    static func databaseUUIDEncodingStrategy(for column: String) -> DatabaseUUIDEncodingStrategy { .uppercaseString }
    static func databaseDateEncodingStrategy(for column: String) -> DatabaseDateEncodingStrategy { .millisecondsSince1970 }
    static func databaseDateDecodingStrategy(for column: String) -> DatabaseDateDecodingStrategy { .millisecondsSince1970 }

    static let schema = Schema(name: "Bench", version: 1, entities: [
        EntityDescription("Note", attributes: [
            AttributeDescription("title", .string, default: .string("")),
            AttributeDescription("body", .string, default: .string("")),
            AttributeDescription("pinned", .bool, default: .bool(false)),
            AttributeDescription("created", .date, default: .date(Date(timeIntervalSince1970: 0))),
            AttributeDescription("modified", .date, default: .date(Date(timeIntervalSince1970: 0))),
            AttributeDescription("priority", .int64, default: .int64(0)),
            AttributeDescription("wordCount", .int64, default: .int64(0)),
            AttributeDescription("rating", .double, default: .double(0)),
            AttributeDescription("color", .string, optional: true),
            AttributeDescription("archived", .bool, default: .bool(false)),
        ]),
    ])

    /// ``schema`` with every attribute end-to-end encrypted.
    static let encryptedSchema: Schema = {
        var schema = BenchNote.schema
        for index in schema.entities[0].attributes.indices { schema.entities[0].attributes[index].isEncrypted = true }
        return schema
    }()

    /// How the notes' ids are made.
    enum IDs: String {
        /// `UUID.timeOrdered()`, as the docs recommend for new objects.
        case timeOrdered = "time-ordered"
        /// `UUID()`: every insert lands on a random page of each index keyed by id.
        case random
    }

    /// Deterministic notes but for their ids (made before timing).
    static func make(_ count: Int, ids: IDs = .timeOrdered) -> [BenchNote] {
        let base = Date(timeIntervalSince1970: 1_763_700_000)
        return (0..<count).map { index in note(index, base: base, ids: ids) }
    }

    static func note(_ index: Int, base: Date, ids: IDs = .timeOrdered) -> BenchNote {
        let created = base.addingTimeInterval(Double(index))
        let color: String? = index % 3 == 0 ? nil : "blue"
        return BenchNote(
            id: ids == .random ? UUID() : UUID.timeOrdered(), title: "Note \(index)", body: "The body of note \(index), with a few words in it.",
            pinned: index % 7 == 0, created: created, modified: created.addingTimeInterval(0.5),
            priority: Int64(index % 5), wordCount: Int64(index % 1000), rating: Double(index % 100) / 10, color: color,
            archived: false)
    }

    var snapshot: EntitySnapshot {
        EntitySnapshot(entityName: "Note", id: id, values: [
            "title": .string(title), "body": .string(body), "pinned": .bool(pinned), "created": .date(created),
            "modified": .date(modified), "priority": .int64(priority), "wordCount": .int64(wordCount),
            "rating": .double(rating), "color": color.map(AttributeValue.string) ?? .null, "archived": .bool(archived),
        ])
    }
}

/// The benchmark's note declared with `@Model`, on the same table: read and written column by
/// column instead of through `Codable`.
@Model(name: "Note", mirrored: false)
struct BenchModelNote: Equatable {
    var id: UUID
    var title: String
    var body: String
    var pinned: Bool
    var created: Date
    var modified: Date
    var priority: Int64
    var wordCount: Int64
    var rating: Double
    var color: String?
    var archived: Bool

    init(_ note: BenchNote) {
        id = note.id
        title = note.title
        body = note.body
        pinned = note.pinned
        created = note.created
        modified = note.modified
        priority = note.priority
        wordCount = note.wordCount
        rating = note.rating
        color = note.color
        archived = note.archived
    }
}

/// Another entity, for live results that must not follow its commits.
@Model(mirrored: false)
struct BenchTag {
    var id = UUID.timeOrdered()
    var name = ""
}

extension BenchNote {
    /// The benchmark's schema with an index for the typed query's `WHERE` and `ORDER BY`, and a
    /// second entity.
    static let querySchema: Schema = {
        var schema = BenchNote.schema
        schema.entities[0].indexes = [["priority", "created"]]
        schema.entities.append(BenchTag.entityDescription)
        return schema
    }()
}
