/// One problem with a schema, naming where it is.
public struct SchemaProblem: Hashable, Sendable, CustomStringConvertible {
    /// The entity the problem is in, if any.
    public var entity: String?
    /// The attribute, relationship or index the problem is in, if any.
    public var property: String?
    /// What is wrong and, where it helps, how to fix it.
    public var message: String

    /// A problem with `message`, in `entity` and `property` when given.
    public init(entity: String? = nil, property: String? = nil, _ message: String) {
        self.entity = entity
        self.property = property
        self.message = message
    }

    /// `Note.folder: inverse "notez" is not a relationship of Folder`.
    public var description: String {
        switch (entity, property) {
        case (let entity?, let property?): "\(entity).\(property): \(message)"
        case (let entity?, nil): "\(entity): \(message)"
        case (nil, let property?): "\(property): \(message)"
        case (nil, nil): message
        }
    }
}

/// A schema that cannot be used, with every problem found in it, not only the first.
///
/// ```
/// schema "Notes" has 3 problems:
///   - Note.priority: unknown attribute type "integer" (use one of string, int64, double, bool, date, data, uuid, url, decimal, json)
///   - Note.folder: inverse "notez" is not a relationship of Folder
///   - Tag: the entity is declared twice
/// ```
public struct SchemaError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The schema's name, or the file it came from.
    public var schema: String
    /// Every problem found, in the order they were found.
    public var problems: [SchemaProblem]

    /// An error listing `problems` of `schema`.
    public init(schema: String, problems: [SchemaProblem]) {
        self.schema = schema
        self.problems = problems
    }

    /// A heading with the schema and the number of problems, then one line per problem.
    public var description: String {
        let count = problems.count == 1 ? "1 problem" : "\(problems.count) problems"
        return (["schema \"\(schema)\" has \(count):"] + problems.map { "  - \($0)" }).joined(separator: "\n")
    }
}

/// "a" or "an" for a word, as messages need it: "an int64", "a string".
func article(_ word: String) -> String {
    ["a", "e", "i", "o", "u"].contains(word.first.map(String.init) ?? "") ? "an" : "a"
}
