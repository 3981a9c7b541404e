import CloudStoreSync
import CloudStoreWire
import Foundation

/// The user's account key on the server: locked by the passphrase (``KeyWrapping/lock(_:user:passphrase:parameters:)``),
/// one record in a zone of its own in the private database, which no store mirrors, so a zone
/// reset or another app's store never touches it (<doc:EndToEndEncryption>).
enum AccountKeyRecord {
    static let zoneID = ZoneID(zoneName: "CloudStoreKeys")
    static let recordName = "account-key"
    static let recordType = "CloudStoreAccountKey"
    /// The field holding the locked key, as JSON (``WrappedKey``).
    static let field = "lockedKey"

    static func record(_ locked: WrappedKey) throws -> Record {
        var record = Record(recordType: recordType, recordID: RecordID(recordName: recordName, zoneID: zoneID))
        record.fields[field] = .bytes(try JSONEncoder().encode(locked))
        return record
    }

    static func lockedKey(in record: Record) throws -> WrappedKey {
        guard case .bytes(let data)? = record.fields[field], let locked = try? JSONDecoder().decode(WrappedKey.self, from: data) else {
            throw ContainerError(
                .encryptionKeyStore,
                "the account key record on the server has no readable \(field) field: it was altered; restore the zone \(zoneID.zoneName) or contact the server's operator")
        }
        return locked
    }
}

extension CloudMirror {
    /// Where this device keeps account keys.
    var keyStore: any EncryptionKeyStore {
        options.encryptionKeyStore ?? FileEncryptionKeyStore(besideStoreAt: store.url)
    }

    /// The mirrored entities with encrypted attributes: their uploads need the key.
    var entitiesNeedingKey: Set<String> {
        Set(schema.mirroredEntities.filter(RecordSealing.needsKey).map(\.name))
    }

    /// Whether this device holds the account key of the user the store last heard (not a
    /// previous user's).
    func hasEncryptionKey() async throws -> Bool {
        guard let keyring else { return false }
        return try await store.read { try Ledger($0.db).state(.userRecordName, as: String.self) } == keyring.user
    }

    /// Reads the account key of the user the store last heard from the key store, when the schema
    /// has encrypted attributes and the keyring is not that user's already: a device that set up
    /// encryption before needs no passphrase again. Called when mirroring starts and when the
    /// engine learns who the user is.
    func loadKeyring() async throws {
        guard !entitiesNeedingKey.isEmpty else { return }
        guard let user = try await store.read({ try Ledger($0.db).state(.userRecordName, as: String.self) }), keyring?.user != user,
            let key = try keyStore.accountKey(for: user)
        else { return }
        let keyring = EncryptionKeyring(user: user, account: key)
        try await learnStoredZoneKeys(keyring)
        self.keyring = keyring
        try await applyAwaitingDecryption()
    }

    /// Applies the records that waited for a key, and removes what they kept that is unneeded since.
    private func applyAwaitingDecryption() async throws {
        try await perform { write, effects in try write.applyAwaitingDecryption(&effects) }
    }

    /// ``PersistentCloudContainer/setUpEncryption(passphrase:)``: unlocks the user's account key
    /// on the server with the passphrase, or creates and locks one when the user has none yet;
    /// keeps it in the key store, applies the records that waited for it, wakes the uploads
    /// that did, and publishes the user's identity key for sharing (``UserKeyRecord``).
    func setUpEncryption(passphrase: String) async throws {
        guard let database = databases[.private] else { throw ContainerError.localOnly }
        let user = try await database.caller().userRecordName
        let account: EncryptionKey
        if let stored = try keyStore.accountKey(for: user) {
            account = stored
        } else {
            account = try await accountKey(of: user, passphrase: passphrase, database: database)
            try keyStore.saveAccountKey(account, for: user)
        }
        let keyring = EncryptionKeyring(user: user, account: account)
        try await learnStoredZoneKeys(keyring)
        self.keyring = keyring
        logger.info("encryption set up on this device", metadata: ["user": "\(user)", "accountKey": "\(account.id)"])
        try await applyAwaitingDecryption()
        try await publishIdentityKey(keyring)
        try await wakeForPendingUploads()
    }

