import CloudStoreWire
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The files of a store's external-storage attributes: the directory `<store file>-external`
/// beside the store, one file per distinct value, named by the hex SHA-256 of its bytes.
///
/// A unit of work writes a value's file (to a temporary name, synced, then renamed) before its
/// transaction commits, so a committed row never names a file that is not whole; a crash in
/// between leaves a file no row names, which ``removeUnreferenced(keeping:)`` removes later. That
/// sweep runs under the store's writer, the only place files are written or adopted, so it never
/// removes the file of a unit of work in progress.
final class ExternalDataFiles: Sendable {
    let directory: URL
    /// Where a sync engine downloads assets before an import adopts them: inside `directory`, so
    /// adopting is a rename on the same file system.
    var transfers: URL { directory.appendingPathComponent(".transfers", isDirectory: true) }

    init(storeURL: URL) {
        directory = URL(fileURLWithPath: storeURL.path + "-external", isDirectory: true)
    }

    /// The file of a value; nil when its checksum is not a SHA-256 (a damaged reference).
    func url(for value: ExternalData) -> URL? {
        value.fileName.map { directory.appendingPathComponent($0, isDirectory: false) }
    }

    /// Whether the file of a value is present with the value's size.
    func contains(_ value: ExternalData) -> Bool {
        guard let url = url(for: value) else { return false }
        return Self.size(of: url) == value.size
    }

    /// Stores bytes (once per distinct value) and answers the reference a row keeps.
    func store(_ data: Data) throws -> ExternalData {
        var checksum = AssetChecksum()
        checksum.update(data)
        let value = ExternalData(checksum: checksum.base64, size: checksum.size)
        let destination = url(for: value)!
        if Self.size(of: destination) == value.size { return value }
        try createDirectory()
        let temporary = directory.appendingPathComponent(".\(UUID().uuidString).tmp")
        do {
            guard FileManager.default.createFile(atPath: temporary.path, contents: nil) else {
                throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: temporary.path])
            }
            let handle = try FileHandle(forWritingTo: temporary)
            defer { try? handle.close() }
            try handle.write(contentsOf: data)
            try handle.synchronize()
            try Self.rename(temporary, to: destination)
        } catch {
            try? FileManager.default.removeItem(at: temporary)
            throw StoreError(
                .externalData,
                "could not write the \(data.count) bytes of an external-storage value to \(directory.path) (\(Self.reason(error))): "
                    + "free space on that disk (or raise the process's file size limit) and save again; nothing of this unit of work was saved")
        }
        syncDirectory()
        return value
    }

    /// Takes a file whose bytes were verified to be `value` (a downloaded asset) into the store,
    /// by renaming it; when the value is present already the file is left to its owner.
    func adopt(_ file: URL, as value: ExternalData) throws {
        guard let destination = url(for: value) else {
            throw StoreError(.invalidValue, "\(value) does not name a SHA-256, so it cannot be a file of the store")
        }
        if Self.size(of: destination) == value.size { return }
        guard Self.size(of: file) == value.size else {
            throw StoreError(
                .externalData,
                "the downloaded file \(file.path) should hold \(value.size) bytes but holds \(Self.size(of: file).map(String.init) ?? "nothing")")
        }
        try createDirectory()
        try Self.rename(file, to: destination)
        syncDirectory()
    }

    /// The bytes of a value, mapped from its file when the system allows.
    func data(for value: ExternalData) throws -> Data {
        guard let url = url(for: value), let data = try? Data(contentsOf: url, options: .mappedIfSafe),
            Int64(data.count) == value.size
        else {
            throw StoreError(
                .externalData,
                "the file of \(value) is missing or damaged in \(directory.path); the bytes cannot be read (restore the file, or save the attribute again)")
        }
        return data
    }

    /// Removes every value file whose name is not in `keeping`, and temporary files left by a crash;
    /// answers how many it removed. Run under the store's writer.
    @discardableResult
    func removeUnreferenced(keeping names: Set<String>) -> Int {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return 0 }
        var removed = 0
        for name in entries where !names.contains(name) && name != ".transfers" {
            if (try? FileManager.default.removeItem(at: directory.appendingPathComponent(name))) != nil { removed += 1 }
        }
        return removed
    }

    private func createDirectory() throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    /// Syncs the directory, so a rename into it survives a power loss.
    private func syncDirectory() {
        let descriptor = open(directory.path, O_RDONLY)
        guard descriptor >= 0 else { return }
        _ = fsync(descriptor)
        close(descriptor)
    }

    private static func rename(_ source: URL, to destination: URL) throws {
        guard Foundation.rename(source.path, destination.path) == 0 else {
            throw StoreError(
                .externalData, "could not move \(source.path) to \(destination.path): \(String(cString: strerror(errno)))")
        }
    }

    /// The system's words for a failed write: "No space left on device", "File too large".
    private static func reason(_ error: any Error) -> String {
        var underlying = error as NSError
        while let next = underlying.userInfo[NSUnderlyingErrorKey] as? NSError { underlying = next }
        if underlying.domain == NSPOSIXErrorDomain { return String(cString: strerror(Int32(underlying.code))) }
        return underlying.localizedDescription
    }

    static func size(of url: URL) -> Int64? {
        var status = stat()
        guard stat(url.path, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int64(status.st_size)
    }
}
