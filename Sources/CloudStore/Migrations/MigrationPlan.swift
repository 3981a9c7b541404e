import Foundation
import GRDB

/// One explicit migration step: SQL or Swift code run when a store migrates to `version`.
///
/// ```swift
/// let step = MigrationStep(version: 2, name: "fill-created",
///                          sql: "UPDATE Note SET created = 0 WHERE created IS NULL")
/// let code = MigrationStep(version: 3, name: "split-names") { db in
///     try db.execute(sql: "UPDATE Person SET first = substr(name, 1, instr(name, ' ') - 1)")
/// }
/// ```
///
/// Steps run inside the migration's transaction, after the automatic (lightweight) changes have
/// added the new version's tables and columns and before columns and tables the new version
/// removed are dropped, so a step can move data from the old shape to the new one. Steps do
/// not record history.
public struct MigrationStep: Sendable {
    enum Action: Sendable {
        case sql(String)
        case code(@Sendable (Database) throws -> Void)
    }

    /// The schema version this step migrates to.
    public var version: Int
    /// The step's name, used in errors (a file step's name is its file name).
    public var name: String
    let action: Action

    /// A step that runs `sql` (one or more statements) when the store migrates to `version`.
    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.action = .sql(sql)
    }

    /// A step that runs `body` on the migration's connection when the store migrates to
    /// `version`; a throw fails the migration and leaves the store unchanged.
    public init(version: Int, name: String, _ body: @escaping @Sendable (Database) throws -> Void) {
        self.version = version
        self.name = name
        self.action = .code(body)
    }
}

/// The explicit steps a store may need when it opens with a newer schema version.
///
/// Load them from a migrations folder laid out as `<folder>/<schema name>/<version>-<name>.sql`
/// (see `Migrations/README.md`), or build them in Swift:
///
/// ```swift
/// let plan = try MigrationPlan.load(directory: URL(fileURLWithPath: "Migrations"), schemaName: "Notes")
/// let store = try PersistentStore(url: url, schema: schema, migrations: plan)
/// ```
public struct MigrationPlan: Sendable {
    /// The steps, in any order: each runs when a migration passes its version, in version then
    /// name order.
    public var steps: [MigrationStep]

    /// A plan of these steps; with none, the store migrates with the automatic changes alone.
    public init(_ steps: [MigrationStep] = []) {
        self.steps = steps
    }

    /// Reads the `.sql` steps of `schemaName` from `<directory>/<schemaName>/`. A missing folder
    /// is an empty plan. Each file is named `<version>-<name>.sql`, for example
    /// `2-fill-created.sql`; files of one version run in name order. A `.sql` file named
    /// otherwise is an error, so a misnamed step is never silently skipped.
    public static func load(directory: URL, schemaName: String) throws -> MigrationPlan {
        let folder = directory.appendingPathComponent(schemaName, isDirectory: true)
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder.path) else {
            return MigrationPlan()
        }
        var steps: [MigrationStep] = []
        for name in names.sorted() where name.hasSuffix(".sql") {
            let stem = name.dropLast(4)
            guard let dash = stem.firstIndex(of: "-"), let version = Int(stem[..<dash]), version >= 1,
                stem.index(after: dash) < stem.endIndex
            else {
                throw StoreError(
                    .migrationFailed,
                    "\(folder.path)/\(name) is not named <version>-<name>.sql (for example 2-fill-created.sql); rename it so it runs")
            }
            let url = folder.appendingPathComponent(name)
            let sql: String
            do {
                sql = try String(contentsOf: url, encoding: .utf8)
            } catch {
                throw StoreError(.migrationFailed, "\(url.path) cannot be read as UTF-8 text: \(error.localizedDescription)")
            }
            steps.append(MigrationStep(version: version, name: name, sql: sql))
        }
        return MigrationPlan(steps)
    }

    /// The steps for versions after `old` up to `new`, in version then name order.
    func steps(after old: Int, through new: Int) -> [MigrationStep] {
        steps.enumerated()
            .filter { $0.element.version > old && $0.element.version <= new }
            .sorted { ($0.element.version, $0.element.name, $0.offset) < ($1.element.version, $1.element.name, $1.offset) }
            .map(\.element)
    }
}
