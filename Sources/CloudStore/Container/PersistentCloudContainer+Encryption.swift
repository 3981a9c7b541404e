import CloudStoreSync
import CloudStoreWire
import Foundation

/// Where a device keeps each user's account key, the key every encrypted attribute's zone key
/// derives from (<doc:EndToEndEncryption>). By default a file beside the store that only its
/// owner can read (``FileEncryptionKeyStore``); an app with a platform keychain supplies its own
/// through ``PersistentCloudContainer/Options/encryptionKeyStore``.
///
/// ```swift
/// struct KeychainKeyStore: EncryptionKeyStore {
///     func accountKey(for user: String) throws -> EncryptionKey? { try Keychain.read(user).map(EncryptionKey.init(stored:)) }
///     func saveAccountKey(_ key: EncryptionKey, for user: String) throws { try Keychain.write(key.stored, for: user) }
/// }
/// ```
public protocol EncryptionKeyStore: Sendable {
    /// The account key of `user` saved before, or nil.
    func accountKey(for user: String) throws -> EncryptionKey?
    /// Saves the account key of `user`, replacing any.
    func saveAccountKey(_ key: EncryptionKey, for user: String) throws
}

/// Account keys in a JSON file readable and writable by its owner only (mode 0600), written
/// atomically: the default ``EncryptionKeyStore``, at the store's path with `.keys` appended.
/// Anyone who can read this file can read the user's encrypted fields: keep it with the store.
public struct FileEncryptionKeyStore: EncryptionKeyStore {
    /// The file.
    public var url: URL

    /// The key file at `url`.
    public init(url: URL) { self.url = url }

    /// The default key file of the store at `storeURL`.
    public init(besideStoreAt storeURL: URL) {
        self.url = URL(fileURLWithPath: storeURL.path + ".keys")
    }

    private struct Stored: Codable {
        var id: KeyID
        var key: Data
    }

    public func accountKey(for user: String) throws -> EncryptionKey? {
        guard let stored = try read()[user] else { return nil }
        guard let key = EncryptionKey(id: stored.id, rawBytes: stored.key) else {
            throw ContainerError(
                .encryptionKeyStore, "the key of \(user) in \(url.path) is not 32 bytes: the file was altered; set up encryption again with the passphrase")
        }
        return key
    }

    public func saveAccountKey(_ key: EncryptionKey, for user: String) throws {
        var keys = try read()
        keys[user] = Stored(id: key.id, key: key.rawBytes)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        let data = try encoder.encode(keys)
        // Written to a private temporary file, then renamed: never readable by others, never half written.
        let temporary = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).\(UUID().uuidString)")
        guard FileManager.default.createFile(atPath: temporary.path, contents: data, attributes: [.posixPermissions: 0o600]) else {
            throw ContainerError(.encryptionKeyStore, "cannot write the encryption key file \(temporary.path): check the directory's permissions")
        }
        if rename(temporary.path, url.path) != 0 {
            let reason = String(cString: strerror(errno))
            try? FileManager.default.removeItem(at: temporary)
            throw ContainerError(.encryptionKeyStore, "cannot replace the encryption key file \(url.path): \(reason)")
        }
    }

    private func read() throws -> [String: Stored] {
        guard FileManager.default.fileExists(atPath: url.path) else { return [:] }
        do {
            return try JSONDecoder().decode([String: Stored].self, from: Data(contentsOf: url))
        } catch {
            throw ContainerError(
                .encryptionKeyStore, "the encryption key file \(url.path) cannot be read (\(error)); restore it from a backup, or set up encryption again with the passphrase")
        }
    }
}

extension PersistentCloudContainer {
    /// Whether this device can read and write the user's encrypted attributes.
    public struct EncryptionStatus: Sendable, Hashable {
        /// Whether the schema has encrypted attributes at all.
        public var isUsed: Bool
        /// Whether this device holds the current user's account key.
        public var hasKey: Bool
        /// Fetched records waiting for a key this device does not have yet (applied when it comes).
        public var recordsAwaitingKey: Int
        /// Fetched records refused because an encrypted field did not open (altered on the server);
        /// each is replaced by its next version.
        public var refusedRecords: Int
        /// The shared zones whose keys travel as records in them (<doc:EndToEndEncryption>): the
        /// newest key of each this store knows, and whether this device holds it.
        public var sharedZoneKeys: [ZoneKeys] = []
        /// The records counted in ``recordsAwaitingKey`` and ``refusedRecords``, by zone and name.
        public var waitingRecords: [WaitingRecord] = []
    }

    /// The newest key of a shared zone (``EncryptionStatus/sharedZoneKeys``).
    public struct ZoneKeys: Sendable, Hashable {
        /// The shared zone, as this device names it (with its owner when it is another user's).
        public var zoneID: ZoneID
        /// The key's ID, in hexadecimal, as values sealed with it carry it.
        public var keyID: String
        /// 0 for the zone's first key; each rotation (a participant removed, the share stopped) adds one.
        public var generation: Int64
        /// The participants the key is granted to.
        public var grantedTo: [String]
        /// Whether this device holds the key (false without the account key).
        public var isHeld: Bool
    }

