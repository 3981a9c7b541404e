import AsyncHTTPClient
import CloudStoreWire
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization

extension HTTPCloudDatabase {
    /// Runs an asset transfer with a deadline on progress rather than on the total: it fails with
    /// `.timeout` when `progress` does not advance for ``requestTimeout``, however long it runs
    /// while bytes keep moving.
    func withProgressDeadline<T: Sendable>(
        _ method: HTTPMethod, _ path: String, _ progress: TransferProgress,
        _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let timeout = requestTimeout
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await body() }
            group.addTask {
                while true {
                    try await Task.sleep(for: timeout / 4)
                    if progress.idle > timeout {
                        throw CloudError(.timeout, message: "\(method.rawValue) \(path) moved no byte for \(timeout)")
                    }
                }
            }
            defer { group.cancelAll() }
            while let result = try await group.next() {
                if let result { return result }
            }
            throw CancellationError()
        }
    }
}

/// When a transfer last moved a byte.
final class TransferProgress: Sendable {
    private let last = Mutex(ContinuousClock.now)

    func advance() { last.withLock { $0 = .now } }

    /// How long since the last progress.
    var idle: Duration { ContinuousClock.now - last.withLock { $0 } }
}

/// A file's bytes in chunks of 1 MiB, read as the upload sends them.
struct FileChunks: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    static let chunkSize = 1 << 20

    let file: URL
    let progress: TransferProgress

    struct AsyncIterator: AsyncIteratorProtocol {
        let file: URL
        let progress: TransferProgress
        var handle: FileHandle?

        mutating func next() async throws -> ByteBuffer? {
            if handle == nil { handle = try FileHandle(forReadingFrom: file) }
            progress.advance()
            guard let data = try handle?.read(upToCount: FileChunks.chunkSize), !data.isEmpty else {
                try handle?.close()
                return nil
            }
            return ByteBuffer(bytes: data)
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(file: file, progress: progress)
    }
}
