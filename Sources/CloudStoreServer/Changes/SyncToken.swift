import CloudStoreWire
import Crypto
import Foundation

/// The opaque sync tokens of `changes/database`, `changes/zone` and `notifications`.
///
/// A token is base64url (no padding) of 18 or 26 bytes: a version byte, the kind (`D` database or
/// `Z` zone), 8 bytes of SHA-256 of the partition (and zone name) it belongs to, for a zone the
/// zone's incarnation, and the sequence it is at. The identity lets the server refuse a token of
/// another partition or zone (400) instead of answering with someone else's positions.
struct SyncToken: Hashable, Sendable {
    enum Kind: UInt8, Sendable {
        case database = 0x44  // "D"
        case zone = 0x5A  // "Z"
    }

    static let version: UInt8 = 1

    var kind: Kind
    var identity: UInt64
    var incarnation: Int64
    var seq: Int64

    static func database(_ partition: DatabasePartition, seq: Int64) -> SyncToken {
        SyncToken(kind: .database, identity: identity(of: [partition.key]), incarnation: 0, seq: seq)
    }

    static func zone(_ zone: ZoneAddress, _ stored: StoredZone, seq: Int64) -> SyncToken {
        SyncToken(
            kind: .zone, identity: identity(of: [zone.partition.key, zone.zoneName]),
            incarnation: stored.incarnation, seq: seq)
    }

    /// The zone's token after a `records/modify` that wrote `written` (in sequence order), for a
    /// client that sent `known` (nil: it holds no token, so it knows nothing of the zone): only
    /// when nothing but that request changed the zone after what the client knows (a token of the
    /// zone's incarnation at the zone's sequence before the write; without a token, a zone never
    /// written) and every row written is one the answer carries in full (`answered` saved or
    /// deleted it; a cascaded delete is not), so that the answer brings the client up to the token.
    /// Nil otherwise: the client fetches.
    static func afterWrite(
        known: SyncToken?, in zone: ZoneAddress, before: StoredZone, written: [StoredRecord],
        answered: [RecordsModifier.Outcome]
    ) -> SyncToken? {
        if let known {
            guard known.incarnation == before.incarnation, known.seq == before.seq else { return nil }
        } else {
            guard before.seq == 0 else { return nil }
        }
        var names = Set<String>()
        for outcome in answered {
            switch outcome {
            case .saved(let name), .deleted(let name): names.insert(name)
            case .failed, .atomicError: continue
            }
        }
        guard written.allSatisfy({ names.contains($0.name) }) else { return nil }
        return .zone(zone, before, seq: written.last?.seq ?? before.seq)
    }

    var encoded: String {
        var bytes: [UInt8] = [Self.version, kind.rawValue]
        bytes += Self.bigEndianBytes(identity)
        if kind == .zone { bytes += Self.bigEndianBytes(UInt64(bitPattern: incarnation)) }
        bytes += Self.bigEndianBytes(UInt64(bitPattern: seq))
        var text: [UInt8] = []
        Base64Bytes.encode(Data(bytes), into: &text)
        while text.last == UInt8(ascii: "=") { text.removeLast() }
        for index in text.indices {
            if text[index] == UInt8(ascii: "+") { text[index] = UInt8(ascii: "-") }
            if text[index] == UInt8(ascii: "/") { text[index] = UInt8(ascii: "_") }
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// Reads a token of a kind; the error says what is wrong with it, in words a client can log.
    static func decode(_ text: String, as kind: Kind) throws(APIError) -> SyncToken {
        let what = kind == .zone ? "zone sync token" : "database sync token"
        var base64 = text.utf8.map { byte in
            byte == UInt8(ascii: "-") ? UInt8(ascii: "+") : byte == UInt8(ascii: "_") ? UInt8(ascii: "/") : byte
        }
        base64 += repeatElement(UInt8(ascii: "="), count: (4 - base64.count % 4) % 4)
        guard text.utf8.count <= 64, let data = base64.withUnsafeBytes(Base64Bytes.decode) else {
            throw APIError(.badRequest, "the \(what) is malformed: drop it and fetch from scratch")
        }
        let bytes = [UInt8](data)
        guard bytes.count >= 2, bytes[0] == version else {
            throw APIError(.badRequest, "the \(what) is malformed: drop it and fetch from scratch")
        }
        guard bytes[1] == kind.rawValue else {
            let other = kind == .zone ? "a database token" : "a zone token"
            throw APIError(.badRequest, "the \(what) is \(other): database and zone tokens are not interchangeable")
        }
        let expected = kind == .zone ? 26 : 18
        guard bytes.count == expected else {
            throw APIError(.badRequest, "the \(what) is malformed: drop it and fetch from scratch")
        }
        let identity = integer(bytes[2..<10])
        let incarnation = kind == .zone ? Int64(bitPattern: integer(bytes[10..<18])) : 0
        let seq = Int64(bitPattern: integer(bytes[(expected - 8)..<expected]))
        guard seq >= 0 else {
            throw APIError(.badRequest, "the \(what) is malformed: drop it and fetch from scratch")
        }
        return SyncToken(kind: kind, identity: identity, incarnation: incarnation, seq: seq)
    }

    /// A zone token of `zone`, read from a request: 400 when it is malformed or another zone's.
    static func decode(_ text: String, of zone: ZoneAddress) throws(APIError) -> SyncToken {
        let token = try decode(text, as: .zone)
        try token.checkBelongs(to: zone)
        return token
    }

    /// Throws 400 when the token belongs to another partition or zone.
    func checkBelongs(to partition: DatabasePartition) throws(APIError) {
        guard identity == Self.identity(of: [partition.key]) else {
            throw APIError(.badRequest, "the database sync token belongs to another database: drop it")
        }
    }

    func checkBelongs(to zone: ZoneAddress) throws(APIError) {
        guard identity == Self.identity(of: [zone.partition.key, zone.zoneName]) else {
            throw APIError(
                .badRequest, "the sync token of zone \(zone.zoneName) belongs to another zone: drop it",
                zoneID: zone.zoneID)
        }
    }

    /// The identity a token of `zone` carries.
    static func identity(of zone: ZoneAddress) -> UInt64 { identity(of: [zone.partition.key, zone.zoneName]) }

    private static func identity(of parts: [String]) -> UInt64 {
        let digest = SHA256.hash(data: Data(parts.joined(separator: "\u{0}").utf8))
        return integer(Array(digest.prefix(8))[...])
    }

    private static func bigEndianBytes(_ value: UInt64) -> [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * $0)) }
    }

    private static func integer(_ bytes: ArraySlice<UInt8>) -> UInt64 {
        bytes.reduce(0) { $0 << 8 | UInt64($1) }
    }
}
