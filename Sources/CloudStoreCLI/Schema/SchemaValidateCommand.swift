import ArgumentParser
import CloudStore
import Foundation

/// `cloudstore schema validate FILE`: checks a schema file against the rules of a mirrored store.
///
/// ```sh
/// $ cloudstore schema validate Schema/Notes.json
/// Schema/Notes.json: "Notes" version 2 is valid: 3 entities (Folder, Note, Tag), hash b70d8a78edc6044a
/// ```
///
/// An invalid file lists every problem on standard output and exits with status 1.
public struct SchemaValidateCommand: CloudStoreSubcommand {
    public static let configuration = CommandConfiguration(
        commandName: "validate",
        abstract: "Check a schema file and list every problem in it.",
        discussion: """
            Reads the file, checks its format and the rules a mirrored store needs (attributes \
            optional or with a default, relationships with inverses, no "deny" delete rule, no \
            external-storage attribute in a mirrored uniqueness constraint, valid names), and \
            prints one line with \
            the schema's name, version, entities and hash. An invalid file prints every problem, \
            each naming its entity and property, and exits with status 1.

            Example:
              cloudstore schema validate Schema/Notes.json
            """)

    @Argument(help: "The schema file (JSON with \"name\", \"version\" and \"entities\").")
    var file: String

    @OptionGroup public var global: GlobalOptions

    public init() {}

    public func run(in context: CommandContext) async throws {
        let schema: Schema
        do {
            schema = try SchemaFile.load(file)
        } catch let error as SchemaError {
            context.output.print(error.description)
            throw CommandError(
                "\(file) is not a valid schema (\(Self.count(error.problems.count, "problem")), listed on standard output): fix them and validate again")
        }
        let names = schema.entities.map(\.name).joined(separator: ", ")
        context.output.print(
            "\(file): \"\(schema.name)\" version \(schema.version) is valid: \(Self.count(schema.entities.count, "entity", "entities")) (\(names)), hash \(schema.schemaHash)")
    }

    /// "1 problem", "3 problems".
    static func count(_ number: Int, _ singular: String, _ plural: String? = nil) -> String {
        "\(number) \(number == 1 ? singular : plural ?? singular + "s")"
    }
}
