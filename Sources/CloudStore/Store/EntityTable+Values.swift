import Foundation

extension EntityTable {
    /// The row (values in column order) a snapshot writes: on insert (`base` nil) missing values
    /// take their default, or null when optional; on update (`base` the stored row) missing values
    /// keep the stored one. Unknown names, wrong types and missing required values are errors that
    /// name `Entity.property`.
    func row(from snapshot: EntitySnapshot, base: [AttributeValue]?) throws -> [AttributeValue] {
        var row = base ?? defaultRow
        var matched = 0
        for (index, name) in columnNames.enumerated() {
            guard let value = snapshot.values[name] else {
                if base == nil && row[index].isNull && !columns[index].isOptional { throw missing(columns[index], snapshot.id) }
                continue
            }
            matched += 1
            row[index] = try checked(value, column: index, id: snapshot.id)
        }
        if matched != snapshot.values.count {
            let unknown = snapshot.values.keys.filter { columnIndex(of: $0) == nil }.sorted()
            let name = unknown.first ?? "?"
            if let relationship = relationship(named: name), relationship.column == nil {
                throw StoreError(
                    .invalidValue,
                    "\(self.name).\(name) is a to-many relationship; pass its ids in the snapshot's toMany, not in values")
            }
            throw StoreError(
                .unknownProperty,
                "\(self.name).\(name) is not an attribute or to-one relationship of \(self.name) (known: \(columns.map(\.name).joined(separator: ", ")))")
        }
        return row
    }

    /// The row with the bytes of its external-storage attributes stored in files (each value
    /// becomes its ``ExternalData`` reference), and references given to inline `data` attributes
    /// read back into bytes; columns equal to `base` (the stored row) are left as they are. Called
    /// by a unit of work before the row is written, so the files exist before the transaction
    /// commits.
    func externalizing(
        _ row: [AttributeValue], base: [AttributeValue]?, id: UUID, files: ExternalDataFiles?
    ) throws -> [AttributeValue] {
        guard !dataColumns.isEmpty, let files else { return row }
        var row = row
        for index in dataColumns where base.map({ row[index] != $0[index] }) ?? true {
            let name = columnNames[index]
            do {
                switch row[index] {
                case .data(let bytes) where externalColumns.contains(index):
                    row[index] = .externalData(try files.store(bytes))
                case .externalData(let external) where !externalColumns.contains(index):
                    row[index] = .data(try files.data(for: external))
                case .externalData(let external) where !files.contains(external):
                    throw StoreError(
                        .externalData,
                        "it names \(external), but the store holds no such file; save the bytes (as Data) instead")
                default:
                    continue
                }
            } catch let error as StoreError {
                throw StoreError(error.code, "\(self.name).\(name) of \(id.uuidString): \(error.message)")
            }
        }
        return row
    }

    private func checked(_ value: AttributeValue, column index: Int, id: UUID) throws -> AttributeValue {
        switch (value, columnTypes[index]) {
        case (.null, _):
            if !columns[index].isOptional { throw missing(columns[index], id) }
            return .null
        case (.date(let date), .date):
            return .date(milliseconds: date)
        case (.int64(let number), .double):
            return .double(Double(number))
        default:
            guard value.type != columnTypes[index] else { return value }
            let column = columns[index]
            let what =
                column.isRelationship
                ? "a to-one relationship to \(column.destination!) (a UUID)"
                : "\(article(column.type.rawValue)) \(column.type.rawValue)"
            let given = value.type!.rawValue
            throw StoreError(
                .invalidValue,
                "\(name).\(column.name) of \(id.uuidString) is \(what) but the value is \(article(given)) \(given) (\(value))")
        }
    }

    private func missing(_ column: Column, _ id: UUID) -> StoreError {
        StoreError(
            .invalidValue,
            "\(name).\(column.name) of \(id.uuidString) is required: give it a value, or make the attribute optional or give it a default in the schema")
    }
}
