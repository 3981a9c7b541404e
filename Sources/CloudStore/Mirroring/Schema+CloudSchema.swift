import CloudStoreSync
import Foundation

extension Schema {
    /// The record types of the mirrored entities, as the server's schema endpoints take them: a field
    /// per attribute and to-one relationship, and the link record type for many-to-many relationships.
    public var cloudSchema: CloudSchema {
        var recordTypes = mirroredEntities.map { entity in
            CloudSchema.RecordType(
                name: entity.name,
                fields: entity.attributes.map { CloudSchema.Field(name: $0.name, type: $0.fieldType, queryable: true) }
                    + entity.toOneRelationships.map { CloudSchema.Field(name: $0.name, type: .reference, queryable: true) }
                    + [CloudSchema.Field(name: EditTimes.field, type: .string, queryable: false)])
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
