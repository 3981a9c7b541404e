import CloudStoreTesting
import CloudStoreWire
import Foundation
import Testing

@testable import CloudStore

/// Record metadata is written straight to bytes; it must stay the JSON the Codable conformances
/// write (and read back): the same bytes as `JSONEncoder` with sorted keys, for random values.
/// Pending uploads and edit times are read straight from bytes too: to the decoder's values, or
/// declined (and then decoded) when the reader does not handle the input.
@Suite("Mirror metadata: bytes written and read as the coders do")
struct MirrorTablesEncodingTests {
    static let texts = ["", "a/b", "\"q\"", "\\", "\n\t\u{1}", "é日本🙂", "title", "Z", "_x"]

    static func value(_ generator: inout SeededRandomNumberGenerator) -> AttributeValue {
        switch Int.random(in: 0...10, using: &generator) {
        case 0: .null
        case 1: .string(texts.randomElement(using: &generator)!)
        case 2: .int64(Int64.random(in: Int64.min...Int64.max, using: &generator))
        case 3: .double(Double.random(in: -1e20...1e20, using: &generator))
        case 4: .bool(generator.chance(0.5))
        case 5: .date(Date(millisecondsSince1970: Int64.random(in: -4_000_000_000_000...4_000_000_000_000, using: &generator)))
        case 6: .data(Data((0..<Int.random(in: 0...30, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }))
        case 7: .uuid(UUID())
        case 8: .url(URL(string: ["https://example.com/a?b=c", "file:///tmp/x%20y", "mailto:a@b.c"].randomElement(using: &generator)!)!)
        case 9: .decimal(Decimal(Int.random(in: -100_000...100_000, using: &generator)) / 100)
        default: .json(#"{"a":[1,"/"]}"#)
        }
    }

    /// A random save and a delete. Keys often share a date, as an insert's all do (the writer
    /// makes a shared date's text once).
    static func uploads(_ generator: inout SeededRandomNumberGenerator) -> [PendingUpload] {
        let shared = Date(timeIntervalSinceReferenceDate: Double.random(in: -1e9...1e9, using: &generator))
        let keys = Dictionary(
            (0..<Int.random(in: 0...4, using: &generator)).map { _ in
                (
                    texts.randomElement(using: &generator)!,
                    generator.chance(0.5) ? shared : Date(timeIntervalSinceReferenceDate: Double.random(in: -1e9...1e9, using: &generator))
                )
            }, uniquingKeysWith: { $1 })
        return [.save(full: generator.chance(0.5), keys: keys), .delete]
    }

    static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }

    @Test func attributeValuesAndPendingUploads_areTheEncodersBytesAndReadBack() throws {
        var generator = SeededRandomNumberGenerator(seed: 424242)
        for round in 0..<500 {
            let values = Dictionary(
                (0..<Int.random(in: 0...8, using: &generator)).map { _ in (Self.texts.randomElement(using: &generator)! + "k", Self.value(&generator)) },
                uniquingKeysWith: { $1 })
            let written = try MirrorTables.encode(values)
            #expect(String(decoding: written, as: UTF8.self) == String(decoding: try Self.encoder().encode(values), as: UTF8.self), "round \(round)")
            #expect(try MirrorTables.decode([String: AttributeValue].self, written) == values)

            for upload in Self.uploads(&generator) {
                let bytes = try MirrorTables.encode(upload)
                #expect(bytes == (try Self.encoder().encode(upload)), "round \(round): \(String(decoding: bytes, as: UTF8.self))")
                #expect(try MirrorTables.decode(PendingUpload.self, bytes) == upload)
            }
        }
    }

    /// Reads `data` both ways: a value the reader reads must be the decoder's.
    @discardableResult
    static func expectSameAsDecoder<T: Decodable & Equatable & JSONBytesReadable>(_ type: T.Type, _ data: Data) -> Bool {
        let decoded = try? JSONDecoder().decode(T.self, from: data)
        guard let read = T(jsonBytes: data) else {
            #expect((try? MirrorTables.decode(T.self, data)) == decoded)
            return false
        }
        #expect(read == decoded, "\(String(decoding: data, as: UTF8.self))")
        return true
    }

    @Test func pendingUploads_areReadAsTheDecoderReadsThemOrDeclined() throws {
        var generator = SeededRandomNumberGenerator(seed: 4343)
        var fuzzer = JSONFuzzer(seed: 4343)
        fuzzer.maxNesting = 50
        fuzzer.maxStringLength = 100
        for _ in 0..<500 {
            for upload in Self.uploads(&generator) {
                let bytes = try MirrorTables.encode(upload)
                #expect(Self.expectSameAsDecoder(PendingUpload.self, bytes))
                Self.expectSameAsDecoder(PendingUpload.self, fuzzer.mutate(bytes))
            }
        }
        for json in [
            #"{"delete":{}}"#, #" { "save" : { "keys" : { "a" : 1 } , "full" : false } } "#, #"{"save":{"full":true,"keys":{}}}"#,
            #"{"delete":{"x":1}}"#, #"{"delete":{},"save":{"full":true,"keys":{}}}"#, #"{"delete":{},"other":1}"#, #"{"delete":null}"#,
            #"{"save":{"full":true}}"#, #"{"save":{"full":1,"keys":{}}}"#, #"{"save":{"full":true,"keys":{"a":"1"}}}"#,
            #"{"save":{"full":true,"keys":{"a":1,"a":2}}}"#, #"{"save":{"full":true,"keys":{},"x":0}}"#, #"{}"#, #"{"delete":{}} {"#,
        ] {
            Self.expectSameAsDecoder(PendingUpload.self, Data(json.utf8))
        }
    }

    @Test func editTimes_areReadAsTheDecoderReadsThemOrDeclined() {
        for json in [
            #"{}"#, #"{"title":1763700000000,"body":-5}"#, #"{"t":1.0}"#, #"{"t":"1"}"#, #"{"t":1,"t":2}"#, #"{"t":99999999999999999999}"#,
            #"{"t":1}x"#, #"[]"#, #"{"t":null}"#,
        ] {
            let data = Data(json.utf8)
            let decoded = try? JSONDecoder().decode([String: Int64].self, from: data)
            if let read = EditTimes.readMilliseconds(data) { #expect(read == decoded, "\(json)") }
        }
        #expect(EditTimes.readMilliseconds(Data(#"{"title":1763700000000}"#.utf8)) == ["title": 1_763_700_000_000])
    }

    @Test func editTimes_areWrittenAsTheEncoderWritesThem() throws {
        var generator = SeededRandomNumberGenerator(seed: 4444)
        for _ in 0..<300 {
            let times = Dictionary(
                (0..<Int.random(in: 0...6, using: &generator)).map { _ in
                    (Self.texts.randomElement(using: &generator)! + Self.texts.randomElement(using: &generator)!,
                     Date(millisecondsSince1970: Int64.random(in: -4_000_000_000_000...4_000_000_000_000, using: &generator)))
                }, uniquingKeysWith: { $1 })
            let expected = try AttributeValue.canonicalJSON(times.mapValues(\.millisecondsSince1970))
            #expect(EditTimes.fieldValue(times) == .string(expected))
            #expect(EditTimes.parse(EditTimes.fieldValue(times)) == times)
        }
    }
}
