import Foundation
import Synchronization

/// Where each stored property of a model type lives in its entity's table: a column (attributes,
/// to-one relationships) or a to-many relationship. Worked out once per model type and store, and
/// checked then: a property whose type, optionality or destination does not match the store's
/// schema, or an attribute of the schema the type does not declare, is a ``SchemaError`` naming
/// each of them. A class: a fetch, a write and a query compiler share one, without copying the
/// table it holds.
final class ModelLayout: Sendable {
    enum Slot: Sendable {
        /// The object's id, the row's key.
        case id
        case column(Int)
        case toMany(String)
    }

    let table: EntityTable
    /// Per property, in the model's order.
    let slots: [Slot]
    /// Per property: the column in the statement of a fetch (`id` is column 0), or -1.
    let statementColumns: [Int32]
    let modelTable: ModelTable
    /// Per property: its term in a predicate (`$0.title`), made once rather than per query.
    /// Unsafe: immutable, and a property's term holds no Swift value or closure (those make
    /// terms non-`Sendable`).
    nonisolated(unsafe) let propertyTerms: [SQLTerm]

    init<Model: PersistentModel>(_ type: Model.Type, table: EntityTable, schema: Schema) throws {
        self.table = table
        let model = ModelTable.of(type)
        modelTable = model
        var problems: [SchemaProblem] = []
        func problem(_ property: String, _ message: String) {
            problems.append(SchemaProblem(entity: table.name, property: property, message))
        }
        var slots: [Slot] = []
        for name in model.names {
            if name == "id" {
                slots.append(.id)
            } else if let declared = model.entity.attribute(named: name) {
                guard let index = table.columnIndex(of: name), case .attribute(let stored) = table.columns[index].source else {
                    problem(name, "\(Model.self) declares it, but it is not an attribute of \(table.name) in schema \(schema.name)")
                    slots.append(.column(-1))
                    continue
                }
                if declared.type != stored.type {
                    problem(
                        name,
                        "the Swift property is stored as \(article(declared.type.rawValue)) \(declared.type.rawValue) but the attribute is \(article(stored.type.rawValue)) \(stored.type.rawValue); declare it as \(AttributeConversion.suggestedSwiftType(for: stored.type))")
                } else if declared.isOptional && !stored.isOptional {
                    problem(name, "the Swift property is optional but the attribute is not; declare it without `?`")
                } else if !declared.isOptional && stored.isOptional {
                    problem(
                        name,
                        "the attribute is optional but the Swift property is not, so a missing value could not be read; declare it with `?`")
                }
                slots.append(.column(index))
            } else if let declared = model.entity.relationship(named: name) {
                guard let stored = table.relationship(named: name) else {
                    problem(name, "\(Model.self) declares it, but it is not a relationship of \(table.name) in schema \(schema.name)")
                    slots.append(.column(-1))
                    continue
                }
                if declared.isToMany != stored.relationship.isToMany || declared.destination != stored.destination {
                    let shape = stored.relationship.isToMany ? "[\(stored.destination).ID]" : "\(stored.destination).ID?"
                    problem(name, "the relationship leads to \(stored.relationship.isToMany ? "many" : "one") \(stored.destination); declare it as \(shape)")
                }
                slots.append(stored.column.map(Slot.column) ?? .toMany(name))
            } else {
                slots.append(.column(-1))
            }
        }
        let declared = Set(model.names)
        for column in table.columns where !column.isRelationship && !declared.contains(column.name) {
            problem(column.name, "the attribute is not a property of the Swift type \(Model.self); declare it")
        }
        if Model.entityName != table.name {
            problems.append(SchemaProblem(entity: Model.entityName, "the Swift type \(Model.self) names entity \(Model.entityName), not \(table.name)"))
        }
        if !problems.isEmpty { throw SchemaError(schema: schema.name, problems: problems) }
        self.slots = slots
        statementColumns = slots.map { slot in
            switch slot {
            case .id: 0
            case .column(let index): Int32(index + 1)
            case .toMany: -1
            }
        }
        propertyTerms = zip(slots, zip(model.names, model.isEnum)).map { slot, property in
            let (name, isEnum) = property
            let spelling = Spelling.text("$0.\(name)")
            switch slot {
            case .id:
                return SQLTerm(.column(.uuid, isEnum: false, isExternal: false), "\(table.quotedName).\"id\"", spelling: spelling)
            case .column(let column):
                let stored = table.columns[column]
                return SQLTerm(
                    .column(stored.type, isEnum: isEnum, isExternal: stored.isExternal),
                    table.qualifiedColumnNames[column], isOptional: stored.isOptional, spelling: spelling)
            case .toMany(let name):
                return SQLTerm(.toMany(table.relationship(named: name)!), "", spelling: spelling)
            }
        }
    }
}

/// The model layouts of one store, by model type.
final class ModelLayouts: Sendable {
    private let layouts = Mutex<[ObjectIdentifier: Result<ModelLayout, SchemaError>]>([:])

    func layout<Model: PersistentModel>(_ type: Model.Type, in layout: StoreLayout) throws -> ModelLayout {
        let key = ObjectIdentifier(type)
        if let cached = layouts.withLock({ $0[key] }) { return try cached.get() }
        let result: Result<ModelLayout, SchemaError>
        do {
            let table = try layout.table(Model.entityName)
            result = .success(try ModelLayout(type, table: table, schema: layout.schema))
        } catch let error as SchemaError {
            result = .failure(error)
        } catch {
            result = .failure(
                SchemaError(
                    schema: layout.schema.name,
                    problems: [SchemaProblem(entity: Model.entityName, "the Swift type \(Model.self) names entity \"\(Model.entityName)\", which is not in the schema; add the type to the schema's entities")]))
        }
        layouts.withLock { $0[key] = result }
        return try result.get()
    }
}

extension Schema {
    /// Checks a model type against its entity in this schema: every property matches its attribute
    /// or relationship, and every attribute is declared. Throws a ``SchemaError`` listing each
    /// mismatch. (A schema built from the model types always matches them; this is for a schema
    /// loaded from a file.)
    public func check<Model: PersistentModel>(_ type: Model.Type) throws {
        let layout = StoreLayout(schema: self)
        guard let table = try? layout.table(Model.entityName) else {
            throw SchemaError(
                schema: name,
                problems: [SchemaProblem(entity: Model.entityName, "the Swift type \(Model.self) names entity \"\(Model.entityName)\", which is not in the schema; add the type to the schema's entities")])
        }
        _ = try ModelLayout(type, table: table, schema: self)
    }
}
