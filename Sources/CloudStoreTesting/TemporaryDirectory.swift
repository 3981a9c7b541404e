import Foundation

/// A new directory under the system's temporary directory, removed with everything in it when the
/// value goes away.
///
/// Keep a reference for as long as the test needs the directory:
///
/// ```swift
/// let directory = try TemporaryDirectory()
/// let store = try PersistentStore(url: directory.file("notes.sqlite"), schema: schema)
/// // ... the directory is removed when `directory` is released ...
/// ```
///
/// Or let ``with(prefix:_:)`` scope it to a closure.
public final class TemporaryDirectory: Sendable {
    /// The directory; it exists from ``init(prefix:)`` until the value is released.
    ///
    /// ```swift
    /// let directory = try TemporaryDirectory()
    /// print(directory.url.path)   // /tmp/cloudstore-tests-0E1B…
    /// ```
    public let url: URL

    /// Creates `<temporary directory>/<prefix>-<UUID>`.
    ///
    /// ```swift
    /// let directory = try TemporaryDirectory(prefix: "my-app-tests")
    /// ```
    public init(prefix: String = "cloudstore-tests") throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit { remove() }

    /// The URL of a file (or folder) named `name` in the directory; nothing is created.
    ///
    /// ```swift
    /// let storeURL = directory.file("A.sqlite")
    /// ```
    public func file(_ name: String) -> URL { url.appendingPathComponent(name) }

    /// Runs `body` with a new directory and removes the directory afterwards, also when `body` throws.
    ///
    /// ```swift
    /// try await TemporaryDirectory.with { directory in
    ///     let store = try PersistentStore(url: directory.appendingPathComponent("notes.sqlite"), schema: schema)
    ///     // ...
    /// }
    /// ```
    public static func with<T>(prefix: String = "cloudstore-tests", _ body: (URL) async throws -> T) async throws -> T {
        let directory = try TemporaryDirectory(prefix: prefix)
        return try await running { try await body(directory.url) } finally: { directory.remove() }
    }

    private func remove() { try? FileManager.default.removeItem(at: url) }
}

/// Runs `body`, then `finish`, also when `body` throws; then `body`'s error is the one thrown and
/// `finish`'s own failure is dropped.
func running<T>(_ body: () async throws -> T, finally finish: () async throws -> Void) async throws -> T {
    let result: T
    do {
        result = try await body()
    } catch {
        try? await finish()
        throw error
    }
    try await finish()
    return result
}
