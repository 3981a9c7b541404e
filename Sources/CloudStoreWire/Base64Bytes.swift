import Foundation

/// Base64 (RFC 4648 §4, with padding) written into and read from JSON bytes directly: the
/// `BYTES` and `ENCRYPTED_BYTES` values on the hot path of sync, without a `String` in between
/// (an encrypted record carries one such value per encrypted attribute).
///
/// Writes what `Data.base64EncodedString()` writes. Reads only the canonical form it writes
/// (padded, no whitespace, unused bits zero) and answers nil for anything else: the caller then
/// decodes the string with Foundation, which decides.
package enum Base64Bytes {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Each ASCII byte's 6-bit value; 0xFF for a byte outside the alphabet.
    private static let values: [UInt8] = {
        var values = [UInt8](repeating: 0xFF, count: 256)
        for (value, byte) in alphabet.enumerated() { values[Int(byte)] = UInt8(value) }
        return values
    }()

    /// The length of the encoding of `count` bytes.
    package static func encodedCount(_ count: Int) -> Int { (count + 2) / 3 * 4 }

    /// Appends the encoding of `data` to `output`.
    package static func encode(_ data: Data, into output: inout [UInt8]) {
        let start = output.count
        output.append(contentsOf: repeatElement(0, count: encodedCount(data.count)))
        data.withUnsafeBytes { input in
            output.withUnsafeMutableBufferPointer { buffer in
                alphabet.withUnsafeBufferPointer { alphabet in
                    var out = start
                    var index = 0
                    while index + 3 <= input.count {
                        let triple = UInt32(input[index]) << 16 | UInt32(input[index + 1]) << 8 | UInt32(input[index + 2])
                        buffer[out] = alphabet[Int(triple >> 18)]
                        buffer[out + 1] = alphabet[Int(triple >> 12 & 0x3F)]
                        buffer[out + 2] = alphabet[Int(triple >> 6 & 0x3F)]
                        buffer[out + 3] = alphabet[Int(triple & 0x3F)]
                        index += 3
                        out += 4
                    }
                    let rest = input.count - index
                    guard rest > 0 else { return }
                    let first = UInt32(input[index]) << 16 | (rest == 2 ? UInt32(input[index + 1]) << 8 : 0)
                    buffer[out] = alphabet[Int(first >> 18)]
                    buffer[out + 1] = alphabet[Int(first >> 12 & 0x3F)]
                    buffer[out + 2] = rest == 2 ? alphabet[Int(first >> 6 & 0x3F)] : UInt8(ascii: "=")
                    buffer[out + 3] = UInt8(ascii: "=")
                }
            }
        }
    }

    /// The bytes `text` encodes, or nil when it is not canonical padded base64.
    package static func decode(_ text: UnsafeRawBufferPointer) -> Data? {
        guard text.count % 4 == 0 else { return nil }
        guard !text.isEmpty else { return Data() }
        let padding = text[text.count - 1] != UInt8(ascii: "=") ? 0 : text[text.count - 2] != UInt8(ascii: "=") ? 1 : 2
        let count = text.count / 4 * 3 - padding
        var data = Data(count: count)
        let decoded = data.withUnsafeMutableBytes { (output: UnsafeMutableRawBufferPointer) -> Bool in
            values.withUnsafeBufferPointer { values in
                var out = 0
                var index = 0
                while index < text.count {
                    let a = values[Int(text[index])], b = values[Int(text[index + 1])]
                    let last = index + 4 == text.count
                    let c = last && padding == 2 ? 0 : values[Int(text[index + 2])]
                    let d = last && padding >= 1 ? 0 : values[Int(text[index + 3])]
                    // Outside the alphabet (0xFF) has the high bits set.
                    guard (a | b | c | d) & 0xC0 == 0 else { return false }
                    let quad = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6 | UInt32(d)
                    output[out] = UInt8(quad >> 16)
                    if out + 1 < count { output[out + 1] = UInt8(quad >> 8 & 0xFF) } else if quad >> 8 & 0xFF != 0 { return false }
                    if out + 2 < count { output[out + 2] = UInt8(quad & 0xFF) } else if quad & 0xFF != 0 { return false }
                    index += 4
                    out += 3
                }
                return true
            }
        }
        return decoded ? data : nil
    }
}
