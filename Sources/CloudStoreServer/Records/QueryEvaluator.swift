import CloudStoreWire
import Foundation

/// Filters and sorts the records of a `records/query`.
///
/// A filter names a field (`fieldName`) or a system field (`systemFieldName`: `recordName`,
/// `createdTimestamp`, `modifiedTimestamp`, `createdUserRecordName`, `modifiedUserRecordName`).
/// Numbers compare across `INT64` and `DOUBLE`, timestamps with timestamps or milliseconds, and
/// references by record name. A record without the field matches only the negative comparators
/// (`NOT_EQUALS`, `NOT_IN`, `NOT_BEGINS_WITH`). Sorting puts records without the field last and
/// breaks ties by record name, so pages are stable.
struct QueryEvaluator: Sendable {
    typealias Filter = RecordsQueryRequest.Filter
    typealias Sort = RecordsQueryRequest.Sort

    static let systemFields: Set<String> = [
        "recordName", "createdTimestamp", "modifiedTimestamp", "createdUserRecordName", "modifiedUserRecordName",
    ]

    let query: RecordsQueryRequest.Query

    /// Checks the query; a bad field or comparator is 400 naming it.
    init(_ query: RecordsQueryRequest.Query) throws(APIError) {
        if let problem = RecordRules.identifierProblem(query.recordType, what: "record type") {
            throw APIError(.badRequest, "query: \(problem)")
        }
        for (index, filter) in (query.filterBy ?? []).enumerated() {
            try Self.checkField(filter.fieldName, filter.systemFieldName, at: "query.filterBy[\(index)]")
            switch filter.comparator {
            case .in, .notIn:
                guard case .list = filter.fieldValue else {
                    throw APIError(.badRequest, "query.filterBy[\(index)]: \(filter.comparator.rawValue) needs a list value")
                }
            case .beginsWith, .notBeginsWith:
                guard case .string = filter.fieldValue else {
                    throw APIError(.badRequest, "query.filterBy[\(index)]: \(filter.comparator.rawValue) needs a STRING value")
                }
            default:
                break
            }
        }
        for (index, sort) in (query.sortBy ?? []).enumerated() {
            try Self.checkField(sort.fieldName, sort.systemFieldName, at: "query.sortBy[\(index)]")
        }
        self.query = query
    }

    private static func checkField(_ field: String?, _ system: String?, at path: String) throws(APIError) {
        switch (field, system) {
        case (let field?, nil):
            if let problem = RecordRules.identifierProblem(field, what: "field name") {
                throw APIError(.badRequest, "\(path): \(problem)")
            }
        case (nil, let system?):
            guard systemFields.contains(system) else {
                throw APIError(
                    .badRequest,
                    "\(path): system field \(system.prefix(64)) is unknown: use one of \(systemFields.sorted().joined(separator: ", "))")
            }
        default:
            throw APIError(.badRequest, "\(path): name exactly one of fieldName and systemFieldName")
        }
    }

    /// A live row with its content decoded, once per query.
    struct Candidate {
        var row: StoredRecord
        var content: RecordContent?
    }

    /// The matching rows, sorted; throws when a row's stored content cannot be read, and 400 when
    /// the query filters or sorts on an end-to-end encrypted field (``refuseEncryptedFields(in:)``).
    func run(_ rows: [StoredRecord]) throws -> [StoredRecord] {
        let filters = query.filterBy ?? []
        let candidates = try rows.map { Candidate(row: $0, content: try $0.content?.decoded()) }
        try refuseEncryptedFields(in: candidates)
        let matching = candidates.filter { candidate in filters.allSatisfy { matches(candidate, $0) } }
        let sorts = query.sortBy ?? []
        return matching.sorted { left, right in
            for sort in sorts {
                let a = Self.value(of: left, field: sort.fieldName, system: sort.systemFieldName)
                let b = Self.value(of: right, field: sort.fieldName, system: sort.systemFieldName)
                switch (a, b) {
                case (nil, nil): continue
                case (nil, _): return false
                case (_, nil): return true
                case (let a?, let b?):
                    guard let order = Self.compare(a, b), order != .orderedSame else { continue }
                    return (order == .orderedAscending) == (sort.ascending ?? true)
                }
            }
            return left.row.name < right.row.name
        }.map(\.row)
    }

