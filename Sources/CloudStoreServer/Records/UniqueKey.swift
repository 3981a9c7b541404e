import CloudStoreWire
import Crypto
import Foundation

/// What a record holds under one uniqueness constraint of its type (WireProtocol.md §3,
/// "Uniqueness constraints"), as one canonical text: two live records of a zone whose texts are
/// equal break the constraint. Pure; storage keeps the texts of each live record in
/// `cloudstore_record_key` and only reads and writes them.
///
/// The text is `<type>(<field>,…)=<value>,…`, the constraint's fields sorted by name and each value
/// typed and exact: `s"…"` a `STRING` (JSON-escaped), `i…` an `INT64`, `d…` a `DOUBLE` (Swift's
/// shortest exact digits; -0 is 0), `t…` a `TIMESTAMP` in milliseconds, `b…` `BYTES` in base64,
/// `r"…"` a `REFERENCE` by its `recordName` alone. Type and field names are identifiers
/// (``RecordRules/identifierProblem(_:what:)``) and every value is delimited, so keys of different
/// types, constraints or values never meet. A text longer than ``maximumTextLength`` bytes is
/// replaced by `#sha256:` and the hex digest of it (no identifier starts with `#`), so that it fits
/// in a PostgreSQL index entry.
///
/// ```swift
/// let keys = UniqueKey.keys(of: listType, fields: ["title": "Groceries"])
/// // [UniqueKey(text: #"List(title)=s"Groceries""#, fields: ["title"], values: #"title = "Groceries""#)]
/// ```
struct UniqueKey: Hashable, Sendable {
    /// The canonical text, as stored.
    var text: String
    /// The constraint's field names, sorted.
    var fields: [String]
    /// The values as a person reads them, for errors: `title = "Groceries", owner = U-1`.
    var values: String

    /// The longest text stored as it is.
    static let maximumTextLength = 512

    /// The field types a constraint may name: the scalars whose values compare exactly.
    static let constrainableTypes: [FieldType] = [.string, .int64, .double, .timestamp, .bytes, .reference]

    /// The keys `fields` hold under the constraints of `recordType` in `schema`, in the order of
    /// the constraints: one per constraint whose fields are all present and not null (as in SQL,
    /// a missing or null value collides with nothing). None when the type has no constraints.
    static func keys(of recordType: String, fields: [String: FieldValue], in schema: CloudSchema) -> [UniqueKey] {
        guard let type = schema.recordType(named: recordType) else { return [] }
        return keys(of: type, fields: fields)
    }

    /// ``keys(of:fields:in:)`` for a record type at hand.
    static func keys(of type: CloudSchema.RecordType, fields: [String: FieldValue]) -> [UniqueKey] {
        var keys: [UniqueKey] = []
        for constraint in type.uniquenessConstraints ?? [] {
            guard let key = key(of: type.name, constraint: constraint, fields: fields), !keys.contains(key) else { continue }
            keys.append(key)
        }
        return keys
    }

    /// Whether records of `recordType` hold keys: its type has uniqueness constraints in `schema`.
    static func isConstrained(_ recordType: String, in schema: CloudSchema) -> Bool {
        !(schema.recordType(named: recordType)?.uniquenessConstraints ?? []).isEmpty
    }

    /// A constraint as compared and stored: its field names sorted (a constraint is a set).
    static func canonical(_ constraint: [String]) -> [String] { constraint.sorted() }

    /// The record types of `new` whose constraints differ from those they have in `old` (a type
    /// `old` lacks counts as having none): the types whose key rows a schema change rebuilds.
    static func typesWithChangedConstraints(from old: CloudSchema, to new: CloudSchema) -> [CloudSchema.RecordType] {
        new.recordTypes.filter { type in
            let before = old.recordType(named: type.name)?.uniquenessConstraints ?? []
            let after = type.uniquenessConstraints ?? []
            return Set(before.map(canonical)) != Set(after.map(canonical))
        }
    }

