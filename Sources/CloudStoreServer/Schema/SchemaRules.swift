import CloudStoreWire
import Foundation

/// How records and schema changes meet the schema of an environment.
///
/// In `development` the schema follows the records: saving a new record type or field adds it,
/// with the type of the value (as CloudKit's just-in-time schema does). In `production` records
/// must match the schema, and the schema only grows. Uniqueness constraints come only from
/// `schema/modify` (``uniquenessProblem(_:)``): records never add or remove one.
enum SchemaRules {
    /// Admits a record's fields: in development extends `schema` with what is new; answers the
    /// reason the record does not fit, or nil. A record type it extends keeps its uniqueness
    /// constraints; one it adds has none.
    static func admit(
        recordType: String, fields: [String: FieldValue], into schema: inout CloudSchema,
        environment: CloudEnvironment
    ) -> String? {
        let index = schema.recordTypes.firstIndex { $0.name == recordType }
        if index == nil, environment == .production {
            return "record type \(recordType) is not in the production schema: add it with schema/modify"
        }
        if let index, fitsUnchanged(fields, schema.recordTypes[index]) { return nil }
        var type = index.map { schema.recordTypes[$0] } ?? CloudSchema.RecordType(name: recordType, fields: [])
        var changed = index == nil
        // Sorted: new fields join the schema in name order, and the first misfit by name is the one answered.
        for (name, value) in fields.sorted(by: { $0.key < $1.key }) {
            guard let valueType = value.type else { continue }
            guard let fieldIndex = type.fields.firstIndex(where: { $0.name == name }) else {
                if environment == .production {
                    return "field \(recordType).\(name) is not in the production schema: add it with schema/modify"
                }
                type.fields.append(CloudSchema.Field(name: name, type: valueType, queryable: true))
                changed = true
                continue
            }
            let declared = type.fields[fieldIndex].type
            guard declared.accepts(valueType) else {
                return "field \(recordType).\(name) is \(declared.rawValue) in the schema, not \(valueType.rawValue)"
            }
            if declared == .unknownList, valueType != .unknownList, environment == .development {
                type.fields[fieldIndex].type = valueType
                changed = true
            }
        }
        if changed {
            if let index { schema.recordTypes[index] = type } else { schema.recordTypes.append(type) }
        }
        return nil
    }

    /// Whether every field is in `type` with a type that accepts its value and that stays as it
    /// is: the common case, decided without sorting the fields.
    private static func fitsUnchanged(_ fields: [String: FieldValue], _ type: CloudSchema.RecordType) -> Bool {
        fields.allSatisfy { name, value in
            guard let valueType = value.type else { return true }
            guard let declared = type.fields.first(where: { $0.name == name })?.type else { return false }
            return declared.accepts(valueType) && (declared != .unknownList || valueType == .unknownList)
        }
    }

    /// The fields of a record with each value sent without a `type` (`isUntyped` of its name)
    /// typed as the schema declares its field (``retype(_:as:)``); a value that cannot be that type
    /// is a ``Misfit`` naming the first such field by name. A value sent with a type is left as it
    /// is, for ``admit(recordType:fields:into:environment:)`` to judge; `isUntyped` is asked only
    /// of fields whose value does not fit.
    static func typed(
        _ fields: [String: FieldValue], recordType: String, schema: CloudSchema, isUntyped: (String) -> Bool
    ) -> Result<[String: FieldValue], Misfit> {
        guard let declared = schema.recordTypes.first(where: { $0.name == recordType }) else { return .success(fields) }
        let misfits = fields.compactMap { name, value -> (name: String, type: FieldType)? in
            guard let valueType = value.type, let type = declared.field(named: name)?.type, !type.accepts(valueType) else {
                return nil
            }
            return (name, type)
        }
        guard !misfits.isEmpty else { return .success(fields) }
        var typed = fields
        for misfit in misfits.sorted(by: { $0.name < $1.name }) where isUntyped(misfit.name) {
            guard let value = typed[misfit.name].flatMap({ retype($0, as: misfit.type) }) else {
                return .failure(
                    Misfit(
                        reason:
                            "field \(recordType).\(misfit.name) is \(misfit.type.rawValue) in the schema and its value, sent without a type, is not one: send a \(misfit.type.rawValue) value (\(example(of: misfit.type)))"
                    ))
            }
            typed[misfit.name] = value
        }
        return .success(typed)
    }

    /// Why a value sent without a type cannot be the type its field is declared with.
    struct Misfit: Error, Equatable {
        var reason: String
    }

    /// How a value of `type` looks on the wire, for an error that asks for one.
    static func example(of type: FieldType) -> String {
        switch type {
        case .string: "text"
        case .int64: "an integer"
        case .double: "a number"
        case .timestamp: "integer milliseconds since 1970"
        case .bytes: "base64 text"
        case .reference: #"{"recordName": …}"#
        case .location: #"{"latitude": …, "longitude": …}"#
        case .asset: "the dictionary an asset upload answers"
        case .list(let element): "an array of \(example(of: element))"
        case .unknownList: "an array"
        case .encryptedBytes: "base64 ciphertext"
        }
    }

