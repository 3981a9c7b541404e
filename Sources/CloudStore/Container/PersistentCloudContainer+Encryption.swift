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

    /// Whether this device can read and write encrypted attributes, and what waits.
    public func encryptionStatus() async throws -> EncryptionStatus {
        let hasKey = try await mirror.hasEncryptionKey()
        var status = try Self.encryptionStatus(of: store)
        status.hasKey = hasKey
        return status
    }

    /// What a store file records of encryption: the records that wait or were refused (the
    /// CLI's `status`). ``EncryptionStatus/hasKey`` is false: the key lives with the container.
    public static func encryptionStatus(of store: PersistentStore) throws -> EncryptionStatus {
        let isUsed = store.schema.mirroredEntities.contains(where: RecordSealing.needsKey)
        return try store.read { context in
            let counts = try MirrorMetadata.awaitingDecryptionCounts(context.db)
            return EncryptionStatus(isUsed: isUsed, hasKey: false, recordsAwaitingKey: counts.waiting, refusedRecords: counts.refused)
        }
    }
}
