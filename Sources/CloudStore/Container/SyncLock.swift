import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Lets one container at a time mirror a store file: an exclusive `flock` on `<store>.sync-lock`
/// beside it, held while the container is open and released by the kernel when its process
/// ends, killed or not. Other processes (and other containers) write the file through a plain
/// `PersistentStore`; the container that holds the lock sends what they record.
final class SyncLock: Sendable {
    /// Nil once released.
    private let descriptor: Mutex<Int32?>

    private init(descriptor: Int32) { self.descriptor = Mutex(descriptor) }

    /// The lock file of the store at `url`.
    static func url(for store: URL) -> URL {
        store.deletingLastPathComponent().appendingPathComponent(store.lastPathComponent + ".sync-lock")
    }

    /// Takes the lock of the store at `url`.
    ///
    /// - Throws: ``ContainerError/Code/alreadyMirrored`` when another container holds it.
    static func acquire(for store: URL) throws -> SyncLock {
        let path = url(for: store).path
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw ContainerError.syncFailed(
                PersistentCloudContainer.SyncFailure(
                    message: "cannot open \(path) to lock the store for syncing: \(String(cString: strerror(errno))); check the directory's permissions"))
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            close(descriptor)
            throw ContainerError.alreadyMirrored(store.path)
        }
        return SyncLock(descriptor: descriptor)
    }

    /// Releases the lock; once (a second call does nothing).
    func release() {
        guard let descriptor = descriptor.withLock({ descriptor in defer { descriptor = nil }; return descriptor }) else { return }
        flock(descriptor, LOCK_UN)
        close(descriptor)
    }

    deinit { release() }
}
