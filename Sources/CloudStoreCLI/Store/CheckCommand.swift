import ArgumentParser
import CloudStore
import Foundation

/// `cloudstore check --store PATH [--schema FILE] [--json]`: every stored value that does not
/// read as its attribute, one line each; exits 1 when there is one.
///
/// ```sh
/// $ cloudstore check --store books.sqlite
/// ENTITY  ATTRIBUTE  OBJECT                                PROBLEM
/// Book    rating     01A24B7C-9DE4-7288-B14E-4714B45F86FC  null, but the attribute is required (…); give it a value with …
/// 1 value does not read: a fetch of its object fails until it is repaired
/// ```
public struct CheckCommand: CloudStoreSubcommand {
    public static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Find stored values that do not read as their attribute.",
        discussion: """
            Reads every object of every entity and lists each value a fetch would fail on: a \
            null in a required attribute (a NaN saved before CloudStore refused it leaves one) or \
            a value of another kind written outside the store. Each line names the entity, the \
            attribute, the object and how to repair it. Exits 0 when every value reads, 1 when \
            one does not. \(StoreFile.inspectionPromise)

            Example:
              cloudstore check --store notes.sqlite
              cloudstore check --store notes.sqlite --json
            """)

    @Option(help: "The store file (SQLite).")
    var store: String

    @Option(help: "The schema file to open the store with; by default the schema the store keeps.")
    var schema: String?

    @Flag(help: "Print JSON instead of text.")
    var json = false

    @OptionGroup public var global: GlobalOptions

    public init() {}

    public func run(in context: CommandContext) async throws {
        let opened = try StoreFile.inspect(store, schemaPath: schema, logger: context.logger("store"))
        defer { try? opened.close() }
        let problems = try await opened.read { try $0.storedValueProblems() }
        if json {
            try context.output.printJSON(
                problems.map { ProblemJSON(entity: $0.entityName, attribute: $0.attribute, id: $0.objectID, problem: $0.problem) })
        } else if problems.isEmpty {
            context.output.print("every stored value reads as its attribute")
        } else {
            var table = TextTable([["ENTITY", "ATTRIBUTE", "OBJECT", "PROBLEM"]])
            for problem in problems {
                table.append([problem.entityName, problem.attribute, problem.objectID.uuidString, problem.problem])
            }
            context.output.print(table)
            context.output.print(
                "\(problems.count) \(problems.count == 1 ? "value does" : "values do") not read: a fetch of \(problems.count == 1 ? "its object" : "their objects") fails until it is repaired")
        }
        if !problems.isEmpty { throw ExitCode(CloudStoreCommand.failure) }
    }
}

/// A problem as `check --json` prints it.
private struct ProblemJSON: Encodable {
    var entity: String
    var attribute: String
    var id: UUID
    var problem: String
}
