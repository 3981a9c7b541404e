/// What a migration from one schema version to another does, decided from the two schemas alone
/// (the store keeps the schema it was last opened with).
struct MigrationWork {
    struct Change {
        var description: String
        var statements: [String]
    }

    var schemaName: String
    var fromVersion: Int
    var toVersion: Int
    /// Renamed entities, attributes and relationships, then added ones: before the steps.
    var lightweight: [Change] = []
    /// The explicit steps, in order.
    var steps: [MigrationStep] = []
    /// Entities whose tables are rebuilt after the steps, to drop removed columns or change types.
    var rebuilds: [String] = []
    /// `data` attributes whose external storage was turned on (true) or off (false): their bytes move
    /// between rows and files after the rebuilds.
    var storageMoves: [(entity: String, column: String, toFiles: Bool)] = []
    /// Removed entities and many-to-many relationships, dropped after the steps.
    var drops: [Change] = []
    /// Required columns without a default that existing rows may leave empty: checked at the end.
    var requiredColumns: [(entity: String, column: String)] = []
    /// Changes that lose data: refused unless explicit steps handle the migration.
    var destructive: [String] = []
}

/// Computes the lightweight changes between two schemas: entities, attributes and relationships
/// matched by name or `renamedFrom`; new ones added; removed or retyped ones marked destructive
/// when their entity is mirrored (a migration that has explicit steps may do them).
struct MigrationPlanner {
    let old: Schema
    let new: Schema
    let steps: [MigrationStep]

    init(from old: Schema, to new: Schema, steps: [MigrationStep]) {
        self.old = old
        self.new = new
        self.steps = steps
    }

