import CloudStore
import Foundation

// The example Notes app's model: folders of notes, and tags on notes. `Schema/Notes.json` is
// this model written as a schema file (`NotesModel.schema.fileData()`); a test keeps the two equal.

/// A folder of notes. Deleting it deletes its notes.
@Model
package struct Folder: Equatable {
    package var id = UUID.timeOrdered()
    package var title = ""
    package var sortIndex: Int64 = 0
    package var color: String?
    @Relationship(deleteRule: .cascade, inverse: \Note.folder) package var notes: [Note.ID] = []

    package init(
        id: UUID = UUID.timeOrdered(), title: String = "", sortIndex: Int64 = 0, color: String? = nil, notes: [Note.ID] = []
    ) {
        self.id = id
        self.title = title
        self.sortIndex = sortIndex
        self.color = color
        self.notes = notes
    }
}

/// A note, in at most one folder, with any number of tags.
@Model(indexes: [["pinned", "created"], ["folder"]])
package struct Note: Equatable {
    package var id = UUID.timeOrdered()
    /// Kept in history's tombstone when the note is deleted.
    @Attribute(.preserveAfterDeletion) package var title = ""
    package var body: String?
    package var pinned = false
    package var created: Date?
    /// Called `rank` in version 1 of the schema.
    @Attribute(originalName: "rank") package var priority: Int64 = 0
    package var rating = 0.0
    package var attachment: Data?
    package var link: URL?
    package var externalID: UUID?
    package var price: Decimal?
    /// Stored as JSON.
    package var metadata: NoteMetadata?
    package var folder: Folder.ID?
    @Relationship(inverse: \Tag.notes) package var tags: [Tag.ID] = []

    package init(
        id: UUID = UUID.timeOrdered(), title: String = "", body: String? = nil, pinned: Bool = false,
        created: Date? = nil, priority: Int64 = 0, rating: Double = 0, attachment: Data? = nil, link: URL? = nil,
        externalID: UUID? = nil, price: Decimal? = nil, metadata: NoteMetadata? = nil, folder: Folder.ID? = nil,
        tags: [Tag.ID] = []
    ) {
        self.id = id
        self.title = title
        self.body = body
        self.pinned = pinned
        self.created = created
        self.priority = priority
        self.rating = rating
        self.attachment = attachment
        self.link = link
        self.externalID = externalID
        self.price = price
        self.metadata = metadata
        self.folder = folder
        self.tags = tags
    }
}

/// What the app knows about a note's text.
package struct NoteMetadata: Codable, Equatable, Sendable {
    package var wordCount: Int
    package var language: String

    package init(wordCount: Int, language: String) {
        self.wordCount = wordCount
        self.language = language
    }
}

/// A tag, on any number of notes.
@Model
package struct Tag: Equatable {
    package var id = UUID.timeOrdered()
    package var name = ""
    package var color: String?
    /// The inverse of `Note.tags`, which declares it.
    package var notes: [Note.ID] = []

    package init(id: UUID = UUID.timeOrdered(), name: String = "", color: String? = nil, notes: [Note.ID] = []) {
        self.id = id
        self.name = name
        self.color = color
        self.notes = notes
    }
}

/// The model's schema.
package enum NotesModel {
    package static let schema = Schema(name: "Notes", version: 2, entities: [Folder.self, Note.self, Tag.self])
}
