import Foundation

/// An object read from a record: its snapshot, and the fields the schema does not know (written by
/// a newer version of the app), which are kept so they survive the next upload.
public struct RecordContent: Hashable, Sendable {
    /// The object's values, as the schema knows them.
    public var snapshot: EntitySnapshot
    /// Fields the schema does not declare, by name, as the record carries them.
    public var unknownFields: [String: FieldValue]

    /// The content of a record: a snapshot and the fields left over.
    public init(snapshot: EntitySnapshot, unknownFields: [String: FieldValue] = [:]) {
        self.snapshot = snapshot
        self.unknownFields = unknownFields
    }
}

extension Schema {
    /// The record of an object: record type = entity name, record name = the object's id, a field per
    /// attribute and per to-one relationship (a `REFERENCE` into the same zone).
    ///
    /// - Parameters:
    ///   - snapshot: the object's values, as ``Schema/snapshot(of:)`` makes them.
    ///   - zoneID: the zone the record lives in.
    ///   - keys: only these attributes and relationships (an update sends only what changed); all
    ///     when nil. A nil value becomes `{"value": null}`, which clears the field on the server.
    ///   - unknownFields: fields of a newer app version to carry along unchanged.
    ///
    /// ```swift
    /// let record = try schema.record(for: schema.snapshot(of: note), in: ZoneID(zoneName: "Notes"))
    /// ```
    public func record(
        for snapshot: EntitySnapshot, in zoneID: ZoneID, keys: Set<String>? = nil,
        unknownFields: [String: FieldValue] = [:]
    ) throws -> Record {
        guard let entity = entity(named: snapshot.entityName) else {
            throw EntityError(entity: snapshot.entityName, "the entity is not in schema \(name)")
        }
        var record = Record(recordType: entity.name, recordID: RecordID(recordName: snapshot.id.uuidString, zoneID: zoneID))
        if keys == nil {
            record.fields = unknownFields
        }
        for attribute in entity.attributes where keys?.contains(attribute.name) ?? true {
            guard let value = snapshot.values[attribute.name] else { continue }
            record.fields[attribute.name] = try Self.fieldValue(value, of: attribute, in: entity)
        }
        for relationship in entity.toOneRelationships where keys?.contains(relationship.name) ?? true {
            switch snapshot.values[relationship.name] {
            case .uuid(let target)?:
                record.fields[relationship.name] = .reference(Reference(recordName: target.uuidString, zoneID: zoneID))
            case .null?:
                record.fields[relationship.name] = .null
            case nil:
                continue
            case let other?:
                throw EntityError(entity: entity.name, property: relationship.name, "a to-one relationship holds a UUID, not \(other)")
            }
        }
        return record
    }

    /// The object a record describes. Fields the schema does not know are kept in
    /// ``RecordContent/unknownFields``; attributes the record does not carry get their default (or
    /// null). Throws an ``EntityError`` naming the field when a value does not fit its attribute.
    public func content(of record: Record) throws -> RecordContent {
        guard let recordType = record.recordType, let entity = entity(named: recordType) else {
            throw EntityError(
                entity: record.recordType ?? "(no record type)",
                "record \(record.recordName) has a record type that is not an entity of schema \(name)")
        }
        guard let id = UUID(text: record.recordName) else {
            throw EntityError(entity: entity.name, "record name \"\(record.recordName)\" is not a UUID, so it is not an object id")
        }
        var content = RecordContent(snapshot: EntitySnapshot(entityName: entity.name, id: id))
        for attribute in entity.attributes {
            guard let field = record.fields[attribute.name], !field.isNull else {
                content.snapshot.values[attribute.name] = attribute.isOptional ? .null : (attribute.defaultValue ?? .null)
                continue
            }
            content.snapshot.values[attribute.name] = try Self.attributeValue(field, of: attribute, in: entity)
        }
        for relationship in entity.toOneRelationships {
            switch record.fields[relationship.name] {
            case nil, .null?:
                content.snapshot.values[relationship.name] = .null
            case .reference(let reference)?:
                guard let target = UUID(text: reference.recordName) else {
                    throw EntityError(
                        entity: entity.name, property: relationship.name,
                        "the reference's record name \"\(reference.recordName)\" is not a UUID")
                }
                content.snapshot.values[relationship.name] = .uuid(target)
            case let other?:
                throw EntityError(
                    entity: entity.name, property: relationship.name,
                    "the record's field is \(other.typeName ?? "null") but a to-one relationship is a REFERENCE")
            }
        }
        let known = Set(entity.attributes.map(\.name) + entity.toOneRelationships.map(\.name))
        content.unknownFields = record.fields.filter { !known.contains($0.key) }
        return content
    }

    /// The record field of an attribute value.
    static func fieldValue(
        _ value: AttributeValue, of attribute: AttributeDescription, in entity: EntityDescription
    ) throws -> FieldValue {
        switch value {
        case .null: return .null
        case .string(let string): return .string(string)
        case .int64(let integer): return .int64(integer)
        case .double(let double):
            guard double.isFinite else {
                throw EntityError(entity: entity.name, property: attribute.name, "\(double) cannot be stored in a record")
            }
            return .double(double)
        case .bool(let bool): return .bool(bool)
        case .date(let date): return .timestamp(date)
        case .data(let data): return .bytes(data)
        case .externalData(let external): return .asset(Asset(fileChecksum: external.checksum, size: external.size))
        case .uuid(let uuid): return .string(uuid.uuidString)
        case .url(let url): return .string(url.absoluteString)
        case .decimal(let decimal): return .string(decimal.description)
        case .json(let text): return .string(text)
        }
    }

    /// The attribute value of a record field, for an attribute of a known type.
    static func attributeValue(
        _ field: FieldValue, of attribute: AttributeDescription, in entity: EntityDescription
    ) throws -> AttributeValue {
        let converted: AttributeValue? =
            switch (attribute.type, field) {
            case (.string, .string(let value)): .string(value)
            case (.int64, .int64(let value)): .int64(value)
            case (.double, .double(let value)): .double(value)
            case (.double, .int64(let value)): .double(Double(value))
            case (.bool, .int64(let value)): .bool(value != 0)
            case (.date, .timestamp(let value)): .date(value)
            case (.data, .bytes(let value)): .data(value)
            case (.data, .asset(let asset)):
                AssetChecksum.fileName(of: asset.fileChecksum) == nil
                    ? nil : .externalData(ExternalData(checksum: asset.fileChecksum, size: asset.size))
            case (.uuid, .string(let value)): UUID(text: value).map(AttributeValue.uuid)
            case (.url, .string(let value)): URL(string: value).map(AttributeValue.url)
            case (.decimal, .string(let value)):
                Decimal(string: value, locale: Locale(identifier: "en_US_POSIX")).map(AttributeValue.decimal)
            case (.json, .string(let value)):
                (try? JSONDecoder().decode(JSONValue.self, from: Data(value.utf8)))
                    .flatMap { try? AttributeValue.canonicalJSON($0) }.map(AttributeValue.json)
            default: nil
            }
        guard let converted else {
            throw EntityError(
                entity: entity.name, property: attribute.name,
                "the record's field \(field.typeName ?? "null") value does not fit a \(attribute.type.rawValue) attribute")
        }
        return converted
    }
}
