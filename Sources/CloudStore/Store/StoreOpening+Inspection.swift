import Foundation
import GRDB
import GRDBSQLite

/// Reading a store file without writing to it or leaving a file beside it: the inspection that
/// precedes every opening, and stores opened for inspection.
extension StoreOpening {
    /// Runs `block` on a read-only connection to the file at `path` (see ``readOnlyLocation(_:)``).
    static func readWithoutWriting<T>(path: String, while doing: String, _ block: (Database) throws -> T) throws -> T {
        var configuration = GRDB.Configuration()
        configuration.readonly = true
        do {
            let queue = try DatabaseQueue(path: readOnlyLocation(path), configuration: configuration)
            defer { try? queue.close() }
            return try queue.read(block)
        } catch {
            throw StoreError.wrapping(error, path: path, while: doing)
        }
    }

    /// What SQLite opens to read the file at `path` without writing to it or leaving a file beside it.
    ///
    /// A read-only connection to a WAL-mode database creates its `-wal` and `-shm` files when they
    /// are missing and leaves them behind (only a writer deletes them when it closes). So when the
    /// WAL holds no frames (no `-wal` file, or one shorter than its header), which means the main
    /// file holds every committed transaction, the file is opened `immutable`: SQLite creates no
    /// file, takes no lock and reads the main file alone. A process that opens the store meanwhile
    /// is not seen, and one that checkpoints into the main file during the read can make the read
    /// fail as damaged or return a mix of both states; nothing is written either way.
    ///
    /// Otherwise (an app has the store open, or did not close it) the file is opened read-only as
    /// usual: SQLite reads the WAL and writes neither the main file nor the WAL, but writes to the
    /// `-shm` index as every reader of a WAL database does (its read mark, or the index rebuilt
    /// after a crash). So does a SQLite built without URI support, which cannot be asked for
    /// `immutable`.
    static func readOnlyLocation(_ path: String) -> String {
        guard sqlite3_compileoption_used("USE_URI") == 1, isWALMode(path), walHoldsNoFrames(path),
            let encoded = path.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed)
        else { return path }
        return "file:\(encoded)?immutable=1"
    }

    /// Whether the database header says WAL mode (read and write versions 2).
    private static func isWALMode(_ path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        let header = (try? handle.read(upToCount: 20)) ?? Data()
        return header.count == 20 && header.starts(with: Data("SQLite format 3\0".utf8)) && header[18] == 2
            && header[19] == 2
    }

    /// Whether the WAL is missing or shorter than its 32-byte header.
    private static func walHoldsNoFrames(_ path: String) -> Bool {
        let size = (try? FileManager.default.attributesOfItem(atPath: path + "-wal"))?[.size] as? Int
        return (size ?? 0) < 32
    }

    /// Opens the store read-only, as it is, with `configuration` (made read-only): nothing is
    /// created, migrated or written. Returns the pool and the store's identifier.
    ///
    /// - Throws: ``StoreError/Code/notAStore`` when there is no store at the path;
    ///   ``StoreError/Code/needsUpgrade`` when the store would have to migrate to `schema`.
    func openForInspection(_ configuration: GRDB.Configuration) throws -> (pool: DatabasePool, storeIdentifier: UUID) {
        _ = try inspectedMetadata(inspected)
        var configuration = configuration
        configuration.readonly = true
        let pool = try DatabasePool(path: Self.readOnlyLocation(path), configuration: configuration)
        // Decided again on the pool's connection, in case another process changed the file meanwhile.
        let metadata = try pool.read { db in try inspectedMetadata(try decide(try StoreMetadata.read(db, path: path))) }
        return (pool, metadata.storeIdentifier)
    }

    /// The metadata of a store that opens for inspection as it is.
    private func inspectedMetadata(_ action: Action) throws -> StoreMetadata {
        switch action {
        case .open(let metadata):
            return metadata
        case .create:
            throw StoreError(
                .notAStore,
                "there is no store at \(path) (no file, or an empty one), and inspecting never creates one; check the path")
        case .migrate(let metadata, _):
            throw StoreError(
                .needsUpgrade,
                "\(path) holds version \(metadata.schemaVersion) of schema \(schema.name), older than version \(schema.version) it is inspected with, and inspecting never migrates; inspect it with the schema it keeps, or open it with PersistentStore(url:schema:) once to migrate it")
        }
    }
}
