import CloudStore
import CloudStoreTesting
import Foundation
import Testing

/// The schema loader fed random JSON and mutations of the repository's schema files: each input
/// loads or throws a `SchemaError` naming its problems; nothing crashes. Seeded like the wire fuzz
/// tests (`CLOUDSTORE_FUZZ_SEED`, `CLOUDSTORE_SOAK=1`).
@Suite struct SchemaFileFuzzTests {
    static var cases: Int { ReliabilityRun.count(ci: 800, soak: 40_000) }

    static let seed = ReliabilityRun.seed(fixed: 20_260_125)

    @Test func schemaLoader_loadsOrThrowsSchemaError() async throws {
        let seeds = try [RepositoryPaths.notesSchema, RepositoryPaths.notesSchemaV1].map { try Data(contentsOf: $0) }
        let seed = Self.seed
        var fuzzer = JSONFuzzer(seed: seed)
        var loaded = 0
        var problems = 0
        for index in 0..<Self.cases {
            if index % 10 == 0 { await Task.yield() }  // CPU-bound: let other tests run on the shared pool
            let input = fuzzer.next(from: seeds)
            do {
                _ = try Schema.load(input)
                loaded += 1
            } catch let error as SchemaError {
                #expect(!error.problems.isEmpty, "a SchemaError names at least one problem")
                problems += 1
            } catch {
                Issue.record("seed \(seed): \(type(of: error)) \(error) for \(String(decoding: input.prefix(300), as: UTF8.self))")
            }
        }
        print("fuzz: schema loader seed \(seed), cases \(ReportFormat.count(Self.cases)), loaded \(ReportFormat.count(loaded)), refused \(ReportFormat.count(problems)), crashes 0")
    }

    @Test(arguments: ["1e300", "-1e300", "9223372036854775807", "1e19"])
    func dateDefault_outOfRangeIsAProblemNotACrash(_ milliseconds: String) throws {
        let json = #"""
            {"name": "S", "version": 1, "entities": [{"name": "Event",
              "attributes": [{"name": "when", "type": "date", "default": \#(milliseconds)}]}]}
            """#
        let error = try #require(throws: SchemaError.self) { try Schema.load(Data(json.utf8)) }
        #expect(error.problems.contains { $0.property == "when" && $0.message.contains("is not a valid date") }, "\(error)")
    }
}
