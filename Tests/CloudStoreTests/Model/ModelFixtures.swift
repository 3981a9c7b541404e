import CloudStore
import Foundation

/// The repository's folders, found from this file's path.
enum RepositoryPaths {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let notesSchema = root.appendingPathComponent("Schema/Notes.json")
    static let notesSchemaV1 = root.appendingPathComponent("Schema/Notes.v1.json")
}

/// The Notes app's entities as Swift types, matching Schema/Notes.json.
struct Folder: Entity, Equatable {
    var id = UUID()
    var title = ""
    var sortIndex: Int64 = 0
    var color: String?
    var notes: [UUID] = []
}

struct Note: Entity, Equatable {
    var id = UUID()
    var title = ""
    var body: String?
    var pinned = false
    var created: Date?
    var priority: Int64 = 0
    var rating = 0.0
    var attachment: Data?
    var link: URL?
    var externalID: UUID?
    var price: Decimal?
    var metadata: NoteMetadata?
    var folder: UUID?
    var tags: [UUID] = []
}

struct NoteMetadata: Codable, Equatable, Sendable {
    var wordCount: Int
    var language: String
}

struct Tag: Entity, Equatable {
    var id = UUID()
    var name = ""
    var color: String?
}

extension Schema {
    static func notes() throws -> Schema {
        try Schema.load(contentsOf: RepositoryPaths.notesSchema)
    }
}
