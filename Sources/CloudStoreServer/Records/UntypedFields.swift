import CloudStoreWire
import Foundation
import Synchronization

/// Which fields of a `records/modify` request were sent without a `type`, as clients of Apple's
/// service send scalars (CloudKit's reference makes `type` optional on save).
///
/// The wire decoder gives such a value the type its JSON suggests (a number is `INT64`, a string
/// `STRING`); where the schema declares another type the value is typed by the schema instead
/// (``SchemaRules/retype(_:as:)``). Whether a value came without a type matters only then, which is
/// rare, so the request's bytes are read for it the first time it is asked, and once.
final class UntypedFields: Sendable {
    private let body: [UInt8]
    private let names: Mutex<[String: Set<String>]?> = Mutex(nil)

    init(body: [UInt8]) {
        self.body = body
    }

    /// Whether the request sent `field` of record `recordName` without a `type`.
    func contains(record recordName: String, field: String) -> Bool {
        names.withLock { names in
            if names == nil { names = Self.parse(body) }
            return names?[recordName]?.contains(field) ?? false
        }
    }

    /// The untyped fields of each record of a request body; empty when the body is not a
    /// `records/modify` request (it decoded before this is asked, so that does not happen).
    static func parse(_ body: [UInt8]) -> [String: Set<String>] {
        guard let request = try? JSONDecoder().decode(Probe.self, from: Data(body)) else { return [:] }
        var names: [String: Set<String>] = [:]
        for operation in request.operations {
            for (name, field) in operation.record.fields ?? [:] where field.type == nil {
                names[operation.record.recordName, default: []].insert(name)
            }
        }
        return names
    }

    /// The part of a `records/modify` request that says which values have a type.
    private struct Probe: Decodable {
        struct Operation: Decodable {
            var record: Record
        }
        struct Record: Decodable {
            var recordName: String
            var fields: [String: Field]?
        }
        struct Field: Decodable {
            var type: String?
        }
        var operations: [Operation]
    }
}
