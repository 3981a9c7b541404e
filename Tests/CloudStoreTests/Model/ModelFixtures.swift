import CloudStore
import Foundation

/// The repository's folders, found from this file's path.
enum RepositoryPaths {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let notesSchema = root.appendingPathComponent("Schema/Notes.json")
    static let notesSchemaV1 = root.appendingPathComponent("Schema/Notes.v1.json")
}

// The Notes app's model (`Folder`, `Note`, `Tag`, `NoteMetadata`), which Schema/Notes.json is
// written from; most tests read and write it, through the code `@Model` generates.
@_exported import NotesExample

/// The example's tag, not Swift Testing's.
typealias Tag = NotesExample.Tag

/// The same entities as plain `Codable` structs, which the store reads and writes through
/// `Codable`: what an app declared before `@Model`, and still may.
struct PlainFolder: Entity, Equatable {
    static let entityName = "Folder"
    var id = UUID()
    var title = ""
    var sortIndex: Int64 = 0
    var color: String?
    var notes: [UUID] = []
}

struct PlainNote: Entity, Equatable {
    static let entityName = "Note"
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

struct PlainTag: Entity, Equatable {
    static let entityName = "Tag"
    var id = UUID()
    var name = ""
    var color: String?
}

extension Schema {
    static func notes() throws -> Schema {
        try Schema.load(contentsOf: RepositoryPaths.notesSchema)
    }
}
