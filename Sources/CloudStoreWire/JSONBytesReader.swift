import Foundation

/// A wire value that reads its JSON straight from bytes, without Codable's machinery: the
/// counterpart of ``JSONBytesWritable`` on the hot path of sync (records and the responses that
/// carry them).
///
/// The Codable conformance stays the definition of the wire shape. A reader handles the common
/// shapes only and declines everything else (an escape it does not know, a number where a string
/// belongs, a key twice, a field type it does not read, a share, an error result…); the caller
/// then decodes the whole document with `JSONDecoder`. So a reader never rejects input, and never
/// accepts input `JSONDecoder` rejects: it yields the values `JSONDecoder` would, or nothing.
/// `JSONBytesReaderTests` holds both to that on generated and mutated documents.
package protocol JSONBytesReadable {
    /// Reads one value; throws ``JSONBytesReader/Declined`` for anything the reader does not handle.
    init(from reader: inout JSONBytesReader) throws(JSONBytesReader.Declined)
}

extension JSONBytesReadable {
    /// The value of a whole JSON document, or nil when the reader declines it.
    package init?(jsonBytes data: Data) {
        guard let value = JSONBytesReader.read(data, { reader throws(JSONBytesReader.Declined) in try Self(from: &reader) })
        else { return nil }
        self = value
    }
}

/// The keys of one object a reader has read, by bit: `JSONDecoder` keeps the first value of a
/// key that comes twice, so a reader reads a key only the first time (`case "name" where
/// seen.first(0):`) and skips it after.
package struct KeysSeen {
    private var bits: UInt64 = 0

    package init() {}

    package func contains(_ bit: Int) -> Bool { bits & (1 << bit) != 0 }

    /// Whether bit `bit` is seen for the first time; marks it seen.
    package mutating func first(_ bit: Int) -> Bool {
        defer { bits |= 1 << bit }
        return bits & (1 << bit) == 0
    }
}