    /// The server holds only ciphertext of an encrypted field (`ENCRYPTED_BYTES`): a filter or sort
    /// on one could only compare random bytes, so it is refused, naming the field.
    func refuseEncryptedFields(in candidates: [Candidate]) throws(APIError) {
        let named = (query.filterBy ?? []).compactMap(\.fieldName) + (query.sortBy ?? []).compactMap(\.fieldName)
        guard !named.isEmpty else { return }
        let encryptedFilterValue = (query.filterBy ?? []).first { filter in
            if case .encryptedBytes = filter.fieldValue { return true }
            if case .list(let elements) = filter.fieldValue { return elements.contains { $0.type == .encryptedBytes } }
            return false
        }
        let field =
            encryptedFilterValue?.fieldName
            ?? named.first { name in
                candidates.contains { candidate in
                    guard let value = candidate.content?.fields[name] else { return false }
                    if case .encryptedBytes = value { return true }
                    if case .list(let elements) = value { return elements.first?.type == .encryptedBytes }
                    return false
                }
            }
        guard let field else { return }
        throw APIError(
            .badRequest,
            "query: field \(field) of \(query.recordType) is encrypted end to end (ENCRYPTED_BYTES): the server holds only ciphertext and cannot filter or sort on it; filter on the device after fetching")
    }

    func matches(_ row: Candidate, _ filter: Filter) -> Bool {
        let value = Self.value(of: row, field: filter.fieldName, system: filter.systemFieldName)
        let target = filter.fieldValue
        switch filter.comparator {
        case .equals: return value.map { Self.equal($0, target) } ?? false
        case .notEquals: return !(value.map { Self.equal($0, target) } ?? false)
        case .lessThan: return order(value, target) == .orderedAscending
        case .lessThanOrEquals: return [.orderedAscending, .orderedSame].contains(order(value, target))
        case .greaterThan: return order(value, target) == .orderedDescending
        case .greaterThanOrEquals: return [.orderedDescending, .orderedSame].contains(order(value, target))
        case .in: return value.map { Self.isMember($0, of: target) } ?? false
        case .notIn: return !(value.map { Self.isMember($0, of: target) } ?? false)
        case .beginsWith: return Self.beginsWith(value, target)
        case .notBeginsWith: return !Self.beginsWith(value, target)
        case .listContains:
            guard case .list(let elements)? = value else { return false }
            return elements.contains { Self.equal($0, target) }
        }
    }

    private func order(_ value: FieldValue?, _ target: FieldValue) -> ComparisonResult? {
        value.flatMap { Self.compare($0, target) }
    }

    static func value(of row: Candidate, field: String?, system: String?) -> FieldValue? {
        guard let content = row.content else { return nil }
        if let field { return content.fields[field] }
        switch system {
        case "recordName": return .string(row.row.name)
        case "createdTimestamp": return .timestamp(content.created.timestamp)
        case "modifiedTimestamp": return .timestamp(content.modified.timestamp)
        case "createdUserRecordName": return content.created.userRecordName.map(FieldValue.string)
        case "modifiedUserRecordName": return content.modified.userRecordName.map(FieldValue.string)
        default: return nil
        }
    }

    static func equal(_ a: FieldValue, _ b: FieldValue) -> Bool {
        compare(a, b).map { $0 == .orderedSame } ?? (a == b)
    }

    private static func isMember(_ value: FieldValue, of list: FieldValue) -> Bool {
        guard case .list(let elements) = list else { return false }
        return elements.contains { equal(value, $0) }
    }

    private static func beginsWith(_ value: FieldValue?, _ prefix: FieldValue) -> Bool {
        guard case .string(let text)? = value, case .string(let prefix) = prefix else { return false }
        return text.hasPrefix(prefix)
    }

    /// An order between two values of comparable types; nil when they do not compare.
    static func compare(_ a: FieldValue, _ b: FieldValue) -> ComparisonResult? {
        switch (comparable(a), comparable(b)) {
        case (.number(let x)?, .number(let y)?): x < y ? .orderedAscending : x > y ? .orderedDescending : .orderedSame
        case (.text(let x)?, .text(let y)?): x < y ? .orderedAscending : x > y ? .orderedDescending : .orderedSame
        default: nil
        }
    }

    private enum Comparable {
        case number(Double)
        case text(String)
    }

    private static func comparable(_ value: FieldValue) -> Comparable? {
        switch value {
        case .int64(let number): .number(Double(number))
        case .double(let number): .number(number)
        case .timestamp(let date): .number(Double(date.millisecondsSince1970))
        case .string(let text): .text(text)
        case .reference(let reference): .text(reference.recordName)
        default: nil
        }
    }
}
