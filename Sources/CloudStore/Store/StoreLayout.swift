/// How a schema is laid out in SQLite: a table per entity named after it, with an `id TEXT PRIMARY
/// KEY`, a column per attribute and per to-one relationship (the related object's id, a deferred
/// foreign key), and a link table per many-to-many relationship pair. Every other SQL object the
/// store adds starts with `cloudstore_`.
///
/// ```sql
/// CREATE TABLE "Note" ("id" TEXT PRIMARY KEY NOT NULL, "title" TEXT DEFAULT '', …,
///     "folder" TEXT REFERENCES "Folder"("id") DEFERRABLE INITIALLY DEFERRED)
/// CREATE INDEX "cloudstore_fk_Note_folder" ON "Note"("folder")
/// CREATE TABLE "cloudstore_link_Note_tags" ("source" TEXT NOT NULL REFERENCES "Note"("id") …,
///     "target" TEXT NOT NULL REFERENCES "Tag"("id") …, PRIMARY KEY ("source", "target")) WITHOUT ROWID
/// ```
///
/// Columns are nullable: the store's API enforces required attributes, which keeps migrations to
/// `ALTER TABLE` where SQLite allows it. A one-to-one relationship has a column on both sides, kept
/// consistent by the store and guarded by a partial unique index.
struct StoreLayout: Sendable {
    let schema: Schema
    /// The files of external-storage values; nil for a layout only planned (migrations).
    var externalData: ExternalDataFiles?
    /// Where the properties of each model type read and write, worked out on first use.
    let models = ModelLayouts()
    /// One table per entity, in schema order.
    let tables: [EntityTable]
    let links: [LinkTable]
    private let tableIndex: [String: Int]
    /// For each entity: the relationships of other entities that point to it without an inverse
    /// (only non-mirrored schemas have them), which a delete must clear by itself.
    private let incomingWithoutInverse: [String: [(table: Int, relationship: RelationshipLayout)]]

    init(schema: Schema) {
        self.schema = schema
        var links: [String: LinkTable] = [:]
        var tables: [EntityTable] = []
        for (position, entity) in schema.entities.enumerated() {
            var relationships: [RelationshipLayout] = []
            var columns = entity.attributes.map { Column(attribute: $0) }
            for relationship in entity.relationships {
                let kind = schema.kind(of: relationship)
                let inverse = schema.inverse(of: relationship)
                var layout = RelationshipLayout(
                    relationship: relationship, kind: kind, inverse: inverse, column: nil, link: nil)
                switch kind {
                case .oneToOne, .manyToOne:
                    layout.column = columns.count
                    columns.append(Column(relationship: relationship, kind: kind))
                case .oneToMany:
                    break
                case .manyToMany:
                    let link = LinkTable(entity: entity.name, relationship: relationship, inverse: inverse)
                    links[link.name] = link
                    layout.link = link
                }
                relationships.append(layout)
            }
            tables.append(
                EntityTable(entity: entity, position: position, columns: columns, relationships: relationships))
        }
        self.tables = tables
        self.links = links.values.sorted { $0.name < $1.name }
        self.tableIndex = Dictionary(uniqueKeysWithValues: tables.enumerated().map { ($1.name, $0) })
        var incoming: [String: [(table: Int, relationship: RelationshipLayout)]] = [:]
        for table in tables {
            for relationship in table.relationships where relationship.inverse == nil {
                incoming[relationship.destination, default: []].append((table.position, relationship))
            }
        }
        self.incomingWithoutInverse = incoming
    }

    /// The table of an entity, or an error naming it.
    func table(_ entityName: String) throws -> EntityTable {
        guard let index = tableIndex[entityName] else {
            let known = tables.map(\.name).joined(separator: ", ")
            throw StoreError(
                .unknownEntity, "\"\(entityName)\" is not an entity of schema \(schema.name) (entities: \(known))")
        }
        return tables[index]
    }

    func table(at position: Int) -> EntityTable { tables[position] }

    /// The relationships without an inverse that point to objects of `entity`.
    func incomingWithoutInverse(to entity: String) -> [(table: EntityTable, relationship: RelationshipLayout)] {
        (incomingWithoutInverse[entity] ?? []).map { (tables[$0.table], $0.relationship) }
    }

    /// Every statement that creates the store's user tables and their indexes.
    var creationStatements: [String] {
        tables.flatMap { [$0.createTableSQL] + $0.indexStatements }
            + links.flatMap { [$0.createTableSQL] + $0.indexStatements }
    }
}

/// One column of an entity table (not counting `id`).
struct Column: Sendable {
    enum Source: Sendable {
        case attribute(AttributeDescription)
        case toOne(RelationshipDescription, Schema.RelationshipKind)
    }

    let name: String
    let type: AttributeType
    let source: Source
    let isOptional: Bool
    let defaultValue: AttributeValue?

    /// Whether the column is a `data` attribute with external storage.
    var isExternal: Bool {
        if case .attribute(let attribute) = source { return attribute.allowsExternalStorage }
        return false
    }

