import CloudStore
import Foundation

/// Where `migrate` and `schema init --store` find a schema's explicit migration steps.
///
/// `--migrations DIR` when given; otherwise a `Migrations` folder holding `<schema name>/`, looked
/// for beside the schema file's folder (the layout of this repository: `Schema/Notes.json` and
/// `Migrations/Notes/2-clamp-priority.sql`), then in the schema file's folder, then in the current
/// directory. So steps kept where
/// the project keeps them are never skipped for want of a flag; the command says which folder it
/// used, or that it found none.
struct MigrationSteps {
    var plan: MigrationPlan
    /// The folder the steps came from, when one was found.
    var folder: String?

    static func find(explicit: String?, schemaPath: String, schema: Schema) throws -> MigrationSteps {
        if let explicit {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: explicit, isDirectory: &isDirectory), isDirectory.boolValue else {
                throw CommandError(
                    "no migrations folder at \(explicit): check the path (it holds <schema name>/<version>-<name>.sql files)")
            }
            return MigrationSteps(
                plan: try MigrationPlan.load(directory: URL(fileURLWithPath: explicit), schemaName: schema.name),
                folder: explicit)
        }
        let schemaFolder = URL(fileURLWithPath: schemaPath).deletingLastPathComponent()
        let candidates = [
            schemaFolder.deletingLastPathComponent().appendingPathComponent("Migrations"),
            schemaFolder.appendingPathComponent("Migrations"),
            URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent("Migrations"),
        ]
        for candidate in candidates {
            var isDirectory: ObjCBool = false
            let folder = candidate.appendingPathComponent(schema.name)
            if FileManager.default.fileExists(atPath: folder.path, isDirectory: &isDirectory), isDirectory.boolValue {
                return MigrationSteps(
                    plan: try MigrationPlan.load(directory: candidate, schemaName: schema.name),
                    folder: candidate.standardizedFileURL.path)
            }
        }
        return MigrationSteps(plan: MigrationPlan(), folder: nil)
    }

    /// One line saying where the steps came from, for a store that migrates across versions.
    func describe(schemaName: String) -> String {
        guard let folder else {
            return "no migration steps: no Migrations/\(schemaName)/ beside the schema's folder or here (--migrations DIR names another)"
        }
        return "migration steps from \(folder)/\(schemaName)"
    }
}
