import CloudStore
import Foundation

/// Reads the schema file a command names.
enum SchemaFile {
    /// The schema in the file at `path`.
    ///
    /// - Throws: ``CommandError`` when there is no readable file at `path`; `SchemaError`, listing
    ///   every problem, when the file is not a valid schema.
    static func load(_ path: String) throws -> Schema {
        let url = try InputFile.existing(
            path, missing: "no schema file at \(path): check the path", kind: "a schema file (e.g. Schema/Notes.json)")
        return try Schema.load(contentsOf: url)
    }
}
