/// The type of a record field, as the `type` key of a field value names it.
///
/// Scalars are `STRING`, `INT64`, `DOUBLE`, `TIMESTAMP`, `BYTES`, `REFERENCE`, `LOCATION` and
/// `ASSETID`, and `ENCRYPTED_BYTES` for ciphertext; a list of a scalar is the scalar's name with `_LIST` (`STRING_LIST`), and an empty list
/// whose element type is not known is `UNKNOWN_LIST`. Booleans travel as `INT64` 0 or 1.
public enum FieldType: Hashable, Sendable, CustomStringConvertible {
    case string
    case int64
    case double
    case timestamp
    case bytes
    case reference
    case location
    case asset
    /// A list of the given scalar type.
    indirect case list(FieldType)
    /// An empty list whose element type is not known.
    case unknownList
    /// Ciphertext the server stores and serves as opaque bytes: an end-to-end encrypted field
    /// (<doc:WireProtocol> §9), as CloudKit's `encryptedValues` travel.
    case encryptedBytes

    /// Reads a wire type name; nil for names this version does not know.
    public init?(rawValue: String) {
        if rawValue == "UNKNOWN_LIST" {
            self = .unknownList
            return
        }
        if rawValue.hasSuffix("_LIST") {
            guard let element = FieldType(scalar: String(rawValue.dropLast(5))) else { return nil }
            self = .list(element)
            return
        }
        guard let scalar = FieldType(scalar: rawValue) else { return nil }
        self = scalar
    }

    private init?(scalar: String) {
        switch scalar {
        case "STRING": self = .string
        case "INT64": self = .int64
        case "DOUBLE": self = .double
        case "TIMESTAMP": self = .timestamp
        case "BYTES": self = .bytes
        case "REFERENCE": self = .reference
        case "LOCATION": self = .location
        case "ASSETID": self = .asset
        case "ENCRYPTED_BYTES": self = .encryptedBytes
        default: return nil
        }
    }

    public var rawValue: String {
        switch self {
        case .string: "STRING"
        case .int64: "INT64"
        case .double: "DOUBLE"
        case .timestamp: "TIMESTAMP"
        case .bytes: "BYTES"
        case .reference: "REFERENCE"
        case .location: "LOCATION"
        case .asset: "ASSETID"
        case .list(let element): element.rawValue + "_LIST"
        case .unknownList: "UNKNOWN_LIST"
        case .encryptedBytes: "ENCRYPTED_BYTES"
        }
    }

    public var description: String { rawValue }

    /// Whether this is a list type (including `UNKNOWN_LIST`).
    public var isList: Bool {
        switch self {
        case .list, .unknownList: true
        default: false
        }
    }

    /// Whether a value of type `other` may be stored in a field declared with this type: the same
    /// type, or any list type into a list field when one side's element type is unknown.
    public func accepts(_ other: FieldType) -> Bool {
        if self == other { return true }
        switch (self, other) {
        case (.list, .unknownList), (.unknownList, .list): return true
        default: return false
        }
    }
}

extension FieldType: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let raw = try container.decode(String.self)
        guard let type = FieldType(rawValue: raw) else {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "unknown field type \"\(raw)\"")
        }
        self = type
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}