    init(attribute: AttributeDescription) {
        name = attribute.name
        type = attribute.type
        source = .attribute(attribute)
        isOptional = attribute.isOptional
        defaultValue = attribute.defaultValue
    }

    init(relationship: RelationshipDescription, kind: Schema.RelationshipKind) {
        name = relationship.name
        type = .uuid
        source = .toOne(relationship, kind)
        isOptional = true
        defaultValue = nil
    }

    var isRelationship: Bool {
        if case .toOne = source { return true }
        return false
    }

    var destination: String? {
        if case .toOne(let relationship, _) = source { return relationship.destination }
        return nil
    }

    /// The column's definition in `CREATE TABLE` or `ADD COLUMN`.
    var definitionSQL: String {
        var sql = "\(name.quotedIdentifier) \(type.columnType)"
        if let defaultValue, !defaultValue.isNull { sql += " DEFAULT \(defaultValue.sqlLiteral)" }
        if let destination {
            sql += " REFERENCES \(destination.quotedIdentifier)(\"id\") DEFERRABLE INITIALLY DEFERRED"
        }
        return sql
    }
}

/// A relationship as the store keeps it.
struct RelationshipLayout: Sendable {
    let relationship: RelationshipDescription
    let kind: Schema.RelationshipKind
    let inverse: RelationshipDescription?
    /// For to-one relationships: the column in this entity's table.
    var column: Int?
    /// For many-to-many relationships: the link table.
    var link: LinkTable?

    var name: String { relationship.name }
    var destination: String { relationship.destination }
}

/// The table of one entity. A class, so that the many places that look a table up share it
/// instead of copying its two dozen fields.
final class EntityTable: Sendable {
    let entity: EntityDescription
    /// The entity's position in the schema (a compact key for history).
    let position: Int
    let columns: [Column]
    let relationships: [RelationshipLayout]
    private let columnIndex: [String: Int]
    private let relationshipIndex: [String: Int]
    /// `"id", "title", …` in column order, for SELECT.
    let selectList: String
    let insertSQL: String
    let upsertSQL: String
    let selectByIDSQL: String
    /// Each column's value for a new object that does not set it.
    let defaultRow: [AttributeValue]
    /// Whether a row's writes must keep one-to-one partners consistent.
    let hasOneToOne: Bool
    // The hot loops read these instead of copying `Column` values (each holds a description
    // with many strings, and a copy retains and releases all of them).
    let columnNames: [String]
    let columnTypes: [AttributeType]
    /// The positions in `relationships` of the to-one relationships (those with a column).
    let toOneRelationships: [Int]
    /// The columns of attributes with external storage.
    let externalColumns: [Int]
    /// The columns of `data` attributes, external or not.
    let dataColumns: [Int]
    /// Whether each column is an end-to-end encrypted attribute, in column order.
    let encryptedColumns: [Bool]
    /// The table's name quoted for SQL, computed once (quoting searches the name each time).
    let quotedName: String
    /// Each column qualified by the table and quoted, `"Note"."title"`, in column order.
    let qualifiedColumnNames: [String]
    let existsSQL: String

    init(entity: EntityDescription, position: Int, columns: [Column], relationships: [RelationshipLayout]) {
        self.entity = entity
        self.position = position
        self.columns = columns
        self.relationships = relationships
        self.columnIndex = Dictionary(uniqueKeysWithValues: columns.enumerated().map { ($1.name, $0) })
        self.relationshipIndex = Dictionary(uniqueKeysWithValues: relationships.enumerated().map { ($1.name, $0) })
        let names = ["\"id\""] + columns.map(\.name.quotedIdentifier)
        let table = entity.name.quotedIdentifier
        quotedName = table
        qualifiedColumnNames = columns.map { "\(table).\($0.name.quotedIdentifier)" }
        existsSQL = "SELECT 1 FROM \(table) WHERE \"id\" = ?"
        selectList = names.map { "\(table).\($0)" }.joined(separator: ", ")
        let placeholders = Array(repeating: "?", count: names.count).joined(separator: ", ")
        insertSQL = "INSERT INTO \(table) (\(names.joined(separator: ", "))) VALUES (\(placeholders))"
        let updates = columns.map { "\($0.name.quotedIdentifier) = excluded.\($0.name.quotedIdentifier)" }
        upsertSQL =
            insertSQL
            + (updates.isEmpty
                ? " ON CONFLICT(\"id\") DO NOTHING" : " ON CONFLICT(\"id\") DO UPDATE SET \(updates.joined(separator: ", "))")
        selectByIDSQL = "SELECT \(selectList) FROM \(table) WHERE \"id\" = ?"
        defaultRow = columns.map { $0.defaultValue ?? .null }
        hasOneToOne = relationships.contains { $0.kind == .oneToOne }
        columnNames = columns.map(\.name)
        columnTypes = columns.map(\.type)
        toOneRelationships = relationships.indices.filter { relationships[$0].column != nil }
        externalColumns = columns.indices.filter { columns[$0].isExternal }
        dataColumns = columns.indices.filter { columns[$0].type == .data }
        encryptedColumns = columns.map { column in
            if case .attribute(let attribute) = column.source { return attribute.isEncrypted }
            return false
        }
    }

