import CloudStoreWire
import Foundation

/// When each field of a record was last edited, on the device that edited it: a reserved record
/// field (`CloudStoreEdited`, compact JSON of field name → milliseconds since 1970) that travels with
/// every object record, so `lastWriterWins` compares the edits themselves, not upload times.
///
/// Edit times come from each device's clock: devices whose clocks disagree by more than the time
/// between two edits can pick the "wrong" last writer; the losing value is still in the conflict log.
enum EditTimes {
    /// Entity attributes cannot start with "cloudstore", so the name never clashes with one.
    static let field = "CloudStoreEdited"

    static func parse(_ value: FieldValue?) -> [String: Date] {
        guard case .string(let text)? = value,
            let millis = readMilliseconds(Data(text.utf8)) ?? (try? JSONDecoder().decode([String: Int64].self, from: Data(text.utf8)))
        else { return [:] }
        return millis.mapValues { Date(millisecondsSince1970: $0) }
    }

    /// The field's JSON read straight from bytes; nil when the reader declines it (the decoder
    /// then reads it, see ``JSONBytesReadable``).
    static func readMilliseconds(_ json: Data) -> [String: Int64]? {
        JSONBytesReader.read(json) { reader throws(JSONBytesReader.Declined) in
            var millis: [String: Int64] = [:]
            try reader.readObject { reader, name throws(JSONBytesReader.Declined) in
                // The decoder keeps the first of a key that comes twice.
                guard millis[name] == nil else { return try reader.skipValue() }
                millis[name] = try reader.readInt64()
            }
            return millis
        }
    }

    /// The field for `times`: the JSON `AttributeValue.canonicalJSON` writes (keys sorted), written
    /// straight to bytes.
    static func fieldValue(_ times: [String: Date]) -> FieldValue {
        var json = JSONBytes()
        json.dictionary(times) { json, date in json.int(date.millisecondsSince1970) }
        return .string(String(decoding: json.bytes, as: UTF8.self))
    }
}
