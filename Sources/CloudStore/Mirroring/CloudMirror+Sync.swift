import CloudStoreSync
import Foundation
import GRDB

extension CloudMirror {
    /// Sends the pending uploads now.
    func sendNow() async throws {
        guard let engine else { throw ContainerError.localOnly }
        try await containerErrors { try await engine.sendChanges() }
    }

    /// Fetches and applies the server's changes now.
    func fetchNow() async throws {
        guard let engine else { throw ContainerError.localOnly }
        try await containerErrors { try await engine.fetchChanges() }
    }

    /// Sends, then fetches; sends again if the fetch released creates held back until a fetch
    /// covered them (``UnheardCreates``).
    func syncNow() async throws {
        try await sendNow()
        let held = heldBackCreates
        try await fetchNow()
        if heldBackCreates < held { try await sendNow() }
    }

    /// Sends and fetches until nothing is left in either direction, retrying transient failures
    /// until `timeout`.
    func waitUntilSynced(timeout: Duration) async throws {
        guard let engine else { return }
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        var delay = Duration.milliseconds(50)
        while true {
            var lastError: CloudError?
            do {
                try await containerErrors {
                    try await engine.sendChanges()
                    try await engine.fetchChanges()
                }
                let (pending, refused) = try await store.read { context in
                    (try context.db.pendingUploadCount(), try context.db.refusedUploads())
                }
                if pending == 0 {
                    if !refused.isEmpty { throw ContainerError.uploadsRefused(refused) }
                    return
                }
            } catch let error as CloudError where error.isTransient {
                lastError = error
            } catch let error as CloudError {
                throw ContainerError.syncFailed(PersistentCloudContainer.SyncFailure(error))
            }
            guard clock.now + delay < deadline else {
                throw ContainerError.timedOut(timeout, lastFailure: lastError.map { PersistentCloudContainer.SyncFailure($0) } ?? currentFailure)
            }
            try await Task.sleep(for: delay)
            delay = min(delay * 2, .seconds(2))
        }
    }

    /// Runs engine operations, turning an engine stopped by rejected credentials into the
    /// container's error.
    private func containerErrors(_ body: () async throws -> Void) async throws {
        do {
            try await body()
        } catch let error as SyncEngineError where error.code == .stopped {
            throw ContainerError.syncFailed(
                PersistentCloudContainer.SyncFailure(code: .authenticationFailed, message: ContainerError.credentialsRejected))
        }
    }

    func modifySchema(_ schema: CloudSchema) async throws -> CloudSchema {
        guard let engine else { throw ContainerError.localOnly }
        return try await engine.database.modifySchema(schema)
    }
}
