import CloudStoreWire
import Foundation

/// Makes bad JSON for fuzz tests, reproducibly from a seed: random documents, and mutations of
/// valid ones (values swapped for huge numbers, huge strings, deep nesting or other types; keys
/// dropped or renamed; bytes flipped, cut or replaced by invalid UTF-8).
///
/// ```swift
/// var fuzzer = JSONFuzzer(seed: 42)
/// let seeds = [Data(#"{"zones": [{"zoneID": {"zoneName": "Notes"}}]}"#.utf8)]
/// for _ in 0..<1000 {
///     let input = fuzzer.next(from: seeds)
///     do { _ = try WireCoding.decode(ZonesLookupRequest.self, from: input) } catch is DecodingError {}
/// }
/// ```
public struct JSONFuzzer: Sendable {
    public private(set) var random: SeededRandomNumberGenerator
    /// The deepest nesting a mutation builds.
    public var maxNesting = 5_000
    /// The longest string a mutation builds.
    public var maxStringLength = 200_000
    /// Verbatim text for the literal nodes of the document being built.
    private var literals: [String] = []
    /// Documents already parsed, so that mutating the same seeds again costs no parsing.
    private var parsed: [Data: JSONValue?] = [:]

    public init(seed: UInt64) {
        random = SeededRandomNumberGenerator(seed: seed)
    }

    /// A random document a third of the time, else a mutation of one of `seeds`.
    public mutating func next(from seeds: [Data]) -> Data {
        if seeds.isEmpty || random.chance(1.0 / 3) { return randomDocument() }
        return mutate(seeds[Int.random(in: 0..<seeds.count, using: &random)])
    }

    /// A random JSON document of up to `depth` levels.
    public mutating func randomDocument(depth: Int = 4) -> Data {
        render(randomValue(depth: depth))
    }

    /// A mutation of `data`: structural when `data` is JSON (one or two changes to its tree),
    /// else, or sometimes also, damage to its bytes.
    public mutating func mutate(_ data: Data) -> Data {
        var output = data
        if let tree = parse(data), random.chance(0.75) {
            var tree = tree
            for _ in 0..<Int.random(in: 1...2, using: &random) { tree = mutateTree(tree) }
            output = render(tree)
            if random.chance(0.8) { return output }
        }
        return damageBytes(output)
    }

    // MARK: Trees

    private mutating func parse(_ data: Data) -> JSONValue? {
        if let tree = parsed[data] { return tree }
        let tree = try? WireCoding.decode(JSONValue.self, from: data)
        if parsed.count < 64 { parsed[data] = tree }
        return tree
    }

    /// Values that break careless decoders, as literal JSON text.
    private static let nastyLiterals = [
        "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
        "18446744073709551616", "1e308", "-1e308", "1e309", "4.9e-324", "0.1", "-0", "1.5", "1E400",
        "123456789012345678901234567890", "9.2233720368547758e18", "-9.3e18", "1e-400", "0", "-1", "2147483648",
        "\"\"", "\"\\u0000\"", "\"\\ud800\"", "\"\\udc00\\ud800\"", "\"\u{1F600}\"", "\"\\\\\"", "\"%%%\"",
        "\"' OR 1=1 --\"", "\"Robert'); DROP TABLE cloudstore_record;--\"", "\"../../etc/passwd\"",
        "\"\\n\\r\\t\"", "\"_defaultZone\"", "\"INT64\"", "\"UNKNOWN_LIST\"", "\"STRING_LIST_LIST\"", "\"ENCRYPTED_BYTES\"",
        "true", "false", "null", "[]", "{}", "[null]", "{\"value\": null}",
    ]

    private mutating func mutateTree(_ value: JSONValue) -> JSONValue {
        var nodes = 0
        count(value, into: &nodes)
        let target = Int.random(in: 0..<max(nodes, 1), using: &random)
        var index = 0
        return rewrite(value, target: target, index: &index)
    }

    private func count(_ value: JSONValue, into nodes: inout Int) {
        nodes += 1
        switch value {
        case .array(let values): for value in values { count(value, into: &nodes) }
        case .object(let object): for value in object.values { count(value, into: &nodes) }
        default: break
        }
    }

    private mutating func rewrite(_ value: JSONValue, target: Int, index: inout Int) -> JSONValue {
        if index == target {
            index += 1
            return replacement(for: value)
        }
        index += 1
        switch value {
        case .array(let values):
            var values = values
            for position in values.indices { values[position] = rewrite(values[position], target: target, index: &index) }
            return .array(values)
        case .object(let object):
            var result: [String: JSONValue] = [:]
            for key in object.keys.sorted() { result[key] = rewrite(object[key]!, target: target, index: &index) }
            return .object(result)
        default:
            return value
        }
    }

