import Crypto
import Foundation
import Synchronization

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#endif

/// The random nonces of sealed values (``FieldEncryption``), drawn from the system's generator
/// 4 KiB at a time: one system call per 341 nonces, where `ChaChaPoly.Nonce()` makes one or two
/// per value (sync seals every encrypted field of every record). A nonce must never repeat under
/// a key; 96 random bits from the system's generator, as `ChaChaPoly.Nonce()` draws them, are
/// what ensures it, whether drawn one by one or in a block.
final class NoncePool: Sendable {
    static let shared = NoncePool()

    private struct Block {
        var bytes: [UInt8] = []
        var next = 0
    }
    private let block = Mutex(Block())
    private static let blockSize = 4096
    private static let nonceSize = 12

    func next() -> ChaChaPoly.Nonce {
        let bytes = block.withLock { block in
            if block.next + Self.nonceSize > block.bytes.count {
                block.bytes = Self.randomBytes(Self.blockSize)
                block.next = 0
            }
            defer { block.next += Self.nonceSize }
            return block.bytes[block.next..<block.next + Self.nonceSize]
        }
        // 12 bytes always make a nonce.
        return try! ChaChaPoly.Nonce(data: bytes)
    }

    /// `count` bytes from the system's cryptographic generator (`/dev/urandom`, else the standard
    /// library's generator).
    private static func randomBytes(_ count: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            var filled = 0
            #if canImport(Darwin)
                arc4random_buf(buffer.baseAddress!, count)
                filled = count
            #else
                let device = open("/dev/urandom", O_RDONLY | O_CLOEXEC)
                if device >= 0 {
                    while filled < count {
                        let read = Glibc.read(device, buffer.baseAddress! + filled, count - filled)
                        if read > 0 {
                            filled += read
                        } else if read == 0 || errno != EINTR {
                            break
                        }
                    }
                    close(device)
                }
            #endif
            var generator = SystemRandomNumberGenerator()
            while filled < count {
                buffer[filled] = UInt8.random(in: .min ... .max, using: &generator)
                filled += 1
            }
            initialized = count
        }
    }
}
