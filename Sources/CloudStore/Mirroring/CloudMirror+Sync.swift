import CloudStoreSync
import Foundation
import GRDB

extension CloudMirror {
    /// The engines, private first, then shared and public; throws when the container has no server.
    private func allEngines() async throws -> [any MirrorEngine] {
        try await checkCanSync()
        guard let engine else { throw ContainerError.localOnly }
        return [engine] + [DatabaseScope.shared, .public].compactMap { engines[$0]?.engine }
    }

    /// Sends the pending uploads now, through every database.
    func sendNow() async throws {
        for engine in try await allEngines() {
            try await containerErrors { try await engine.sendChanges(SyncEngine.SendChangesOptions()) }
        }
    }

    /// Fetches and applies the server's changes now, from every database.
    func fetchNow() async throws {
        for engine in try await allEngines() {
            try await containerErrors { try await engine.fetchChanges(SyncEngine.FetchChangesOptions()) }
        }
    }

    /// How many creates wait for a fetch before they go out again.
    var heldBackCreates: Int { engines.values.reduce(0) { $0 + $1.unheardCreates.waiting.count } }

    /// Where the primary zone stands on the server, as the store keeps it.
    private func primaryZoneState() async throws -> ZoneServerState {
        try await store.read { try Ledger($0.db).primaryZone()?.serverState ?? .unsaved }
    }

    /// Sends, then fetches; sends again if the fetch released creates held back until a fetch
    /// covered them (``UnheardCreates``), or made again a zone the send found missing.
    func syncNow() async throws {
        try await sendNow()
        let held = heldBackCreates
        let missing = try await primaryZoneState() == .missing
        try await fetchNow()
        // Creates released, or a zone the send found missing created again: send what waits.
        var remade = false
        if missing, try await primaryZoneState() != .missing {
            remade = try await pausingDecision() == nil
        }
        if heldBackCreates < held || remade { try await sendNow() }
        // A decision the fetch asked for stops the sync here: nothing more goes until the app decides.
        try await checkDecisions()
    }

    /// Sends and fetches until nothing is left in either direction, retrying transient failures
    /// until `timeout`.
    func waitUntilSynced(timeout: Duration) async throws {
        try await checkCanSync()
        guard engine != nil else { return }
        let engines = try await allEngines()
        _ = try await retrying(timeout: timeout) { () -> Bool? in
            for engine in engines {
                try await self.containerErrors {
                    try await engine.sendChanges(SyncEngine.SendChangesOptions())
                    try await engine.fetchChanges(SyncEngine.FetchChangesOptions())
                }
            }
            // Not in sync while the app is to decide about the local data.
            try await self.checkDecisions()
            let sealed = try await self.hasEncryptionKey() ? [] : self.entitiesNeedingKey
            let (pending, refused, waitingForKey) = try await self.store.read { context in
                let ledger = Ledger(context.db)
                return (try ledger.pendingCount(), try ledger.refusals(), try ledger.pendingCount(of: sealed))
            }
            if pending > 0, pending == waitingForKey {
                // Nothing else is pending: only the key lets these go.
                throw ContainerError(
                    .encryptionKeyNeeded,
                    "\(pending) changes of objects with encrypted attributes wait for the user's encryption key: call setUpEncryption(passphrase:) on this device")
            }
            guard pending == 0 else { return nil }
            if !refused.isEmpty { throw ContainerError.uploadsRefused(refused) }
            return true
        }
    }

    /// Runs `attempt` until it answers a value, retrying transient failures (no network,
    /// throttling) and answers of nil with growing pauses until `timeout`; then throws
    /// ``ContainerError/Code/timedOut``. A failure retrying does not fix is
    /// ``ContainerError/Code/syncFailed``.
    func retrying<T>(timeout: Duration, _ attempt: () async throws -> T?) async throws -> T {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        var delay = Duration.milliseconds(50)
        while true {
            var lastError: CloudError?
            do {
                if let value = try await attempt() { return value }
            } catch let error as CloudError where error.isTransient {
                lastError = error
            } catch let error as CloudError {
                throw ContainerError.syncFailed(PersistentCloudContainer.SyncFailure(error))
            }
            guard clock.now + delay < deadline else {
                let stored = try? await currentFailure()
                throw ContainerError.timedOut(timeout, lastFailure: lastError.map { PersistentCloudContainer.SyncFailure($0) } ?? stored)
            }
            try await Task.sleep(for: delay)
            delay = min(delay * 2, .seconds(2))
        }
    }

    /// Runs engine operations, turning an engine stopped by rejected credentials into the
    /// container's error.
    func containerErrors(_ body: () async throws -> Void) async throws {
        do {
            try await body()
        } catch let error as SyncEngineError where error.code == .stopped {
            throw ContainerError.syncFailed(
                PersistentCloudContainer.SyncFailure(code: .authenticationFailed, message: ContainerError.credentialsRejected))
        } catch {
            // An operation stopped because the app is to decide about local data says so.
            try await checkCanSync()
            throw error
        }
    }

    func modifySchema(_ schema: CloudSchema) async throws -> CloudSchema {
        try await checkCanSync()
        guard let engine else { throw ContainerError.localOnly }
        return try await engine.database.modifySchema(schema)
    }

    func fetchSchema() async throws -> CloudSchema {
        try await checkCanSync()
        guard let engine else { throw ContainerError.localOnly }
        return try await engine.database.fetchSchema()
    }

    /// Gives the server the schema's uniqueness constraints it does not have yet, once per
    /// process, before the first upload: the server refuses a second record with a key only once
    /// it knows the constraint (``CloudSchema/uniquenessDeclaration(for:)``). Answers false when the
    /// server could not be asked now (the uploads wait for the next pass). A server that refuses
    /// (a production schema only its operator changes, or records that already share a key) is
    /// logged, and sync goes on: it enforces what it has.
    func declareUniquenessConstraints(_ engine: any MirrorEngine) async -> Bool {
        let ours = schema.cloudSchema
        guard ours.recordTypes.contains(where: { $0.uniquenessConstraints != nil }) else {
            uniquenessDeclared = true
            return true
        }
        do {
            if let request = try await engine.database.fetchSchema().uniquenessDeclaration(for: ours) {
                _ = try await engine.database.modifySchema(request)
                logger.notice(
                    "uniqueness constraints declared to the server",
                    metadata: ["recordTypes": "\(request.recordTypes.map(\.name).joined(separator: ","))"])
            }
        } catch let error as CloudError where error.isTransient || error.serverError == nil {
            logger.debug("uniqueness constraints not declared yet", metadata: ["error": "\(error)"])
            return false
        } catch {
            logger.error(
                "the server did not take this app's uniqueness constraints: it enforces only those it has (deploy the schema with `cloudstore schema init`)",
                metadata: ["error": "\(error)"])
        }
        uniquenessDeclared = true
        return true
    }
}