/// A pull reader of JSON bytes for ``JSONBytesReadable``: strict JSON (RFC 8259) on the shapes it
/// reads, ``Declined`` on anything else.
package struct JSONBytesReader {
    /// The reader does not handle this input; decode it with `JSONDecoder`.
    package struct Declined: Error {
        package init() {}
    }

    /// Deeper values than this are left to `JSONDecoder`.
    static let maxDepth = 64

    private let bytes: UnsafeRawBufferPointer
    private(set) var position = 0
    private var depth = 0

    package init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    /// The value `body` reads from a whole JSON document, or nil when it declines it (or bytes
    /// other than whitespace follow the value).
    package static func read<Value>(_ data: Data, _ body: (inout JSONBytesReader) throws(Declined) -> Value) -> Value? {
        data.withUnsafeBytes { buffer in
            var reader = JSONBytesReader(buffer)
            do {
                let value = try body(&reader)
                try reader.end()
                return value
            } catch {
                return nil
            }
        }
    }

    // MARK: Structure

    /// The end of the document: only whitespace may follow.
    package mutating func end() throws(Declined) {
        skipWhitespace()
        guard position == bytes.count else { throw Declined() }
    }

    /// Whether the next value is `null`; consumes it if so.
    package mutating func readNull() throws(Declined) -> Bool {
        skipWhitespace()
        guard position < bytes.count, bytes[position] == UInt8(ascii: "n") else { return false }
        try literal("null")
        return true
    }

    /// Reads an object, calling `member` with each key (unescaped); `member` must read or skip the
    /// value. A key may come twice: `JSONDecoder` keeps the first value, so the reader must too
    /// (``KeysSeen``), or decline.
    package mutating func readObject(_ member: (inout JSONBytesReader, String) throws(Declined) -> Void) throws(Declined) {
        try open(UInt8(ascii: "{"))
        defer { depth -= 1 }
        skipWhitespace()
        if try take(UInt8(ascii: "}")) { return }
        repeat {
            let key = try readString()
            skipWhitespace()
            guard try take(UInt8(ascii: ":")) else { throw Declined() }
            try member(&self, key)
            skipWhitespace()
        } while try take(UInt8(ascii: ","))
        guard try take(UInt8(ascii: "}")) else { throw Declined() }
    }

    /// Reads an array, calling `element` for each element; `element` must read or skip it.
    package mutating func readArray(_ element: (inout JSONBytesReader) throws(Declined) -> Void) throws(Declined) {
        try open(UInt8(ascii: "["))
        defer { depth -= 1 }
        skipWhitespace()
        if try take(UInt8(ascii: "]")) { return }
        repeat {
            try element(&self)
            skipWhitespace()
        } while try take(UInt8(ascii: ","))
        guard try take(UInt8(ascii: "]")) else { throw Declined() }
    }

    /// Skips one value of any kind, checking that it is well-formed.
    package mutating func skipValue() throws(Declined) {
        skipWhitespace()
        guard position < bytes.count else { throw Declined() }
        switch bytes[position] {
        case UInt8(ascii: "{"): try readObject { reader, _ throws(Declined) in try reader.skipValue() }
        case UInt8(ascii: "["): try readArray { reader throws(Declined) in try reader.skipValue() }
        case UInt8(ascii: "\""): _ = try readString()
        case UInt8(ascii: "t"): try literal("true")
        case UInt8(ascii: "f"): try literal("false")
        case UInt8(ascii: "n"): try literal("null")
        default: _ = try numberText()
        }
    }

    /// The next value as `JSONDecoder` decodes it on its own: for the small parts of a document
    /// the reader has no path of its own for (a poll's notifications, say), so the rest of the
    /// document still takes the reader's. A value the decoder rejects is declined, and with it the
    /// whole document, which the decoder then reads and reports on.
    package mutating func readDecoded<T: Decodable>(_ type: T.Type) throws(Declined) -> T {
        let start = mark()
        try skipValue()
        let value = Data(UnsafeRawBufferPointer(rebasing: bytes[start..<position]))
        do {
            return try JSONDecoder().decode(T.self, from: value)
        } catch {
            throw Declined()
        }
    }

    /// Where the next value starts, to come back to it with ``seek(to:)``.
    package mutating func mark() -> Int {
        skipWhitespace()
        return position
    }

    package mutating func seek(to position: Int) {
        self.position = position
    }

    // MARK: Scalars

    package mutating func readBool() throws(Declined) -> Bool {
        skipWhitespace()
        guard position < bytes.count else { throw Declined() }
        if bytes[position] == UInt8(ascii: "t") {
            try literal("true")
            return true
        }
        try literal("false")
        return false
    }

    /// An integer written as plain digits (no fraction, exponent, `-0` or more than 18 digits:
    /// those are left to `JSONDecoder`).
    package mutating func readInt64() throws(Declined) -> Int64 {
        skipWhitespace()
        var index = position
        let negative = index < bytes.count && bytes[index] == UInt8(ascii: "-")
        if negative { index += 1 }
        let digitsStart = index
        var value: Int64 = 0
        while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") {
            value = value &* 10 &+ Int64(bytes[index] &- UInt8(ascii: "0"))
            index += 1
        }
        let digits = index - digitsStart
        guard digits > 0, digits <= 18, digits == 1 || bytes[digitsStart] != UInt8(ascii: "0"),
            !(negative && value == 0)
        else { throw Declined() }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") || bytes[index] | 0x20 == UInt8(ascii: "e") {
            throw Declined()
        }
        position = index
        return negative ? -value : value
    }

    /// A finite number, parsed as Swift parses a double (correctly rounded, as `JSONDecoder` does).
    /// A number too large for a double, or one that is not zero but rounds to it, is declined:
    /// `JSONDecoder` rejects both.
    package mutating func readDouble() throws(Declined) -> Double {
        let text = try numberText()
        guard let value = Double(text), value.isFinite else { throw Declined() }
        if value == 0, text.utf8.prefix(while: { $0 != UInt8(ascii: "e") && $0 != UInt8(ascii: "E") }).contains(where: {
            $0 >= UInt8(ascii: "1") && $0 <= UInt8(ascii: "9")
        }) {
            throw Declined()
        }
        return value
    }

    /// A string; escapes `\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t` and `\uXXXX` outside the
    /// surrogates and NUL. Invalid UTF-8 and raw control characters are declined.
    package mutating func readString() throws(Declined) -> String {
        skipWhitespace()
        guard try take(UInt8(ascii: "\"")) else { throw Declined() }
        let start = position
        var index = start
        var high: UInt8 = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let utf8 = UnsafeRawBufferPointer(rebasing: bytes[start..<index])
                position = index + 1
                // ASCII is valid UTF-8 as it is; anything else is validated.
                if high < 0x80 { return String(decoding: utf8, as: UTF8.self) }
                guard let text = String(validating: utf8, as: UTF8.self) else { throw Declined() }
                return text
            }
            high |= byte
            if byte == UInt8(ascii: "\\") {
                position = index
                return try readEscapedString(from: start)
            }
            guard byte >= 0x20 else { throw Declined() }
            index += 1
        }
        throw Declined()
    }

    /// What `parse` makes of the bytes of a string without escapes (a base64 value); nil when
    /// the string has an escape or `parse` answers nil (the caller seeks back and reads it with
    /// ``readString()``).
    mutating func readRawString<Value>(_ parse: (UnsafeRawBufferPointer) -> Value?) throws(Declined) -> Value? {
        skipWhitespace()
        guard try take(UInt8(ascii: "\"")) else { throw Declined() }
        // A long string (a ciphertext's base64): its end found a word at a time.
        let rest = UnsafeRawBufferPointer(rebasing: bytes[position...])
        guard let base = rest.baseAddress, let quote = memchr(base, Int32(UInt8(ascii: "\"")), rest.count) else { throw Declined() }
        let text = UnsafeRawBufferPointer(start: base, count: base.distance(to: UnsafeRawPointer(quote)))
        guard memchr(base, Int32(UInt8(ascii: "\\")), text.count) == nil, let value = parse(text) else { return nil }
        position += text.count + 1
        return value
    }

    /// The rest of a string that has escapes, from its first byte after the quote. The bytes
    /// between escapes are copied a run at a time (a string of JSON in a `STRING` field, as
    /// mirroring's edit times, escapes every quote).
    private mutating func readEscapedString(from start: Int) throws(Declined) -> String {
        var utf8: [UInt8] = []
        utf8.reserveCapacity(position - start + 64)
        var run = start
        while position < bytes.count {
            let byte = bytes[position]
            switch byte {
            case UInt8(ascii: "\""):
                utf8.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[run..<position]))
                position += 1
                guard let text = String(validating: utf8, as: UTF8.self) else { throw Declined() }
                return text
            case UInt8(ascii: "\\"):
                utf8.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[run..<position]))
                guard position + 1 < bytes.count else { throw Declined() }
                let escape = bytes[position + 1]
                position += 2
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(escape)
                case UInt8(ascii: "b"): utf8.append(0x08)
                case UInt8(ascii: "f"): utf8.append(0x0C)
                case UInt8(ascii: "n"): utf8.append(0x0A)
                case UInt8(ascii: "r"): utf8.append(0x0D)
                case UInt8(ascii: "t"): utf8.append(0x09)
                case UInt8(ascii: "u"):
                    let scalar = try hexScalar()
                    utf8.append(contentsOf: String(Character(scalar)).utf8)
                default: throw Declined()
                }
                run = position
            default:
                guard byte >= 0x20 else { throw Declined() }
                position += 1
            }
        }
        throw Declined()
    }

    private mutating func hexScalar() throws(Declined) -> Unicode.Scalar {
        guard position + 4 <= bytes.count else { throw Declined() }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[position]
            position += 1
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw Declined()
            }
            value = value << 4 | UInt32(digit)
        }
        guard value != 0, let scalar = Unicode.Scalar(value) else { throw Declined() }
        return scalar
    }

    // MARK: Bytes

    private mutating func skipWhitespace() {
        while position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x09, 0x0A, 0x0D: position += 1
            default: return
            }
        }
    }

    private mutating func take(_ byte: UInt8) throws(Declined) -> Bool {
        guard position < bytes.count, bytes[position] == byte else { return false }
        position += 1
        return true
    }

    private mutating func open(_ bracket: UInt8) throws(Declined) {
        skipWhitespace()
        guard depth < Self.maxDepth, try take(bracket) else { throw Declined() }
        depth += 1
    }

    private mutating func literal(_ word: StaticString) throws(Declined) {
        let count = word.utf8CodeUnitCount
        guard position + count <= bytes.count else { throw Declined() }
        for offset in 0..<count where bytes[position + offset] != word.utf8Start[offset] { throw Declined() }
        position += count
    }

    /// A number as RFC 8259 writes it: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    private mutating func numberText() throws(Declined) -> String {
        skipWhitespace()
        let bytes = self.bytes
        let start = position
        var index = position
        func digits() -> Int {
            let first = index
            while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") { index += 1 }
            return index - first
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
        let integerStart = index
        let integerDigits = digits()
        guard integerDigits > 0, integerDigits == 1 || bytes[integerStart] != UInt8(ascii: "0") else { throw Declined() }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard digits() > 0 else { throw Declined() }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard digits() > 0 else { throw Declined() }
        }
        position = index
        return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
    }
}
