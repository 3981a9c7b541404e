import CloudStoreWire
import Foundation

/// The checks a record passes: names, field types and references before the server looks at what
/// is stored, and size once the content to store is encoded (``sizeProblem(_:recordName:)``).
/// Each failure is a per-record error that names the record and the problem.
struct RecordRules: Sendable {
    var zone: ZoneAddress
    var maxRecordBytes: Int
    /// Whether every reference, whatever its action, must point into the record's own zone: the
    /// rule of the shared database (WireProtocol.md §6). Otherwise only `VALIDATE` and
    /// `DELETE_SELF` references must.
    var sameZoneReferencesOnly = false

    /// Checks what a modify operation sends; nil when it is acceptable.
    func check(_ record: Record) -> ServerError? {
        if let problem = Self.recordNameProblem(record.recordName) {
            return failure(.badRequest, problem, record.recordName)
        }
        if let type = record.recordType, let problem = Self.identifierProblem(type, what: "record type") {
            return failure(.badRequest, problem, record.recordName)
        }
        // The first problem by field name, so the answer does not depend on the dictionary's
        // order; fields are not sorted for it (most records have no problem).
        var first: (name: String, error: ServerError)?
        for (name, value) in record.fields where first.map({ name < $0.name }) ?? true {
            if let error = fieldProblem(name, value, in: record) { first = (name, error) }
        }
        return first?.error
    }

    /// What is wrong with one field of `record`; nil when nothing.
    private func fieldProblem(_ name: String, _ value: FieldValue, in record: Record) -> ServerError? {
        if let problem = Self.identifierProblem(name, what: "field name") {
            return failure(.badRequest, problem, record.recordName)
        }
        if case .unknown(let type, _) = value {
            return failure(
                .badRequest, "field \(name) has unknown type \(type.prefix(64)): use STRING, INT64, DOUBLE, TIMESTAMP, BYTES, REFERENCE, LOCATION, ASSETID or a list of one",
                record.recordName)
        }
        for reference in Self.references(in: value) {
            // A name no record can have is refused before it reaches storage (PostgreSQL
            // refuses NUL in text), whatever the reference's action.
            if let problem = Self.recordNameProblem(reference.recordName) {
                return failure(.badRequest, "field \(name): the reference's \(problem)", record.recordName)
            }
            guard reference.action != .none || sameZoneReferencesOnly else { continue }
            if let target = reference.zoneID, target.zoneName != zone.zoneName
                || (target.ownerRecordName.map { $0 != zone.partition.owner } ?? false)
            {
                return failure(
                    .badRequest,
                    sameZoneReferencesOnly
                        ? "field \(name): records of the shared database may refer only to records of their own zone"
                        : "field \(name): a \(reference.action.rawValue) reference must point into the record's own zone",
                    record.recordName)
            }
        }
        return nil
    }

    /// 413-style per-record failure when the fields of the content to store take more than the
    /// limit, counted on the content's own encoding (the one stored and sent).
    func sizeProblem(_ content: StoredContent, recordName: String) -> ServerError? {
        let size = content.parts?.fields.count ?? content.json.utf8.count
        guard size > maxRecordBytes else { return nil }
        return failure(
            .limitExceeded,
            "record \(recordName) has \(size) bytes of fields; the limit is \(maxRecordBytes): make it smaller",
            recordName)
    }

    func failure(_ code: ServerErrorCode, _ reason: String, _ recordName: String) -> ServerError {
        ServerError(code, reason: reason, recordName: recordName, zoneID: zone.zoneID)
    }

    /// Every reference in a value, including the elements of a `REFERENCE_LIST`.
    static func references(in value: FieldValue) -> [Reference] {
        switch value {
        case .reference(let reference): [reference]
        case .list(let values): values.flatMap(references(in:))
        default: []
        }
    }

    /// Record names: 1 to 255 bytes, no control characters.
    static func recordNameProblem(_ name: String) -> String? {
        guard !name.isEmpty, name.utf8.count <= 255,
            // Control characters (general category Cc) are exactly U+0000–U+001F and U+007F–U+009F:
            // compared as values, not looked up in Unicode's tables for every scalar.
            !name.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) })
        else {
            return "record name \"\(name.prefix(64))\" is invalid: use 1 to 255 printable characters"
        }
        return nil
    }

    /// Record type and field names: a letter, then letters, digits, `_` or `.`, at most 255.
    static func identifierProblem(_ name: String, what: String) -> String? {
        let bytes = Array(name.utf8)
        func isLetter(_ byte: UInt8) -> Bool { (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) }
        guard let first = bytes.first, isLetter(first), bytes.count <= 255,
            bytes.allSatisfy({ isLetter($0) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5F || $0 == 0x2E })
        else {
            return "\(what) \"\(name.prefix(64))\" is invalid: start with a letter, then letters, digits, _ or ."
        }
        return nil
    }
}
