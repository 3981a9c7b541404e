import CloudStore
import CloudStoreTesting
import Foundation
import Logging
import Testing

extension Logger {
    /// Warnings and errors only, so test output stays readable.
    static let quiet: Logger = {
        var logger = Logger(label: "cloudstore.tests")
        logger.logLevel = .warning
        return logger
    }()
}

/// Opens a store as the tests do: with a quiet logger.
func openStore(
    _ url: URL, _ schema: Schema, migrations: MigrationPlan = MigrationPlan(),
    configuration: PersistentStore.Configuration = .init()
) throws -> PersistentStore {
    try PersistentStore(url: url, schema: schema, migrations: migrations, configuration: configuration, logger: .quiet)
}

/// A Notes store in a temporary directory.
struct StoreFixture {
    let directory: TemporaryDirectory
    let store: PersistentStore
    var url: URL { store.url }

    init(schema: Schema? = nil, configuration: PersistentStore.Configuration = .init()) throws {
        directory = try TemporaryDirectory()
        var configuration = configuration
        configuration.synchronous = .normal
        store = try openStore(directory.file("store.sqlite"), schema ?? Schema.notes(), configuration: configuration)
    }

    /// Another store instance on the same file, as another process would open it.
    func reopen(schema: Schema? = nil) throws -> PersistentStore {
        try openStore(url, schema ?? store.schema)
    }
}

/// The error a throwing expression throws, as a store error.
func storeError(_ body: () throws -> Void) -> StoreError? {
    do {
        try body()
        return nil
    } catch {
        return error as? StoreError
    }
}

/// Awaits `operation`, failing if it takes longer than `seconds` (a guard against a hung test,
/// not a way to wait for something).
func withTimeout<T: Sendable>(
    seconds: Double = 20, _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            return nil
        }
        defer { group.cancelAll() }
        guard case .some(.some(let value)) = try await group.next() else { throw TimeoutError(seconds: seconds) }
        return value
    }
}

struct TimeoutError: Error, CustomStringConvertible {
    var seconds: Double
    var description: String { "timed out after \(seconds) s" }
}

/// The test helper executable, built beside the test bundle.
enum TestHelperProcess {
    static var executable: URL {
        let bundle = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        return bundle.deletingLastPathComponent().appendingPathComponent("CloudStoreTestHelper")
    }

    /// Starts the helper with arguments; its standard output is readable line by line.
    static func start(_ arguments: [String]) throws -> (ChildProcess, LineReader) {
        let output = Pipe()
        let child = try ChildProcess.spawn(executable, arguments, standardOutput: .pipe(output))
        return (child, LineReader(handle: output.fileHandleForReading))
    }
}

/// Reads a child's output one line at a time (nil at end of output). The read blocks a thread of
/// its own, never one of the cooperative pool: a test blocked there while a child works would
/// stall every other test's tasks on a machine with few cores.
final class LineReader: @unchecked Sendable {  // used by one test at a time
    let handle: FileHandle
    private var buffer = Data()

    init(handle: FileHandle) { self.handle = handle }

    /// The next line, or nil at the end of the output.
    func nextLine() async -> String? {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: self.readLine()) }
        }
    }

    private func readLine() -> String? {
        while true {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                buffer.removeSubrange(buffer.startIndex...newline)
                return line
            }
            let chunk = handle.availableData
            if chunk.isEmpty { return nil }
            buffer.append(chunk)
        }
    }
}

/// A note snapshot with a title.
func noteSnapshot(_ title: String, id: UUID = UUID()) -> EntitySnapshot {
    EntitySnapshot(entityName: "Note", id: id, values: ["title": .string(title)])
}
