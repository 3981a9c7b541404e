/// One item of an endpoint's answer: the value the operation made or found, or the server's error
/// naming it.
///
/// On the wire an item is the value's own JSON or the error's own JSON; an item with a
/// `serverErrorCode` is an error. A records endpoint answers with ``RecordResult``s (a delete's
/// result is a record with `deleted: true`), a zones endpoint with ``ZoneResult``s, and
/// `changes/zone` with ``ZoneChangesResult``s.
///
/// ```swift
/// for result in response.records {
///     switch result {
///     case .value(let record): print("saved", record.recordName)
///     case .error(let error): print("refused", error.recordName ?? "?", error.code)
///     }
/// }
/// ```
public enum WireResult<Value: Hashable & Sendable & Codable>: Hashable, Sendable, Codable {
    /// The operation's value: a record, a zone, or a zone's changes.
    case value(Value)
    /// The server's refusal of this item, naming it (the other items of the answer stand).
    case error(ServerError)

    public init(from decoder: any Decoder) throws {
        let probe = try decoder.container(keyedBy: ProbeKeys.self)
        if probe.contains(.serverErrorCode) {
            self = .error(try ServerError(from: decoder))
        } else {
            self = .value(try Value(from: decoder))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .value(let value): try value.encode(to: encoder)
        case .error(let error): try error.encode(to: encoder)
        }
    }

    /// The value, or nil for an error.
    public var value: Value? {
        if case .value(let value) = self { return value }
        return nil
    }

    /// The error, or nil for a value.
    public var error: ServerError? {
        if case .error(let error) = self { return error }
        return nil
    }
}

/// One result of a records endpoint: a record (or a delete's result, `deleted: true`), or an error
/// naming the record.
public typealias RecordResult = WireResult<Record>

/// One result of a zone endpoint: a zone, or an error naming it.
public typealias ZoneResult = WireResult<Zone>

/// One zone's result in `changes/zone`: a page of changes, or an error naming the zone.
public typealias ZoneChangesResult = WireResult<ZoneChanges>

private enum ProbeKeys: String, CodingKey {
    case serverErrorCode
}
