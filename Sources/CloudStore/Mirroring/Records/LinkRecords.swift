import Foundation

/// Many-to-many relationships travel as link records, one per pair of related objects (as Core
/// Data + CloudKit's `CDMR` records), so two devices adding different members both keep theirs.
///
/// A link belongs to the relationship's canonical side, the one whose `Entity.relationship` name
/// sorts first, and is named `<Entity>.<relationship>.<source id>.<target id>`:
///
/// ```json
/// {"recordType": "CloudStoreLink", "recordName": "Note.tags.5A8F….9C1E…",
///  "fields": {"relationship": {"value": "Note.tags", "type": "STRING"},
///             "source": {"value": {"recordName": "5A8F…", "action": "NONE"}, "type": "REFERENCE"},
///             "target": {"value": {"recordName": "9C1E…", "action": "NONE"}, "type": "REFERENCE"}}}
/// ```
enum LinkRecords {
    /// The record type of link records; entity names cannot start with "CloudStore".
    static let recordType = "CloudStoreLink"

    /// A many-to-many relationship, seen from one of its sides.
    struct Side: Hashable {
        /// `Entity.relationship` of the canonical side.
        var key: String
        /// Whether this side is the canonical one (its objects are the links' sources).
        var isCanonical: Bool
    }

    /// The link side of `entity.relationship`, or nil when it is not many-to-many.
    static func side(of entity: EntityDescription, _ relationship: RelationshipDescription, in schema: Schema) -> Side? {
        guard schema.kind(of: relationship) == .manyToMany, let inverse = schema.inverse(of: relationship) else {
            return nil
        }
        let this = "\(entity.name).\(relationship.name)"
        let other = "\(relationship.destination).\(inverse.name)"
        return this <= other ? Side(key: this, isCanonical: true) : Side(key: other, isCanonical: false)
    }

    /// The many-to-many relationships of an entity, with their link sides.
    static func sides(of entity: EntityDescription, in schema: Schema) -> [(RelationshipDescription, Side)] {
        entity.relationships.compactMap { relationship in
            side(of: entity, relationship, in: schema).map { (relationship, $0) }
        }
    }

    /// The link joining `object` to `member` through a relationship side.
    static func ends(_ side: Side, object: UUID, member: UUID) -> LinkEnds {
        side.isCanonical
            ? LinkEnds(relationship: side.key, source: object, target: member)
            : LinkEnds(relationship: side.key, source: member, target: object)
    }

    static func recordName(_ ends: LinkEnds) -> String {
        "\(ends.relationship).\(ends.source.uuidString).\(ends.target.uuidString)"
    }

    /// The link a record name names, if it is a link's.
    static func ends(recordName: String) -> LinkEnds? {
        let parts = recordName.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, let source = UUID(text: String(parts[2])),
            let target = UUID(text: String(parts[3]))
        else { return nil }
        return LinkEnds(relationship: "\(parts[0]).\(parts[1])", source: source, target: target)
    }

    static func record(_ ends: LinkEnds, in zoneID: ZoneID) -> Record {
        Record(
            recordType: recordType, recordID: RecordID(recordName: recordName(ends), zoneID: zoneID),
            fields: [
                "relationship": .string(ends.relationship),
                "source": .reference(Reference(recordName: ends.source.uuidString, zoneID: zoneID)),
                "target": .reference(Reference(recordName: ends.target.uuidString, zoneID: zoneID)),
            ])
    }

    /// The link a record describes; nil when it is malformed.
    static func ends(of record: Record) -> LinkEnds? {
        guard case .string(let relationship)? = record.fields["relationship"],
            case .reference(let source)? = record.fields["source"],
            case .reference(let target)? = record.fields["target"],
            let sourceID = UUID(text: source.recordName), let targetID = UUID(text: target.recordName)
        else { return ends(recordName: record.recordName) }
        return LinkEnds(relationship: relationship, source: sourceID, target: targetID)
    }

    /// The entity and relationship of the canonical side named by a link's `relationship`.
    static func canonical(_ key: String, in schema: Schema) -> (EntityDescription, RelationshipDescription)? {
        let parts = key.split(separator: ".")
        guard parts.count == 2, let entity = schema.entity(named: String(parts[0])),
            let relationship = entity.relationship(named: String(parts[1])),
            side(of: entity, relationship, in: schema)?.isCanonical == true
        else { return nil }
        return (entity, relationship)
    }
}

extension EntityDescription {
    /// The attributes and to-one relationships: the fields of the entity's records. Built on each
    /// call: code that asks once per record reads the schema's ``RecordKeys`` instead.
    var recordKeys: Set<String> {
        Set(attributes.map(\.name) + toOneRelationships.map(\.name))
    }
}

/// The ``EntityDescription/recordKeys`` of each entity of a schema, built once (a mirror builds
/// them when it is made; an acknowledgement, an import or a save asks for them once per record).
struct RecordKeys: Sendable {
    private let byEntity: [String: Set<String>]

    init(_ schema: Schema) {
        byEntity = Dictionary(schema.entities.map { ($0.name, $0.recordKeys) }) { first, _ in first }
    }

    /// The fields of `entity`'s records.
    func callAsFunction(_ entity: EntityDescription) -> Set<String> {
        byEntity[entity.name] ?? entity.recordKeys
    }
}
