import CloudStore
import CloudStoreTesting
import Foundation
import Testing

/// `cloudstore schema validate FILE`.
@Suite("cloudstore schema validate")
struct CLISchemaValidateTests {
    @Test func validFile_printsOneSummaryLineAndExitsZero() async throws {
        let hash = try Schema.load(contentsOf: URL(fileURLWithPath: Fixtures.notesSchema)).schemaHash
        let result = await cloudstore("schema", "validate", Fixtures.notesSchema)
        #expect(result.status == 0)
        #expect(result.standardError.isEmpty)
        #expect(
            result.outputLines == [
                "\(Fixtures.notesSchema): \"Notes\" version 2 is valid: 3 entities (Folder, Note, Tag), hash \(hash)"
            ])
        let v1 = await cloudstore("schema", "validate", Fixtures.notesV1Schema)
        #expect(v1.status == 0)
        #expect(v1.standardOutput.contains("\"Notes\" version 1 is valid"))
    }

    @Test func invalidSchema_listsEveryProblemAndExitsOne() async throws {
        try await TemporaryDirectory.with { directory in
            let file = directory.appendingPathComponent("Broken.json")
            try Data(
                """
                {"name": "Broken", "version": 1, "entities": [
                  {"name": "Note",
                   "attributes": [{"name": "title", "type": "string"},
                                  {"name": "rank", "type": "integer", "default": 0}],
                   "relationships": [{"name": "folder", "destination": "Folder", "toMany": false, "inverse": "notez"}]},
                  {"name": "Folder",
                   "relationships": [{"name": "notes", "destination": "Note", "toMany": true, "inverse": "folder", "deleteRule": "deny"}]}
                ]}
                """.utf8
            ).write(to: file)
            let result = await cloudstore("schema", "validate", file.path)
            #expect(result.isOneLineFailure(mentioning: file.path, "is not a valid schema", "problems"), "\(result.standardError)")
            for problem in ["Note.title:", "Note.rank: unknown attribute type \"integer\"", "Note.folder:", "Folder.notes:", "deny"] {
                #expect(result.standardOutput.contains(problem), "missing \(problem) in:\n\(result.standardOutput)")
            }
            #expect(result.standardOutput.hasPrefix("schema \"Broken\" has "))
        }
    }

    @Test func notJSON_saysSoAndExitsOne() async throws {
        try await TemporaryDirectory.with { directory in
            let file = directory.appendingPathComponent("Notes.json")
            try Data("{\"name\": \"Notes\",".utf8).write(to: file)
            let result = await cloudstore("schema", "validate", file.path)
            #expect(result.isOneLineFailure(mentioning: file.path, "1 problem"))
            #expect(result.standardOutput.contains("the file is not valid JSON"))
        }
    }

    @Test func missingFile_namesThePathAndExitsOne() async {
        let result = await cloudstore("schema", "validate", "/nonexistent/Notes.json")
        #expect(result.isOneLineFailure(mentioning: "no schema file at /nonexistent/Notes.json"), "\(result.standardError)")
        #expect(result.standardOutput.isEmpty)
    }

    @Test func directory_isRefusedWithAHint() async throws {
        try await TemporaryDirectory.with { directory in
            let result = await cloudstore("schema", "validate", directory.path)
            #expect(result.isOneLineFailure(mentioning: directory.path, "is a directory"))
        }
    }

    @Test func noArgument_isAUsageError() async {
        let result = await cloudstore("schema", "validate")
        #expect(result.status == 2)
        #expect(result.standardError.contains("Missing expected argument '<file>'"))
    }
}