    func plan() throws -> MigrationWork {
        let oldLayout = StoreLayout(schema: old)
        let newLayout = StoreLayout(schema: new)
        var work = MigrationWork(schemaName: new.name, fromVersion: old.version, toVersion: new.version, steps: steps)
        var matchedEntities: Set<String> = []
        var renames: [MigrationWork.Change] = []
        var additions: [MigrationWork.Change] = []

        for table in newLayout.tables {
            let entity = table.entity
            guard let oldName = oldEntityName(entity.name), let oldTable = try? oldLayout.table(oldName) else {
                additions.append(.init(description: "add entity \(entity.name)", statements: [table.createTableSQL]))
                continue
            }
            matchedEntities.insert(oldName)
            if oldName != entity.name {
                renames.append(
                    .init(
                        description: "rename entity \(oldName) to \(entity.name)",
                        statements: ["ALTER TABLE \(oldName.quotedIdentifier) RENAME TO \(table.quotedName)"]))
            }
            var needsRebuild = false
            var matchedColumns: Set<String> = []
            for column in table.columns {
                let previous = column.renamedFrom.flatMap { oldTable.columnIndex(of: $0) } ?? oldTable.columnIndex(of: column.name)
                guard let previous else {
                    additions.append(
                        .init(
                            description: "add \(entity.name).\(column.name)",
                            statements: ["ALTER TABLE \(table.quotedName) ADD COLUMN \(column.definitionSQL)"]))
                    if !column.isOptional && column.defaultValue == nil { work.requiredColumns.append((entity.name, column.name)) }
                    continue
                }
                let oldColumn = oldTable.columns[previous]
                matchedColumns.insert(oldColumn.name)
                if oldColumn.name != column.name {
                    renames.append(
                        .init(
                            description: "rename \(entity.name).\(oldColumn.name) to \(column.name)",
                            statements: [
                                "ALTER TABLE \(table.quotedName) RENAME COLUMN \(oldColumn.name.quotedIdentifier) TO \(column.name.quotedIdentifier)"
                            ]))
                }
                let oldDestination = oldColumn.destination.flatMap(newEntityName)
                if oldColumn.type != column.type || oldColumn.isRelationship != column.isRelationship
                    || oldDestination != column.destination
                {
                    needsRebuild = true
                    if entity.isMirrored {
                        work.destructive.append(
                            "\(entity.name).\(column.name) changes from \(oldColumn.kindDescription) to \(column.kindDescription)")
                    }
                } else if oldColumn.defaultValue != column.defaultValue {
                    needsRebuild = true
                }
                if oldColumn.type == .data, column.type == .data, oldColumn.isExternal != column.isExternal {
                    work.storageMoves.append((entity.name, column.name, column.isExternal))
                }
                if oldColumn.isOptional && !column.isOptional {
                    if let value = column.defaultValue {
                        additions.append(
                            .init(
                                description: "fill \(entity.name).\(column.name) with its default",
                                statements: [
                                    "UPDATE \(table.quotedName) SET \(column.name.quotedIdentifier) = \(value.sqlLiteral) WHERE \(column.name.quotedIdentifier) IS NULL"
                                ]))
                    } else {
                        work.requiredColumns.append((entity.name, column.name))
                    }
                }
            }
            for oldColumn in oldTable.columns where !matchedColumns.contains(oldColumn.name) {
                needsRebuild = true
                if entity.isMirrored {
                    work.destructive.append("\(entity.name).\(oldColumn.name) is removed (its values would be lost)")
                }
            }
            if needsRebuild { work.rebuilds.append(entity.name) }
        }
        for oldTable in oldLayout.tables where !matchedEntities.contains(oldTable.name) {
            work.drops.append(
                .init(description: "remove entity \(oldTable.name)", statements: ["DROP TABLE \(oldTable.quotedName)"]))
            if oldTable.entity.isMirrored {
                work.destructive.append("entity \(oldTable.name) is removed (its objects would be lost)")
            }
        }

        var matchedLinks: Set<String> = []
        for link in newLayout.links {
            let source = oldRelationshipName(entity: link.sourceEntity, relationship: link.sourceRelationship)
            let oldLink = oldLayout.links.first { candidate in
                (candidate.sourceEntity == source.entity && candidate.sourceRelationship == source.relationship)
                    || (candidate.targetEntity == source.entity && candidate.targetRelationship == source.relationship)
            }
            guard let oldLink else {
                additions.append(
                    .init(
                        description: "add relationship \(link.sourceEntity).\(link.sourceRelationship)",
                        statements: [link.createTableSQL]))
                continue
            }
            matchedLinks.insert(oldLink.name)
            let flipped = !(oldLink.sourceEntity == source.entity && oldLink.sourceRelationship == source.relationship)
            if flipped {
                let temporary = "cloudstore_rebuild_link"
                renames.append(
                    .init(
                        description: "re-orient the links of \(link.sourceEntity).\(link.sourceRelationship)",
                        statements: [
                            link.createTableSQL.replacingOccurrences(
                                of: "CREATE TABLE \(link.name.quotedIdentifier)", with: "CREATE TABLE \(temporary.quotedIdentifier)"),
                            "INSERT INTO \(temporary.quotedIdentifier) (\"source\", \"target\") SELECT \"target\", \"source\" FROM \(oldLink.name.quotedIdentifier)",
                            "DROP TABLE \(oldLink.name.quotedIdentifier)",
                            "ALTER TABLE \(temporary.quotedIdentifier) RENAME TO \(link.name.quotedIdentifier)",
                        ]))
            } else if oldLink.name != link.name {
                renames.append(
                    .init(
                        description: "rename relationship \(oldLink.sourceEntity).\(oldLink.sourceRelationship) to \(link.sourceEntity).\(link.sourceRelationship)",
                        statements: ["ALTER TABLE \(oldLink.name.quotedIdentifier) RENAME TO \(link.name.quotedIdentifier)"]))
            }
        }
        for oldLink in oldLayout.links where !matchedLinks.contains(oldLink.name) {
            work.drops.append(
                .init(
                    description: "remove relationship \(oldLink.sourceEntity).\(oldLink.sourceRelationship)",
                    statements: ["DROP TABLE \(oldLink.name.quotedIdentifier)"]))
            let mirrored = old.entity(named: oldLink.sourceEntity)?.isMirrored ?? false
            if mirrored {
                work.destructive.append(
                    "relationship \(oldLink.sourceEntity).\(oldLink.sourceRelationship) is removed (its links would be lost)")
            }
        }
        work.lightweight = renames + additions

        if !work.destructive.isEmpty && steps.isEmpty {
            throw StoreError(
                .destructiveMigration,
                "migrating schema \(new.name) from version \(old.version) to \(new.version) would lose data: "
                    + work.destructive.joined(separator: "; ")
                    + ". Keep them (mark removed things optional and stop using them), or add a migration step for version \(new.version) (Migrations/\(new.name)/\(new.version)-<name>.sql) that moves the data: a migration with explicit steps applies these changes after its steps.")
        }
        return work
    }

    /// The old name of a new entity: its `renamedFrom` if the old schema has it, else its name if
    /// the old schema has that.
    private func oldEntityName(_ name: String) -> String? {
        guard let entity = new.entity(named: name) else { return nil }
        if let renamed = entity.renamedFrom, old.entity(named: renamed) != nil { return renamed }
        return old.entity(named: name) != nil ? name : nil
    }

    /// The new name of an old entity.
    private func newEntityName(_ oldName: String) -> String? {
        new.entities.first { oldEntityName($0.name) == oldName }?.name
    }

    /// The old names of a new relationship.
    private func oldRelationshipName(entity: String, relationship: String) -> (entity: String, relationship: String) {
        let oldEntity = oldEntityName(entity) ?? entity
        let description = new.entity(named: entity)?.relationship(named: relationship)
        if let renamed = description?.renamedFrom, old.entity(named: oldEntity)?.relationship(named: renamed) != nil {
            return (oldEntity, renamed)
        }
        return (oldEntity, relationship)
    }
}

extension Column {
    /// The name this column had in the previous schema version, if it was renamed.
    var renamedFrom: String? {
        switch source {
        case .attribute(let attribute): attribute.renamedFrom
        case .toOne(let relationship, _): relationship.renamedFrom
        }
    }

    var kindDescription: String {
        if let destination { return "a to-one relationship to \(destination)" }
        return "\(article(type.rawValue)) \(type.rawValue)"
    }
}
