import CloudStoreSync
import Foundation

extension Schema {
    /// The record types of the mirrored entities, as the server's schema endpoints take them: a field
    /// per attribute and to-one relationship, the entity's uniqueness constraints, and the link
    /// record type for many-to-many relationships.
    public var cloudSchema: CloudSchema {
        var recordTypes = mirroredEntities.map { entity in
            CloudSchema.RecordType(
                name: entity.name,
                fields: entity.attributes.map { CloudSchema.Field(name: $0.name, type: $0.fieldType, queryable: !$0.isEncrypted) }
                    + entity.toOneRelationships.map { CloudSchema.Field(name: $0.name, type: .reference, queryable: true) }
                    + [CloudSchema.Field(name: EditTimes.field, type: .string, queryable: false)],
                uniquenessConstraints: entity.uniquenessConstraints.isEmpty ? nil : entity.uniquenessConstraints)
        }
        if mirroredEntities.contains(where: { !LinkRecords.sides(of: $0, in: self).isEmpty }) {
            recordTypes.append(
                CloudSchema.RecordType(
                    name: LinkRecords.recordType,
                    fields: [
                        CloudSchema.Field(name: "relationship", type: .string, queryable: true),
                        CloudSchema.Field(name: "source", type: .reference, queryable: true),
                        CloudSchema.Field(name: "target", type: .reference, queryable: true),
                    ]))
        }
        return CloudSchema(recordTypes: recordTypes)
    }
}

extension CloudSchema {
    /// The `schema/modify` request that gives this schema (the server's) the uniqueness
    /// constraints `ours` declares, or nil when it has them all. Each record type it names keeps
    /// every field and constraint the server has (another app version's), with ours added: a
    /// request replaces the record types it names.
    func uniquenessDeclaration(for ours: CloudSchema) -> CloudSchema? {
        var request: [CloudSchema.RecordType] = []
        for type in ours.recordTypes {
            let existing = recordType(named: type.name)
            let missing = type.uniquenessConstraints(missingFrom: existing)
            guard !missing.isEmpty else { continue }
            var declared = existing ?? CloudSchema.RecordType(name: type.name, fields: [])
            for field in type.fields where declared.field(named: field.name) == nil {
                declared.fields.append(field)
            }
            declared.uniquenessConstraints = (existing?.uniquenessConstraints ?? []) + missing
            request.append(declared)
        }
        return request.isEmpty ? nil : CloudSchema(recordTypes: request)
    }
}

extension AttributeType {
    /// The record field type an attribute travels as.
    public var fieldType: FieldType {
        switch self {
        case .string, .uuid, .url, .decimal, .json: .string
        case .int64, .bool: .int64
        case .double: .double
        case .date: .timestamp
        case .data: .bytes
        }
    }
}