    /// The value a field sent without a `type` has as the type the schema declares, or nil when
    /// it cannot be one. The wire decoder typed it by its JSON (``FieldValue`` infers `INT64` for
    /// an integer, `DOUBLE` for a fraction, `STRING` for text); a client that leaves the type out
    /// means the schema's: an integer or a fraction is a `TIMESTAMP` in milliseconds (rounded) or a
    /// `DOUBLE`, text is `BYTES` (or `ENCRYPTED_BYTES`) when it is base64, and a list takes the element type the same way.
    /// Nothing else converts: text is never a number, a fraction never an `INT64`.
    static func retype(_ value: FieldValue, as declared: FieldType) -> FieldValue? {
        if let type = value.type, declared.accepts(type) { return value }
        switch (value, declared) {
        case (.int64(let milliseconds), .timestamp):
            guard Date.timestampRange.contains(milliseconds) else { return nil }
            return .timestamp(Date(millisecondsSince1970: milliseconds))
        case (.double(let milliseconds), .timestamp):
            let rounded = milliseconds.rounded()
            guard abs(rounded) <= 8.64e15 else { return nil }
            return .timestamp(Date(millisecondsSince1970: Int64(rounded)))
        case (.int64(let number), .double):
            return .double(Double(number))
        case (.string(let text), .bytes):
            return Data(base64Encoded: text).map(FieldValue.bytes)
        case (.string(let text), .encryptedBytes):
            return Data(base64Encoded: text).map(FieldValue.encryptedBytes)
        case (.list(let elements), .list(let element)):
            var typed: [FieldValue] = []
            typed.reserveCapacity(elements.count)
            for value in elements {
                guard let value = retype(value, as: element) else { return nil }
                typed.append(value)
            }
            return .list(typed)
        default:
            return nil
        }
    }

    /// What is wrong with the uniqueness constraints of a record type of a `schema/modify`
    /// request, naming the type, the field and the fix; nil when nothing. Each constraint names
    /// one or more fields the type declares, each once, of a type whose values compare exactly
    /// (``UniqueKey/constrainableTypes``), and no two constraints of the type are the same set.
    static func uniquenessProblem(_ type: CloudSchema.RecordType) -> String? {
        guard let constraints = type.uniquenessConstraints, !constraints.isEmpty else { return nil }
        if ShareMetadata.isShareType(type.name) {
            return "record type \(type.name) cannot have uniqueness constraints: leave uniquenessConstraints out of it"
        }
        let allowed = UniqueKey.constrainableTypes.map(\.rawValue).joined(separator: ", ")
        var seen = Set<[String]>()
        for constraint in constraints {
            let shown = "[\(constraint.prefix(16).map { $0.prefix(64) }.joined(separator: ", "))]"
            guard !constraint.isEmpty else {
                return "record type \(type.name) has an empty uniqueness constraint: list one or more of its fields in it, or leave it out"
            }
            var fieldNames = Set<String>()
            for name in constraint {
                guard fieldNames.insert(name).inserted else {
                    return "uniqueness constraint \(shown) of record type \(type.name) names field \(name.prefix(64)) twice: name each field once"
                }
                guard let field = type.field(named: name) else {
                    return "uniqueness constraint \(shown) of record type \(type.name) names field \(name.prefix(64)), which \(type.name) does not declare: declare it in the type's fields in the same request, or correct the name"
                }
                guard UniqueKey.constrainableTypes.contains(field.type) else {
                    return "uniqueness constraint \(shown) of record type \(type.name) names field \(type.name).\(name), which is \(field.type.rawValue): a constraint may name fields of type \(allowed) only; remove the field from the constraint"
                }
            }
            guard seen.insert(UniqueKey.canonical(constraint)).inserted else {
                return "uniqueness constraint \(shown) of record type \(type.name) is declared twice (the order of its fields does not matter): declare it once"
            }
        }
        return nil
    }

    /// The schema after a `schema/modify`, or nil when nothing changes. Record types the request
    /// names are replaced by the request's version (their uniqueness constraints too: none when
    /// the request has none); others stay. In production a field may not be removed or retyped
    /// (an `UNKNOWN_LIST` may become a concrete list).
    static func merge(
        _ request: CloudSchema, into current: CloudSchema, environment: CloudEnvironment
    ) throws(APIError) -> CloudSchema? {
        var request = request
        for index in request.recordTypes.indices where request.recordTypes[index].uniquenessConstraints?.isEmpty == true {
            request.recordTypes[index].uniquenessConstraints = nil
        }
        var names = Set<String>()
        for type in request.recordTypes {
            if let problem = RecordRules.identifierProblem(type.name, what: "record type") {
                throw APIError(.badRequest, problem)
            }
            guard names.insert(type.name).inserted else {
                throw APIError(.badRequest, "record type \(type.name) appears twice")
            }
            var fieldNames = Set<String>()
            for field in type.fields {
                if let problem = RecordRules.identifierProblem(field.name, what: "field name") {
                    throw APIError(.badRequest, "\(type.name): \(problem)")
                }
                guard fieldNames.insert(field.name).inserted else {
                    throw APIError(.badRequest, "field \(type.name).\(field.name) appears twice")
                }
            }
            if let problem = uniquenessProblem(type) {
                throw APIError(.badRequest, problem)
            }
        }
        var merged = current
        for type in request.recordTypes {
            guard let index = merged.recordTypes.firstIndex(where: { $0.name == type.name }) else {
                merged.recordTypes.append(type)
                continue
            }
            if environment == .production {
                for existing in merged.recordTypes[index].fields {
                    guard let field = type.field(named: existing.name) else {
                        throw APIError(
                            .badRequest,
                            "field \(type.name).\(existing.name) would be removed: a production schema only grows")
                    }
                    let refines = existing.type == .unknownList && field.type.isList
                    guard field.type == existing.type || refines else {
                        throw APIError(
                            .badRequest,
                            "field \(type.name).\(existing.name) would change from \(existing.type.rawValue) to \(field.type.rawValue): a production schema only grows")
                    }
                }
            }
            merged.recordTypes[index] = type
        }
        merged.version = current.version
        guard merged != current else { return nil }
        merged.version = (current.version ?? 0) + 1
        return merged
    }
}
