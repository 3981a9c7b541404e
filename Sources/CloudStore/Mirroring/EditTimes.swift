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
            let millis = try? JSONDecoder().decode([String: Int64].self, from: Data(text.utf8))
        else { return [:] }
        return millis.mapValues { Date(millisecondsSince1970: $0) }
    }

    static func fieldValue(_ times: [String: Date]) -> FieldValue {
        let millis = times.mapValues(\.millisecondsSince1970)
        return .string((try? AttributeValue.canonicalJSON(millis)) ?? "{}")
    }
}
