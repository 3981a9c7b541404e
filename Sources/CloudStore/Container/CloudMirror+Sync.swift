import CloudStoreSync
import Foundation
import GRDB

extension CloudMirror {
    /// Exports local changes and sends them now.
    func sendNow() async throws {
        guard let engine else { throw ContainerError.localOnly }
        try await exportLocalChanges()
        try await engine.sendChanges()
    }

    /// Fetches and applies the server's changes now.
    func fetchNow() async throws {
        guard let engine else { throw ContainerError.localOnly }
        try await engine.fetchChanges()
    }

    /// Sends and fetches until nothing is left in either direction, retrying transient failures
    /// until `timeout`.
    func waitUntilSynced(timeout: Duration) async throws {
        guard let engine else { return }
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        var delay = Duration.milliseconds(50)
        while true {
            var lastError: (any Error)?
            do {
                try await exportLocalChanges()
                try await engine.sendChanges()
                try await engine.fetchChanges()
                try await exportLocalChanges()
                if try await isDrained() {
                    if !refusedUploads.isEmpty { throw ContainerError.uploadsRefused(refusedUploads) }
                    return
                }
            } catch let error as CloudError where error.isTransient {
                lastError = error
            } catch let error as CloudError {
                throw ContainerError.syncFailed(PersistentCloudContainer.SyncFailure(error))
            }
            guard clock.now + delay < deadline else {
                throw ContainerError.timedOut(timeout, lastFailure: lastError.map { error in
                    (error as? CloudError).map { PersistentCloudContainer.SyncFailure($0) }
                        ?? PersistentCloudContainer.SyncFailure(message: "\(error)")
                } ?? currentFailure)
            }
            try await Task.sleep(for: delay)
            delay = min(delay * 2, .seconds(2))
        }
    }

    /// Whether every local change is uploaded, apart from uploads the server refused for good.
    private func isDrained() async throws -> Bool {
        let refused = Set(refusedUploads.keys)
        let pending = try await store.read { context in
            try context.db.mirroredRecords(pendingOnly: true).filter { !refused.contains($0.recordName) }.count
        }
        let unexported = try unexportedTransactionCount()
        return pending == 0 && unexported == 0
    }

    func unexportedTransactionCount() throws -> Int {
        try CloudMirror.unexportedTransactions(in: store, after: nil)
    }

    /// Local transactions after the export position that export has not folded yet.
    static func unexportedTransactions(in store: PersistentStore, after token: HistoryToken?) throws -> Int {
        try store.read { context in
            let through = try token ?? context.db.mirrorState(.exportedThrough, as: HistoryToken.self)
            let number = through?.transactionNumber ?? 0
            return try Int.fetchOne(
                context.db,
                sql: "SELECT count(*) FROM cloudstore_history_transaction WHERE token > ? AND (author IS NULL OR author != ?)",
                arguments: [number, MirrorAuthor.import]) ?? 0
        }
    }
}

/// Why a container call failed.
public enum ContainerError: Error, Sendable, CustomStringConvertible {
    /// The container has no server: it keeps the store local only.
    case localOnly
    /// Not in sync within the time given; the last failure says why, if one happened.
    case timedOut(Duration, lastFailure: PersistentCloudContainer.SyncFailure?)
    /// The server refused some uploads for good (record name → error); the changes stay local.
    case uploadsRefused([String: ServerError])
    /// A request failed in a way retrying does not fix (credentials, a bad request).
    case syncFailed(PersistentCloudContainer.SyncFailure)

    public var description: String {
        switch self {
        case .localOnly:
            return "the container has no server configured; it keeps the store local only"
        case .timedOut(let timeout, let failure):
            return "not in sync after \(timeout)" + (failure.map { "; last failure: \($0)" } ?? "")
        case .uploadsRefused(let errors):
            let list = errors.sorted { $0.key < $1.key }.prefix(5).map { "\($0.key): \($0.value)" }.joined(separator: "; ")
            return "the server refused \(errors.count) upload(s), kept locally: \(list)"
        case .syncFailed(let failure):
            return "sync failed: \(failure)"
        }
    }
}

extension CloudMirror {
    func modifySchema(_ schema: CloudSchema) async throws -> CloudSchema {
        guard let engine else { throw ContainerError.localOnly }
        return try await engine.database.modifySchema(schema)
    }
}