    private static func key(of recordType: String, constraint: [String], fields: [String: FieldValue]) -> UniqueKey? {
        let names = canonical(constraint)
        guard !names.isEmpty else { return nil }
        var encoded: [String] = []
        var readable: [String] = []
        for name in names {
            guard let value = fields[name], let text = encode(value) else { return nil }
            encoded.append(text)
            readable.append("\(name) = \(describe(value))")
        }
        var text = "\(recordType)(\(names.joined(separator: ",")))=\(encoded.joined(separator: ","))"
        if text.utf8.count > maximumTextLength {
            text = "#sha256:" + SHA256.hash(data: Data(text.utf8)).hexadecimal
        }
        return UniqueKey(text: text, fields: names, values: readable.joined(separator: ", "))
    }

    /// A value's canonical text; nil for null and for types a constraint may not name.
    private static func encode(_ value: FieldValue) -> String? {
        switch value {
        case .string(let text): "s" + quoted(text)
        case .int64(let number): "i\(number)"
        case .double(let number): "d\(number == 0 ? 0 : number)"
        case .timestamp(let date): "t\(date.millisecondsSince1970)"
        case .bytes(let data): "b" + data.base64EncodedString()
        case .reference(let reference): "r" + quoted(reference.recordName)
        // Ciphertext has a fresh nonce each time: equal values never look equal.
        case .location, .asset, .list, .null, .unknown, .encryptedBytes: nil
        }
    }

    /// Text as a JSON string literal: quotes, backslashes and control characters escaped, so the
    /// literal ends at its closing quote and holds no NUL (PostgreSQL refuses NUL in text).
    private static func quoted(_ text: String) -> String {
        var quoted = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": quoted += "\\\""
            case "\\": quoted += "\\\\"
            case _ where scalar.value < 0x20: quoted += String(format: "\\u%04x", scalar.value)
            default: quoted.unicodeScalars.append(scalar)
            }
        }
        return quoted + "\""
    }

    /// A value as an error shows it: text quoted and shortened, a reference by its record name.
    private static func describe(_ value: FieldValue) -> String {
        switch value {
        case .string(let text): quoted(text.count > 64 ? String(text.prefix(64)) + "…" : text)
        case .int64(let number): "\(number)"
        case .double(let number): "\(number)"
        case .timestamp(let date): "\(date.millisecondsSince1970) (ms since 1970)"
        case .bytes(let data): "\(data.count) bytes"
        case .reference(let reference): reference.recordName
        default: "\(value)"
        }
    }
}

/// The key rows of one record type rebuilt from its live records, when a schema change gives the
/// type other uniqueness constraints (``ServerStorage/updateSchema(container:environment:_:)``).
/// The storage reads the type's live records of every zone of the container and environment and
/// adds them in any order; two records of one zone that hold the same key refuse the change.
struct UniqueKeyRebuild: Sendable {
    /// One row of `cloudstore_record_key`.
    struct Row: Hashable, Sendable {
        var partitionID: Int64
        var zone: String
        var key: String
        var source: String
    }

    /// The record type, with its new constraints.
    let type: CloudSchema.RecordType
    /// The rows to store.
    private(set) var rows: [Row] = []
    /// Row (without its source) → the record holding it.
    private var holders: [Row: String] = [:]

    init(type: CloudSchema.RecordType) {
        self.type = type
    }

    /// Adds a live record of ``type`` in `zone` of the partition; a 409 `UNIQUE_FIELD_ERROR` that
    /// names both records, the zone and the fields when another record of the zone holds one of
    /// its keys.
    mutating func add(_ record: StoredRecord, partitionID: Int64, zone: String) throws {
        guard let content = try record.content?.decoded() else { return }
        for key in UniqueKey.keys(of: type, fields: content.fields) {
            let slot = Row(partitionID: partitionID, zone: zone, key: key.text, source: "")
            if let holder = holders[slot], holder != record.name {
                let (first, second) = holder < record.name ? (holder, record.name) : (record.name, holder)
                throw APIError(
                    .uniqueFieldError,
                    "record type \(type.name) cannot have uniqueness constraint [\(key.fields.joined(separator: ", "))]: records \(first) and \(second) in zone \(zone) both have the same \(key.fields.joined(separator: " and ")); change or delete one of them (or merge them), then declare the constraint again"
                )
            }
            holders[slot] = record.name
            rows.append(Row(partitionID: partitionID, zone: zone, key: key.text, source: record.name))
        }
    }
}
