// Lists the public symbols of a DocC archive's coverage report that have no summary, and fails if
// there are any: `swift .ci/doc-coverage.swift <archive>.doccarchive/documentation-coverage.json`.
// The archive must be built with `--experimental-documentation-coverage
// --experimental-skip-synthesized-symbols` (what the compiler synthesizes, `!=` or a protocol's
// default implementations, has no source to document).
import Foundation

let path = CommandLine.arguments.dropFirst().first ?? ""
guard let data = FileManager.default.contents(atPath: path),
      let entries = try JSONSerialization.jsonObject(with: data) as? [[String: Any]]
else {
    print("doc-coverage: cannot read a coverage report at '\(path)'; build the documentation with --experimental-documentation-coverage first")
    exit(2)
}
let undocumented = entries.filter { entry in
    let kind = entry["kind"] as? [String: Any]
    return kind?["isSymbol"] as? Bool == true && entry["hasAbstract"] as? Bool == false
}.compactMap { $0["referencePath"] as? String }.sorted()
for reference in undocumented {
    print("doc-coverage: no summary: \(reference)")
}
exit(undocumented.isEmpty ? 0 : 1)
