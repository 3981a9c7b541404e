import CloudStoreTesting
import CloudStoreWire
import Foundation
import Testing

@testable import CloudStore

/// Record metadata is written straight to bytes; it must stay the JSON the Codable conformances
/// write (and read back): the same bytes as `JSONEncoder` with sorted keys, for random values.
@Suite("Mirror metadata: bytes written as the encoder writes them")
struct MirrorMetadataEncodingTests {
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
            let written = try MirrorMetadata.encode(values)
            #expect(String(decoding: written, as: UTF8.self) == String(decoding: try Self.encoder().encode(values), as: UTF8.self), "round \(round)")
            #expect(try MirrorMetadata.decode([String: AttributeValue].self, written) == values)

            let keys = Dictionary(
                (0..<Int.random(in: 0...4, using: &generator)).map { _ in
                    (Self.texts.randomElement(using: &generator)!, Date(timeIntervalSinceReferenceDate: Double.random(in: -1e9...1e9, using: &generator)))
                }, uniquingKeysWith: { $1 })
            for upload in [PendingUpload.save(full: generator.chance(0.5), keys: keys), .delete] {
                let bytes = try MirrorMetadata.encode(upload)
                #expect(bytes == (try Self.encoder().encode(upload)), "round \(round): \(String(decoding: bytes, as: UTF8.self))")
                #expect(try MirrorMetadata.decode(PendingUpload.self, bytes) == upload)
            }
        }
    }
}
