import CloudStore
import Foundation

extension AttributeValue {
    /// The value as commands print it: a string in double quotes with only `"`, `\` and control
    /// characters escaped (`"B's title"`), anything else as its description.
    var commandText: String {
        guard case .string(let text) = self else { return description }
        var escaped = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": escaped += "\\\""
            case "\\": escaped += "\\\\"
            case "\n": escaped += "\\n"
            case "\r": escaped += "\\r"
            case "\t": escaped += "\\t"
            case _ where scalar.value < 0x20: escaped += "\\u{\(String(scalar.value, radix: 16))}"
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return "\"\(escaped)\""
    }
}

/// A value as `--json` output writes it: as the JSON value it is (a number as a number, a string
/// as a string, a `json` attribute as its document), never as quoted text.
///
/// Dates are ISO 8601 strings with milliseconds, as every date of the output; data is base64;
/// UUIDs and URLs are strings; a double that JSON cannot hold (NaN, infinity) is its description.
enum CommandJSONValue: Codable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case decimal(Decimal)
    case string(String)
    case array([CommandJSONValue])
    case object([String: CommandJSONValue])

    init(_ value: AttributeValue) {
        switch value {
        case .null: self = .null
        case .string(let text): self = .string(text)
        case .int64(let number): self = .int(number)
        case .double(let number): self = number.isFinite ? .double(number) : .string(number.description)
        case .bool(let flag): self = .bool(flag)
        case .date(let date): self = .string(CommandOutput.timestamp(date))
        case .data(let data): self = .string(data.base64EncodedString())
        case .externalData(let external):
            self = .object(["size": .int(external.size), "sha256": .string(external.checksum)])
        case .uuid(let uuid): self = .string(uuid.uuidString)
        case .url(let url): self = .string(url.absoluteString)
        case .decimal(let decimal): self = .decimal(decimal)
        case .json(let text):
            self = (try? JSONDecoder().decode(CommandJSONValue.self, from: Data(text.utf8))) ?? .string(text)
        }
    }

    /// A JSON document read as it is: booleans stay booleans, whole numbers integers.
    init(from decoder: any Decoder) throws {
        if var array = try? decoder.unkeyedContainer() {
            var values: [CommandJSONValue] = []
            while !array.isAtEnd { values.append(try array.decode(CommandJSONValue.self)) }
            self = .array(values)
            return
        }
        if let object = try? decoder.container(keyedBy: AnyKey.self) {
            var values: [String: CommandJSONValue] = [:]
            for key in object.allKeys { values[key.stringValue] = try object.decode(CommandJSONValue.self, forKey: key) }
            self = .object(values)
            return
        }
        let single = try decoder.singleValueContainer()
        if single.decodeNil() {
            self = .null
        } else if let flag = try? single.decode(Bool.self) {
            self = .bool(flag)
        } else if let number = try? single.decode(Int64.self) {
            self = .int(number)
        } else if let number = try? single.decode(Double.self) {
            self = .double(number)
        } else {
            self = .string(try single.decode(String.self))
        }
    }

    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let flag): try container.encode(flag)
        case .int(let number): try container.encode(number)
        case .double(let number): try container.encode(number)
        case .decimal(let decimal): try container.encode(decimal)
        case .string(let text): try container.encode(text)
        case .array(let values): try container.encode(values)
        case .object(let values): try container.encode(values)
        }
    }
}
