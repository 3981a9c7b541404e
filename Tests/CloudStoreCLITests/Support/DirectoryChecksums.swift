import Crypto
import Foundation

/// The SHA-256 of every file below a directory, by path relative to it: equal before and after a
/// command that must leave the directory as it was, both in the bytes of each file and in the list
/// of files.
struct DirectoryChecksums: Equatable, CustomStringConvertible {
    /// Checksums by relative path; a file whose contents are not compared has an empty one.
    var files: [String: String]

    /// - Parameter uncompared: suffixes of files that must exist (or not) as before but whose
    ///   bytes may change (`-shm`, the index every reader of a live WAL database writes to).
    init(_ directory: URL, ignoringContentsOf uncompared: [String] = []) throws {
        files = [:]
        let root = directory.resolvingSymlinksInPath().path + "/"
        let enumerator = FileManager.default.enumerator(
            at: directory.resolvingSymlinksInPath(), includingPropertiesForKeys: [.isRegularFileKey])
        while let url = enumerator?.nextObject() as? URL {
            guard try url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile == true else { continue }
            let name = String(url.resolvingSymlinksInPath().path.dropFirst(root.count))
            files[name] =
                uncompared.contains(where: name.hasSuffix)
                ? "" : SHA256.hash(data: try Data(contentsOf: url)).map { String(format: "%02x", $0) }.joined()
        }
    }

    /// The files' relative paths, sorted.
    var names: [String] { files.keys.sorted() }

    var description: String {
        names.map { "\($0) \(files[$0]!.prefix(12))" }.joined(separator: ", ")
    }
}