    /// What a chosen node becomes.
    private mutating func replacement(for value: JSONValue) -> JSONValue {
        switch Int.random(in: 0..<10, using: &random) {
        case 0, 1:
            return literal(Self.nastyLiterals[Int.random(in: 0..<Self.nastyLiterals.count, using: &random)])
        case 2:
            let length = [1_000, 70_000, maxStringLength][Int.random(in: 0..<3, using: &random)]
            return .string(String(repeating: "x", count: length))
        case 3:
            let depth = [64, 600, maxNesting][Int.random(in: 0..<3, using: &random)]
            return random.chance(0.5)
                ? literal(String(repeating: "[", count: depth) + "1" + String(repeating: "]", count: depth))
                : literal(String(repeating: "{\"a\":", count: depth) + "1" + String(repeating: "}", count: depth))
        case 4:
            return randomValue(depth: 2)
        case 5:
            return .array(Array(repeating: value, count: Int.random(in: 0...20, using: &random)))
        case 6:
            guard case .object(var object) = value, let key = object.keys.sorted().randomElement(using: &random) else {
                return .null
            }
            object[key] = nil
            return .object(object)
        case 7:
            guard case .object(var object) = value, let key = object.keys.sorted().randomElement(using: &random) else {
                return .object(["": value])
            }
            object[randomString()] = object.removeValue(forKey: key)
            return .object(object)
        case 8:
            return .array([value])
        default:
            return .string(randomString())
        }
    }

    /// A node rendered as `text` verbatim, for numbers and nesting JSONValue cannot hold exactly.
    private mutating func literal(_ text: String) -> JSONValue {
        literals.append(text)
        return .string("\u{1}literal:\(literals.count - 1)\u{1}")
    }

    private mutating func randomValue(depth: Int) -> JSONValue {
        switch Int.random(in: 0..<(depth > 0 ? 7 : 5), using: &random) {
        case 0: return .null
        case 1: return .bool(random.chance(0.5))
        case 2: return .number(Double(Int.random(in: -1_000_000...1_000_000, using: &random)) / [1, 10, 1000][Int.random(in: 0..<3, using: &random)])
        case 3: return .string(randomString())
        case 4: return literal(Self.nastyLiterals[Int.random(in: 0..<Self.nastyLiterals.count, using: &random)])
        case 5:
            return .array((0..<Int.random(in: 0...4, using: &random)).map { _ in randomValue(depth: depth - 1) })
        default:
            let keys = ["zoneID", "zoneName", "recordName", "recordType", "fields", "value", "type", "operations",
                        "operationType", "record", "records", "zones", "syncToken", "resultsLimit", "query",
                        "recordTypes", "name", "entities", "attributes", "relationships", "serverErrorCode"]
            var object: [String: JSONValue] = [:]
            for _ in 0..<Int.random(in: 0...4, using: &random) {
                let key = random.chance(0.7) ? keys[Int.random(in: 0..<keys.count, using: &random)] : randomString()
                object[key] = randomValue(depth: depth - 1)
            }
            return .object(object)
        }
    }

    private mutating func randomString() -> String {
        let alphabet = Array("abcXYZ019_-. é€😀\"\\/\u{0}\u{7}")
        return String((0..<Int.random(in: 0...12, using: &random)).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &random)] })
    }

    /// The tree as JSON text, with literal nodes spliced in verbatim.
    private mutating func render(_ value: JSONValue) -> Data {
        defer { literals = [] }
        guard let data = try? WireCoding.encode(value) else { return Data("null".utf8) }
        var text = String(decoding: data, as: UTF8.self)
        for (index, literal) in literals.enumerated().reversed() {
            text = text.replacingOccurrences(of: "\"\\u0001literal:\(index)\\u0001\"", with: literal)
        }
        return Data(text.utf8)
    }

    // MARK: Bytes

    private static let invalidUTF8: [[UInt8]] = [[0xFF], [0xC0, 0x80], [0xED, 0xA0, 0x80], [0xF8, 0x88, 0x80, 0x80, 0x80], [0x80], [0xE2, 0x82]]

    private mutating func damageBytes(_ data: Data) -> Data {
        var bytes = [UInt8](data)
        for _ in 0..<Int.random(in: 1...3, using: &random) {
            let position = bytes.isEmpty ? 0 : Int.random(in: 0...bytes.count, using: &random)
            switch Int.random(in: 0..<6, using: &random) {
            case 0 where !bytes.isEmpty:
                bytes[min(position, bytes.count - 1)] ^= UInt8.random(in: 1...255, using: &random)
            case 1:
                bytes.insert(contentsOf: Self.invalidUTF8[Int.random(in: 0..<Self.invalidUTF8.count, using: &random)], at: position)
            case 2:
                bytes = Array(bytes.prefix(position))
            case 3 where !bytes.isEmpty:
                let end = min(bytes.count, position + Int.random(in: 1...16, using: &random))
                bytes.removeSubrange(min(position, end)..<end)
            case 4:
                let tokens: [String] = ["{", "}", "[", "]", ",", ":", "\"", "\\", "\\u", "nul", "1e", "-", "\u{0}"]
                bytes.insert(contentsOf: Array(tokens[Int.random(in: 0..<tokens.count, using: &random)].utf8), at: position)
            default:
                let start = min(position, bytes.count)
                let end = min(bytes.count, start + Int.random(in: 1...64, using: &random))
                bytes.insert(contentsOf: bytes[start..<end], at: start)
            }
        }
        return Data(bytes)
    }
}