    var name: String { entity.name }

    func columnIndex(of name: String) -> Int? { columnIndex[name] }

    func relationship(named name: String) -> RelationshipLayout? {
        relationshipIndex[name].map { relationships[$0] }
    }

    /// The column of a property, or an error naming `entity.property`.
    func column(named name: String) throws -> (index: Int, column: Column) {
        guard let index = columnIndex[name] else {
            if name == "id" { throw StoreError(.unknownProperty, "\(self.name).id cannot be used here") }
            let known = (columns.map(\.name) + relationships.filter { $0.column == nil }.map(\.name)).joined(separator: ", ")
            throw StoreError(
                .unknownProperty,
                "\(self.name).\(name) is not an attribute or to-one relationship of \(self.name) (known: \(known))")
        }
        return (index, columns[index])
    }

    var createTableSQL: String {
        let definitions = ["\"id\" TEXT PRIMARY KEY NOT NULL"] + columns.map(\.definitionSQL)
        return "CREATE TABLE \(quotedName) (\(definitions.joined(separator: ", ")))"
    }

    /// The indexes the store keeps on this table, by name.
    var indexes: [(name: String, sql: String)] {
        var result: [(name: String, sql: String)] = []
        for relationship in relationships {
            guard let column = relationship.column else { continue }
            let columnName = columns[column].name
            if relationship.kind == .oneToOne {
                let name = "cloudstore_unique_\(self.name)_\(columnName)"
                result.append(
                    (name,
                     "CREATE UNIQUE INDEX \(name.quotedIdentifier) ON \(quotedName)(\(columnName.quotedIdentifier)) WHERE \(columnName.quotedIdentifier) IS NOT NULL"))
            } else if !entity.indexes.contains(where: { $0.first == columnName }) {
                let name = "cloudstore_fk_\(self.name)_\(columnName)"
                result.append((name, "CREATE INDEX \(name.quotedIdentifier) ON \(quotedName)(\(columnName.quotedIdentifier))"))
            }
        }
        for (kind, lists, unique) in [("index", entity.indexes, false), ("unique", entity.uniquenessConstraints, true)] {
            for list in lists {
                let name = "cloudstore_\(kind)_\(self.name)_" + list.joined(separator: "_")
                let columnList = list.map(\.quotedIdentifier).joined(separator: ", ")
                result.append(
                    (name, "CREATE \(unique ? "UNIQUE " : "")INDEX \(name.quotedIdentifier) ON \(quotedName)(\(columnList))"))
            }
        }
        return result
    }

    var indexStatements: [String] { indexes.map(\.sql) }
}

/// The link table of a many-to-many relationship pair. The side whose `Entity.relationship` sorts
/// first is the `source` column; the other side is `target`. A relationship that is its own inverse
/// stores each link in both directions.
struct LinkTable: Sendable, Hashable {
    let name: String
    let sourceEntity: String
    let sourceRelationship: String
    let targetEntity: String
    /// The inverse relationship's name, if the schema declares one.
    let targetRelationship: String?

    init(entity: String, relationship: RelationshipDescription, inverse: RelationshipDescription?) {
        let here = (entity: entity, relationship: relationship.name)
        let there = inverse.map { (entity: relationship.destination, relationship: $0.name) }
        let hereFirst = there.map { "\(here.entity).\(here.relationship)" <= "\($0.entity).\($0.relationship)" } ?? true
        if hereFirst {
            sourceEntity = here.entity
            sourceRelationship = here.relationship
            targetEntity = relationship.destination
            targetRelationship = there?.relationship
        } else {
            sourceEntity = relationship.destination
            sourceRelationship = there!.relationship
            targetEntity = entity
            targetRelationship = here.relationship
        }
        name = "cloudstore_link_\(sourceEntity)_\(sourceRelationship)"
    }

    /// Whether the relationship is its own inverse (`Person.friends` ↔ `Person.friends`).
    var isSymmetric: Bool { sourceEntity == targetEntity && sourceRelationship == targetRelationship }

    /// The column that holds the object on whose side `entity.relationship` is.
    func ownColumn(entity: String, relationship: String) -> String {
        entity == sourceEntity && relationship == sourceRelationship ? "source" : "target"
    }

    func otherColumn(entity: String, relationship: String) -> String {
        ownColumn(entity: entity, relationship: relationship) == "source" ? "target" : "source"
    }

    var createTableSQL: String {
        """
        CREATE TABLE \(name.quotedIdentifier) (\
        "source" TEXT NOT NULL REFERENCES \(sourceEntity.quotedIdentifier)("id") ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED, \
        "target" TEXT NOT NULL REFERENCES \(targetEntity.quotedIdentifier)("id") ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED, \
        PRIMARY KEY ("source", "target")) WITHOUT ROWID
        """
    }

    var indexes: [(name: String, sql: String)] {
        let index = "\(name)_target"
        return [(index, "CREATE INDEX \(index.quotedIdentifier) ON \(name.quotedIdentifier)(\"target\", \"source\")")]
    }

    var indexStatements: [String] { indexes.map(\.sql) }
}