    /// A fetched record that waits for its key, or was refused (``EncryptionStatus/waitingRecords``).
    public struct WaitingRecord: Sendable, Hashable {
        /// The record's name: the object's ID.
        public var recordName: String
        /// The zone it was fetched from, as this device names it.
        public var zoneID: ZoneID
        /// Refused (a field did not open) rather than waiting for a key.
        public var isRefused: Bool
        /// The key it waits for, or the field and why it was refused.
        public var problem: String
    }

    /// Gives this device the user's account key, so it can seal and open encrypted attributes:
    /// the first device of a user creates the key and locks it with `passphrase` on the server;
    /// every later device unlocks it with the same passphrase. Records fetched before wait for the
    /// key and are applied now; objects saved before go up now.
    ///
    /// ```swift
    /// do {
    ///     try await container.setUpEncryption(passphrase: passphraseFromUser)
    /// } catch ContainerError.Code.wrongPassphrase {
    ///     askAgain()   // nothing changed
    /// }
    /// ```
    ///
    /// A device that holds the user's key already (in its key store) needs no passphrase: the
    /// call returns without checking it. The passphrase never leaves the device; it is stretched
    /// with scrypt. Lose it and every
    /// device that holds the key (in ``Options/encryptionKeyStore``) is the only way left to the
    /// encrypted values: the server cannot help. See <doc:EndToEndEncryption>.
    ///
    /// - Throws: ``ContainerError/Code/wrongPassphrase`` when the passphrase does not unlock the
    ///   user's key (nothing changes); ``ContainerError/Code/localOnly`` without a server; a sync
    ///   failure when the server cannot be reached.
    public func setUpEncryption(passphrase: String) async throws {
        guard options.server != nil else { throw ContainerError.localOnly }
        guard !passphrase.isEmpty else {
            throw ContainerError(.wrongPassphrase, "the passphrase is empty: ask the user for one")
        }
        try await mirror.setUpEncryption(passphrase: passphrase)
    }

    /// Changes the passphrase that locks the user's account key on the server, as a user changes
    /// a recovery secret: `current` must unlock it (``ContainerError/Code/wrongPassphrase``
    /// otherwise, and nothing changes), then `new` locks it. The key itself does not change:
    /// devices that hold it go on reading and writing, and a new device joins with `new`.
    ///
    /// ```swift
    /// try await container.changeEncryptionPassphrase(from: oldPassphrase, to: newPassphrase)
    /// ```
    ///
    /// - Throws: ``ContainerError/Code/wrongPassphrase`` for a `current` that does not unlock the
    ///   key or an empty `new`; ``ContainerError/Code/encryptionKeyNeeded`` when the user has no key
    ///   yet (``setUpEncryption(passphrase:)`` makes one); ``ContainerError/Code/encryptionKeyStore``
    ///   when another device changed it meanwhile; ``ContainerError/Code/localOnly`` without a server.
    public func changeEncryptionPassphrase(from current: String, to new: String) async throws {
        guard options.server != nil else { throw ContainerError.localOnly }
        guard !new.isEmpty else {
            throw ContainerError(.wrongPassphrase, "the new passphrase is empty: ask the user for one")
        }
        try await mirror.changePassphrase(from: current, to: new)
    }

    /// Whether this device can read and write encrypted attributes, which shared zones' keys it
    /// holds, and what waits.
    public func encryptionStatus() async throws -> EncryptionStatus {
        let hasKey = try await mirror.hasEncryptionKey()
        var status = try Self.encryptionStatus(of: store, keyring: hasKey ? await mirror.keyring : nil)
        status.hasKey = hasKey
        return status
    }

    /// What a store file records of encryption: the shared zones' keys, the records that wait or
    /// were refused (the CLI's `status`). With the key store the device keeps its account key in
    /// (`<store>.keys` by default), ``ZoneKeys/isHeld`` says which zone keys it holds and
    /// ``EncryptionStatus/hasKey`` whether it holds the account key.
    public static func encryptionStatus(of store: PersistentStore, keyStore: (any EncryptionKeyStore)? = nil) throws -> EncryptionStatus {
        let user = try store.read { context in
            try context.db.tableExists("cloudstore_mirror_state") ? try Ledger(context.db).state(.userRecordName, as: String.self) : nil
        }
        let keyring = try user.flatMap { user in try keyStore?.accountKey(for: user).map { EncryptionKeyring(user: user, account: $0) } }
        var status = try encryptionStatus(of: store, keyring: keyring)
        status.hasKey = keyring != nil
        return status
    }

    private static func encryptionStatus(of store: PersistentStore, keyring: EncryptionKeyring?) throws -> EncryptionStatus {
        let isUsed = store.schema.mirroredEntities.contains(where: RecordSealing.needsKey)
        return try store.read { context in
            let counts = try MirrorStatus.awaitingDecryptionCounts(context.db)
            var status = EncryptionStatus(isUsed: isUsed, hasKey: false, recordsAwaitingKey: counts.waiting, refusedRecords: counts.refused)
            status.waitingRecords = try MirrorStatus.waitingRecords(context.db)
            status.sharedZoneKeys = try MirrorStatus.sharedZoneKeys(context.db, keyring: keyring)
            return status
        }
    }
}