    /// The user's account key from the server, unlocked with the passphrase; a new one, locked and
    /// saved there, when the user has none (another device creating one at the same time wins:
    /// its key is unlocked instead).
    private func accountKey(of user: String, passphrase: String, database: any CloudDatabase) async throws -> EncryptionKey {
        for _ in 0..<2 {
            if let (locked, _) = try await lockedAccountKey(database) {
                return try await unlock(locked, user: user, passphrase: passphrase)
            }
            let account = EncryptionKey()
            let locked = try await Self.offCooperativePool { try KeyWrapping.lock(account, user: user, passphrase: passphrase) }
            _ = try await database.modifyZones(ZonesModifyRequest(operations: [.init(.create, AccountKeyRecord.zoneID)]))
            let answer = try await database.modifyRecords(
                RecordsModifyRequest(zoneID: AccountKeyRecord.zoneID, operations: [.init(.create, try AccountKeyRecord.record(locked))]))
            switch answer.records.first {
            case .value?:
                logger.notice("created the account encryption key", metadata: ["user": "\(user)", "accountKey": "\(account.id)"])
                return account
            case .error(let error)? where error.serverErrorCode == .exists || error.serverErrorCode == .conflict:
                continue  // another device created it first: unlock theirs
            case .error(let error)?:
                throw ContainerError.syncFailed(PersistentCloudContainer.SyncFailure(error))
            case nil:
                throw ContainerError(.encryptionKeyStore, "the server did not answer the save of the account key; try again")
            }
        }
        throw ContainerError(.encryptionKeyStore, "the account key could be neither created nor read on the server; try again")
    }

    /// ``PersistentCloudContainer/changeEncryptionPassphrase(from:to:)``: unlocks the account key
    /// the server holds with the current passphrase and saves it locked by the new one, with the
    /// record's change tag (a change made meanwhile on another device fails this one, changing
    /// nothing). The key itself stays: devices that hold it go on, new ones join with the new
    /// passphrase.
    func changePassphrase(from current: String, to new: String) async throws {
        guard let database = databases[.private] else { throw ContainerError.localOnly }
        let user = try await database.caller().userRecordName
        guard let (locked, record) = try await lockedAccountKey(database) else {
            throw ContainerError(
                .encryptionKeyNeeded, "\(user) has no encryption key on the server yet: call setUpEncryption(passphrase:) first")
        }
        let account = try await unlock(locked, user: user, passphrase: current)
        let relocked = try await Self.offCooperativePool { try KeyWrapping.lock(account, user: user, passphrase: new) }
        var updated = try AccountKeyRecord.record(relocked)
        updated.recordChangeTag = record.recordChangeTag
        let answer = try await database.modifyRecords(
            RecordsModifyRequest(zoneID: AccountKeyRecord.zoneID, operations: [.init(.update, updated)]))
        switch answer.records.first {
        case .value?:
            logger.notice("changed the passphrase of the account encryption key", metadata: ["user": "\(user)", "accountKey": "\(account.id)"])
        case .error(let error)? where error.serverErrorCode == .conflict:
            throw ContainerError(
                .encryptionKeyStore,
                "the account key of \(user) changed on the server meanwhile (another device changed the passphrase): nothing changed here; try again with the passphrase now in use")
        case .error(let error)?:
            throw ContainerError.syncFailed(PersistentCloudContainer.SyncFailure(error))
        case nil:
            throw ContainerError(.encryptionKeyStore, "the server did not answer the save of the account key; try again")
        }
    }

    /// The account key `locked` opened with `passphrase`, off the cooperative pool (scrypt).
    ///
    /// - Throws: ``ContainerError/Code/wrongPassphrase`` when it does not open it.
    private func unlock(_ locked: WrappedKey, user: String, passphrase: String) async throws -> EncryptionKey {
        do {
            return try await Self.offCooperativePool { try KeyWrapping.unlock(locked, user: user, passphrase: passphrase) }
        } catch let error as EncryptionError where error.code == .wrongPassphrase {
            throw ContainerError(
                .wrongPassphrase, "the passphrase does not unlock the encryption key of \(user): check it and try again (nothing changed)")
        }
    }

    /// The locked account key the server holds with its record, or nil when the user has none.
    private func lockedAccountKey(_ database: any CloudDatabase) async throws -> (WrappedKey, Record)? {
        let answer: RecordsResponse
        do {
            answer = try await database.lookupRecords(
                RecordsLookupRequest(zoneID: AccountKeyRecord.zoneID, recordNames: [AccountKeyRecord.recordName]))
        } catch let error as CloudError where error.code == .zoneNotFound {
            return nil
        }
        switch answer.records.first {
        case .value(let record)?:
            return (try AccountKeyRecord.lockedKey(in: record), record)
        case .error(let error)? where error.serverErrorCode == .notFound || error.serverErrorCode == .zoneNotFound:
            return nil
        case .error(let error)?:
            throw ContainerError.syncFailed(PersistentCloudContainer.SyncFailure(error))
        case nil:
            return nil
        }
    }

    /// Runs CPU-bound work (scrypt) on a thread of its own, never on the cooperative pool.
    static func offCooperativePool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
        }
    }
}
