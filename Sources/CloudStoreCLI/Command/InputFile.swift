import Foundation

/// Checks a file a command reads before it reads it, so that the error names the path.
enum InputFile {
    /// The file at `path`.
    ///
    /// - Parameters:
    ///   - missing: the message when nothing is at `path`.
    ///   - kind: what the file should be, for the message when `path` is a directory
    ///     (`a schema file (e.g. Schema/Notes.json)`).
    /// - Throws: ``CommandError`` when nothing is at `path` or it is a directory.
    static func existing(_ path: String, missing: @autoclosure () -> String, kind: String) throws -> URL {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw CommandError(missing())
        }
        guard !isDirectory.boolValue else {
            throw CommandError("\(path) is a directory: give the path of \(kind)")
        }
        return URL(fileURLWithPath: path)
    }
}
