import Foundation

/// The JSON encoder and decoder both sides of the wire use.
public enum WireCoding {
    /// An encoder with sorted keys, so equal values give equal bytes.
    public static func makeEncoder(numbersAsStrings: Bool = false) -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        if numbersAsStrings {
            encoder.userInfo[.numbersAsStrings] = true
        }
        return encoder
    }

    public static func makeDecoder() -> JSONDecoder {
        JSONDecoder()
    }

    /// The JSON of a value: written straight to bytes when the type has that path
    /// (``JSONBytesWritable``: records, their fields, a records/modify request), through
    /// ``makeEncoder(numbersAsStrings:)`` otherwise; the same bytes either way.
    public static func encode<T: Encodable>(_ value: T, numbersAsStrings: Bool = false) throws -> Data {
        Data(try encodedBytes(value, numbersAsStrings: numbersAsStrings))
    }

    /// ``encode(_:numbersAsStrings:)`` as bytes.
    public static func encodedBytes<T: Encodable>(_ value: T, numbersAsStrings: Bool = false) throws -> [UInt8] {
        if let writable = value as? any JSONBytesWritable {
            var json = JSONBytes(numbersAsStrings: numbersAsStrings)
            try writable.write(to: &json)
            return json.bytes
        }
        return Array(try makeEncoder(numbersAsStrings: numbersAsStrings).encode(value))
    }

    /// The value of JSON bytes: read straight from them when the type has that path and the
    /// reader handles the document (`JSONBytesReadable`: records and the responses that carry
    /// them), through ``makeDecoder()`` otherwise; the same value either way.
    /// A document nested deeper than ``maxNesting`` levels is refused before the decoder sees it.
    public static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        if let readable = type as? any JSONBytesReadable.Type, let value = readable.init(jsonBytes: data) {
            return value as! T
        }
        try checkNesting(data)
        return try makeDecoder().decode(type, from: data)
    }

    /// How deep the wire's JSON may nest: no wire type comes near it (a record's deepest value is a
    /// few levels down), and Foundation's decoder, given hundreds of levels, can exhaust a thread's
    /// stack (the server fuzzer crashed the server with one).
    public static let maxNesting = 100

    /// Why a document nested too deep is refused.
    struct TooDeep: Error, CustomStringConvertible {
        var description: String {
            "it is nested more than \(WireCoding.maxNesting) levels deep; no request or response nests that deep"
        }
    }

    /// Throws `DecodingError.dataCorrupted` when `data` opens more than ``maxNesting`` arrays and
    /// objects at once, counting only brackets outside strings.
    static func checkNesting(_ data: Data) throws {
        var depth = 0
        var inString = false
        var escaped = false
        for byte in data {
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                depth += 1
                guard depth <= maxNesting else {
                    throw DecodingError.dataCorrupted(
                        DecodingError.Context(codingPath: [], debugDescription: "\(TooDeep())", underlyingError: TooDeep()))
                }
            case UInt8(ascii: "]"), UInt8(ascii: "}"): depth -= 1
            default: break
            }
        }
    }

    /// A one-line description of a decoding failure that names where in the JSON it happened,
    /// e.g. `operations[0].record.fields.title.value: BYTES value is not valid base64`.
    public static func describe(_ error: any Error) -> String {
        guard let decodingError = error as? DecodingError else { return String(describing: error) }
        func path(_ codingPath: [any CodingKey]) -> String {
            var text = ""
            for key in codingPath {
                if let index = key.intValue {
                    text += "[\(index)]"
                } else {
                    text += text.isEmpty ? key.stringValue : ".\(key.stringValue)"
                }
            }
            return text.isEmpty ? "body" : text
        }
        switch decodingError {
        case .typeMismatch(let type, let context):
            return "\(path(context.codingPath)): expected \(typeName(type))"
        case .valueNotFound(let type, let context):
            return "\(path(context.codingPath)): missing \(typeName(type))"
        case .keyNotFound(let key, let context):
            return "\(path(context.codingPath + [key])): required key is missing"
        case .dataCorrupted(let context):
            let underlying = context.underlyingError.map { " (\($0))" } ?? ""
            if context.codingPath.isEmpty { return "body is not valid JSON\(underlying)" }
            return "\(path(context.codingPath)): \(context.debugDescription)"
        @unknown default:
            return String(describing: error)
        }
    }

    private static func typeName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Bool.Type: "a boolean"
        case is Int.Type, is Int64.Type: "an integer"
        case is Double.Type: "a number"
        default:
            if "\(type)".hasPrefix("Array") { "an array" }
            else if "\(type)".hasPrefix("Dictionary") { "an object" }
            else { "a value of type \(type)" }
        }
    }
}
