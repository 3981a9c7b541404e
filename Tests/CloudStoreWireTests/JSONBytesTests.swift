import CloudStoreTesting
import Foundation
import Testing

@testable import CloudStoreWire

/// The byte writer of the hot wire types against Foundation's encoder configured as
/// `WireCoding.makeEncoder`: the same bytes for the same value, for random values of every type
/// that has the fast path, with and without `numbersAsStrings`.
@Suite("JSON bytes: the same as JSONEncoder")
struct JSONBytesTests {
    static let troublesome: [String] =
        (0..<0x20).map { String(UnicodeScalar(UInt8($0))) }
        + ["\"", "\\", "/", "\u{7F}", "é", "É", "日本", "🙂", "\u{2028}", "\u{FEFF}", "a/b", "Z", "z", "_", "0"]

    struct Values {
        var generator: SeededRandomNumberGenerator

        mutating func chance(_ probability: Double) -> Bool { generator.chance(probability) }
        mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &generator) }

        mutating func text() -> String {
            (0..<int(0...6)).map { _ in
                chance(0.5) ? JSONBytesTests.troublesome.randomElement(using: &generator)! : String("abcXYZ09 _.-".randomElement(using: &generator)!)
            }.joined()
        }

        mutating func double() -> Double {
            switch int(0...6) {
            case 0: Double(int(-1000...1000))
            case 1: Double.random(in: -1...1, using: &generator)
            case 2: Double.random(in: -1e300...1e300, using: &generator)
            case 3: Double(sign: chance(0.5) ? .minus : .plus, exponent: int(-1070...1020), significand: Double.random(in: 1..<2, using: &generator))
            case 4: [0.0, -0.0, 0.1, 1e15, 1e16, 1e17, 123456789012345680, .leastNonzeroMagnitude, .greatestFiniteMagnitude, 1e-7, 1e21].randomElement(using: &generator)!
            case 5: Double(Int64.random(in: Int64.min...Int64.max, using: &generator))
            default: Double(int(-100_000...100_000)) / 100
            }
        }

        /// A double whose text has no `.0` to keep: a whole `DOUBLE` field is the one value the two
        /// paths write apart (`wholeDoubleFields_keepTheirFraction`).
        mutating func fractionalDouble() -> Double {
            let value = double()
            guard value.description.hasSuffix(".0") else { return value }
            return abs(value) < 1e15 ? value + 0.5 : (value < 0 ? -1.5e20 : 1.5e20)
        }

        mutating func error() -> ServerError {
            var error = ServerError(
                ServerErrorCode(rawValue: ["CONFLICT", "EXISTS", "ACCESS_DENIED", text()].randomElement(using: &generator)!),
                reason: chance(0.8) ? text() : nil, retryAfter: chance(0.3) ? double() : nil,
                recordName: chance(0.7) ? text() : nil, zoneID: chance(0.5) ? zoneID() : nil,
                serverRecord: chance(0.4) ? record() : nil, uuid: chance(0.5) ? text() : nil,
                redirectURL: chance(0.2) ? text() : nil)
            error.subscriptionID = chance(0.2) ? text() : nil
            return error
        }

        mutating func json(depth: Int = 0) -> JSONValue {
            switch int(0...(depth > 2 ? 3 : 5)) {
            case 0: .null
            case 1: .bool(chance(0.5))
            case 2: .number(double())
            case 3: .string(text())
            case 4: .array((0..<int(0...3)).map { _ in json(depth: depth + 1) })
            default:
                .object(Dictionary((0..<int(0...4)).map { _ in (text(), json(depth: depth + 1)) }, uniquingKeysWith: { $1 }))
            }
        }

        mutating func zoneID() -> ZoneID {
            ZoneID(zoneName: text(), ownerRecordName: chance(0.5) ? text() : nil)
        }

        mutating func scalar(_ kind: Int) -> FieldValue {
            switch kind {
            case 0: .string(text())
            case 1: .int64(Int64.random(in: Int64.min...Int64.max, using: &generator))
            case 2: .double(fractionalDouble())
            case 3: .timestamp(Date(timeIntervalSince1970: Double(Int64.random(in: -4_000_000_000_000...4_000_000_000_000, using: &generator)) / 1000))
            case 4: .bytes(Data((0..<int(0...40)).map { _ in UInt8.random(in: 0...255, using: &generator) }))
            case 5:
                .reference(
                    Reference(
                        recordName: text(), zoneID: chance(0.5) ? zoneID() : nil,
                        action: [.none, .deleteSelf, .validate].randomElement(using: &generator)!))
            case 6:
                .location(
                    Location(
                        latitude: double(), longitude: double(), horizontalAccuracy: chance(0.5) ? double() : nil,
                        verticalAccuracy: chance(0.5) ? double() : nil, altitude: chance(0.5) ? double() : nil,
                        speed: chance(0.5) ? double() : nil, course: chance(0.5) ? double() : nil,
                        timestamp: chance(0.5) ? Int64.random(in: Int64.min...Int64.max, using: &generator) : nil))
            default:
                .asset(
                    Asset(
                        fileChecksum: text(), size: Int64.random(in: 0...Int64.max, using: &generator),
                        receipt: chance(0.5) ? text() : nil, downloadURL: chance(0.5) ? text() : nil))
            }
        }

        mutating func field() -> FieldValue {
            switch int(0...12) {
            case 12: return .encryptedBytes(Data((0..<int(0...60)).map { _ in UInt8.random(in: 0...255, using: &generator) }))
            case 8: return .list((0..<int(0...3)).map { _ in scalar(int(0...7)) })
            case 9: return .null
            case 10: return .unknown(type: "FUTURE_" + text(), value: json())
            case 11:
                let kind = int(0...7)
                return .list((0..<int(1...3)).map { _ in scalar(kind) })
            default: return scalar(int(0...7))
            }
        }

        mutating func stamp() -> Record.Stamp {
            Record.Stamp(
                timestamp: Date(timeIntervalSince1970: Double(int(0...2_000_000_000))),
                userRecordName: chance(0.7) ? text() : nil, deviceID: chance(0.7) ? text() : nil)
        }

        mutating func record() -> Record {
            let deleted = chance(0.15)
            return Record(
                recordName: text(), recordType: chance(0.8) ? text() : nil, recordChangeTag: chance(0.5) ? text() : nil,
                zoneID: chance(0.7) ? zoneID() : nil,
                fields: deleted && chance(0.5) ? [:] : Dictionary((0..<int(0...6)).map { _ in (text(), field()) }, uniquingKeysWith: { $1 }),
                created: chance(0.6) ? stamp() : nil, modified: chance(0.6) ? stamp() : nil, deleted: deleted,
                share: chance(0.2) ? share() : nil)
        }

        mutating func participant() -> ShareParticipant {
            ShareParticipant(
                participantID: chance(0.7) ? text() : nil, role: chance(0.5) ? .user : nil,
                permission: SharePermission.allCases.randomElement(using: &generator)!,
                acceptanceStatus: chance(0.5) ? .accepted : nil,
                userIdentity: .init(userRecordName: chance(0.5) ? text() : nil, lookupInfo: .init(userRecordName: text())))
        }

        mutating func share() -> ShareMetadata {
            ShareMetadata(
                shortGUID: chance(0.7) ? text() : nil, publicPermission: chance(0.7) ? .readOnly : nil,
                owner: chance(0.7) ? participant() : nil, participants: chance(0.7) ? (0..<int(0...3)).map { _ in participant() } : nil,
                currentUserParticipant: chance(0.5) ? participant() : nil)
        }

        mutating func request() -> RecordsModifyRequest {
            RecordsModifyRequest(
                zoneID: chance(0.8) ? zoneID() : nil, atomic: chance(0.5) ? chance(0.5) : nil,
                operations: (0..<int(0...4)).map { _ in
                    .init(
                        RecordsModifyRequest.OperationType.allCases.randomElement(using: &generator)!, record(),
                        desiredKeys: chance(0.3) ? (0..<int(0...2)).map { _ in text() } : nil)
                },
                desiredKeys: chance(0.3) ? (0..<int(0...2)).map { _ in text() } : nil,
                numbersAsStrings: chance(0.3) ? chance(0.5) : nil, syncToken: chance(0.3) ? text() : nil)
        }
    }

    static func expectSameBytes<T: Encodable & JSONBytesWritable>(_ value: T, _ round: Int) throws {
        for numbersAsStrings in [false, true] {
            let foundation = try WireCoding.makeEncoder(numbersAsStrings: numbersAsStrings).encode(value)
            var json = JSONBytes(numbersAsStrings: numbersAsStrings)
            try value.write(to: &json)
            #expect(
                String(decoding: json.bytes, as: UTF8.self) == String(decoding: foundation, as: UTF8.self),
                "\(T.self), round \(round), numbersAsStrings \(numbersAsStrings)")
            #expect(json.bytes == Array(foundation))
            #expect(try WireCoding.encodedBytes(value, numbersAsStrings: numbersAsStrings) == Array(foundation))
        }
    }

    @Test(arguments: [1, 2, 3, 4]) func everyHotWireType_writesTheEncodersBytes(seed: UInt64) throws {
        var values = Values(generator: SeededRandomNumberGenerator(seed: 9000 + seed))
        for round in 0..<300 {
            try Self.expectSameBytes(values.request(), round)
            try Self.expectSameBytes(values.record(), round)
            try Self.expectSameBytes(values.field(), round)
            try Self.expectSameBytes(values.json(), round)
            try Self.expectSameBytes(values.stamp(), round)
            try Self.expectSameBytes(values.zoneID(), round)
            try Self.expectSameBytes(values.error(), round)
            try Self.expectSameBytes(values.chance(0.5) ? RecordResult.value(values.record()) : .error(values.error()), round)
        }
    }

    /// A whole `DOUBLE` goes out as `2.0`, not `2` as Foundation's encoder writes it, because typed
    /// clients (MistKit, Codable models) read `2` as an integer; in a list, in a record, in a
    /// conflict's `serverRecord`, and through ``WireCoding``; it reads back as the same double.
    @Test func wholeDoubleFields_keepTheirFraction() throws {
        let cases: [(FieldValue, String)] = [
            (.double(2), #"{"type":"DOUBLE","value":2.0}"#), (.double(-0.0), #"{"type":"DOUBLE","value":-0.0}"#),
            (.double(2.5), #"{"type":"DOUBLE","value":2.5}"#), (.double(1e16), #"{"type":"DOUBLE","value":1e+16}"#),
            (.list([.double(1), .double(0.5)]), #"{"type":"DOUBLE_LIST","value":[1.0,0.5]}"#),
            (.int64(2), #"{"type":"INT64","value":2}"#),
        ]
        for (value, text) in cases {
            let bytes = try WireCoding.encodedBytes(value)
            #expect(String(decoding: bytes, as: UTF8.self) == text)
            #expect(try WireCoding.decode(FieldValue.self, from: Data(bytes)) == value)
        }
        let record = Record(recordName: "r", recordType: "Place", fields: ["rating": .double(4)])
        let conflict = RecordResult.error(ServerError(.conflict, reason: "changed", recordName: "r", serverRecord: record))
        for encoded in [try WireCoding.encodedBytes(record), try WireCoding.encodedBytes(conflict)] {
            #expect(String(decoding: encoded, as: UTF8.self).contains(#""rating":{"type":"DOUBLE","value":4.0}"#))
        }
        let response = try WireCoding.decode(RecordsResponse.self, from: WireCoding.encode(RecordsResponse(records: [conflict])))
        #expect(response.records.first?.error?.serverRecord?.fields["rating"] == .double(4))
        // Location members are plain doubles, written as Foundation writes them.
        #expect(String(decoding: try WireCoding.encodedBytes(FieldValue.location(Location(latitude: 2, longitude: 3))), as: UTF8.self).contains(#""latitude":2,"#))
    }

    /// Keys sort by their UTF-8 bytes, whatever path the comparison takes.
    @Test func keyOrder_isTheOrderOfTheUTF8Bytes() {
        let keys = Self.troublesome + ["", "a", "ab", "abc", "b", "aé", "a\u{0}", String(repeating: "k", count: 40), String(repeating: "k", count: 41)]
        for a in keys {
            for b in keys {
                #expect(JSONBytes.keyOrder(a, b) == a.utf8.lexicographicallyPrecedes(b.utf8), "\(a.debugDescription) < \(b.debugDescription)")
            }
        }
    }

    /// Doubles JSON cannot carry fail on both paths.
    @Test func nonFiniteDoubles_failAsTheEncoderFails() {
        for value in [Double.nan, .infinity, -.infinity] {
            let field = FieldValue.list([.double(1), .double(value)])
            #expect(throws: EncodingError.self) { try WireCoding.makeEncoder().encode(field) }
            #expect(throws: EncodingError.self) { try WireCoding.encodedBytes(field) }
            #expect(throws: EncodingError.self) { try WireCoding.encodedBytes(JSONValue.number(value)) }
        }
    }

    /// Base64 written and read straight from bytes: Foundation's text for every length and
    /// remainder, read back to the same bytes; what is not canonical is left to Foundation.
    @Test func base64_isFoundationsAndReadsBack() {
        var generator = SeededRandomNumberGenerator(seed: 77)
        for count in 0..<200 {
            let data = Data((0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) })
            var bytes: [UInt8] = []
            Base64Bytes.encode(data, into: &bytes)
            #expect(String(decoding: bytes, as: UTF8.self) == data.base64EncodedString(), "\(count) bytes")
            #expect(bytes.withUnsafeBytes(Base64Bytes.decode) == data, "\(count) bytes")
        }
        for text in ["QR==", "QUJ=", "QQ", "Q===", "=QQQ", "QQ=Q", "QU\\/D", "QUJD QUJD", "-_8=", "QQ==QQ==", "QUJD\n"] {
            #expect(Array(text.utf8).withUnsafeBytes(Base64Bytes.decode) == nil, "\(text)")
        }
    }
}
