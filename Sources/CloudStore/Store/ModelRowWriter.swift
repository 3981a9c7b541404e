import Foundation

/// An object's row as the code `@Model` generates writes it: each stored property, by its
/// number, into its column, and the to-many relationships as the related objects' ids.
public struct ModelRowWriter {
    private let layout: ModelLayout
    /// The row in column order: the stored row (an update) or the defaults (an insert), with the
    /// written properties in place.
    private(set) var row: [AttributeValue]
    private(set) var toMany: [(String, [UUID])] = []

    init(layout: ModelLayout, base: [AttributeValue]) {
        self.layout = layout
        self.row = base
    }

    private mutating func set(_ value: AttributeValue, at property: Int) {
        if case .column(let index) = layout.slots[property] { row[index] = value }
    }

    /// Writes a property of an ``AttributeStorable`` type numbered `property`.
    public mutating func write<T: AttributeStorable>(_ value: T, at property: Int) throws {
        set(value.attributeValue, at: property)
    }

    /// Writes an optional property of an ``AttributeStorable`` type numbered `property`; nil is null.
    public mutating func write<T: AttributeStorable>(_ value: T?, at property: Int) throws {
        set(value?.attributeValue ?? .null, at: property)
    }

    /// Writes a raw-value enum property numbered `property` as its raw value.
    public mutating func write<T: RawRepresentable & Codable>(_ value: T, at property: Int) throws
    where T.RawValue: AttributeStorable {
        set(value.rawValue.attributeValue, at: property)
    }

    /// Writes an optional raw-value enum property numbered `property` as its raw value; nil is null.
    public mutating func write<T: RawRepresentable & Codable>(_ value: T?, at property: Int) throws
    where T.RawValue: AttributeStorable {
        set(value?.rawValue.attributeValue ?? .null, at: property)
    }

    /// Writes a `Codable` property numbered `property` as canonical JSON; a value that cannot be
    /// encoded throws.
    public mutating func write<T: Codable>(_ value: T, at property: Int) throws {
        set(try json(value, property), at: property)
    }

    /// Writes an optional `Codable` property numbered `property` as canonical JSON; nil is null.
    public mutating func write<T: Codable>(_ value: T?, at property: Int) throws {
        set(try value.map { try json($0, property) } ?? .null, at: property)
    }

    /// Sets a to-many relationship to exactly these objects.
    public mutating func writeToMany(_ ids: [UUID], at property: Int) {
        if case .toMany(let name) = layout.slots[property] { toMany.append((name, ids)) }
    }

    private func json<T: Encodable>(_ value: T, _ property: Int) throws -> AttributeValue {
        do {
            return .json(try AttributeValue.canonicalJSON(value))
        } catch {
            throw EntityError(
                entity: layout.table.name, property: layout.modelTable.names[property],
                "the value cannot be encoded as JSON: \(error)")
        }
    }
}

extension WriteContext {
    /// The row a model value writes over `base`.
    func row<Model: PersistentModel>(
        of value: Model, base: [AttributeValue]?
    ) throws -> (table: EntityTable, row: [AttributeValue], toMany: [(String, [UUID])]) {
        let model = try layout.models.layout(Model.self, in: layout)
        var writer = ModelRowWriter(layout: model, base: base ?? model.table.defaultRow)
        try value._writeModel(to: &writer)
        return (model.table, writer.row, writer.toMany)
    }

    func insertModel<Model: PersistentModel>(_ value: Model) throws {
        try perform {
            let (table, row, toMany) = try row(of: value, base: nil)
            try insertRow(table, id: value.id, row: row, toMany: toMany)
        }
    }

    func updateModel<Model: PersistentModel>(_ value: Model) throws {
        try perform {
            let table = try layout.models.layout(Model.self, in: layout).table
            guard let old = try row(table, id: value.id) else { throw notFound(table, value.id, "update") }
            let (_, new, toMany) = try row(of: value, base: old)
            try updateRow(table, id: value.id, row: new, old: old, toMany: toMany)
        }
    }

    func saveModel<Model: PersistentModel>(_ value: Model) throws {
        try perform {
            let table = try layout.models.layout(Model.self, in: layout).table
            if let old = try row(table, id: value.id) {
                let (_, new, toMany) = try row(of: value, base: old)
                try updateRow(table, id: value.id, row: new, old: old, toMany: toMany)
            } else {
                let (_, row, toMany) = try row(of: value, base: nil)
                try insertRow(table, id: value.id, row: row, toMany: toMany)
            }
        }
    }
}
