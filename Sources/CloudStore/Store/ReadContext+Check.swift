import Foundation

/// A stored value that does not read as its attribute: a null in a required attribute (what a
/// NaN saved before CloudStore refused it left behind), or a value of another kind written
/// outside the store. ``ReadContext/storedValueProblems()`` finds them; `cloudstore check` lists them.
public struct StoredValueProblem: Hashable, Sendable, CustomStringConvertible {
    /// The entity of the object.
    public var entityName: String
    /// The attribute (or to-one relationship) that holds the value.
    public var attribute: String
    /// The object's id.
    public var objectID: UUID
    /// What is stored and what to do about it.
    public var problem: String

    /// `Entity.attribute of ID: problem`.
    public var description: String { "\(entityName).\(attribute) of \(objectID.uuidString): \(problem)" }
}

extension ReadContext {
    /// Every stored value of every object that does not read as its attribute, by entity, object
    /// and attribute. A fetch of such an object throws; set each value with an update of an
    /// ``EntitySnapshot`` (which reads no Swift type), or make the attribute optional.
    ///
    /// ```swift
    /// for problem in try await store.read({ try $0.storedValueProblems() }) {
    ///     print(problem)   // Note.rating of 6F1C…: null, but the attribute is required …
    /// }
    /// ```
    public func storedValueProblems() throws -> [StoredValueProblem] {
        var problems: [StoredValueProblem] = []
        for table in layout.tables {
            try db.each("SELECT \(table.selectList) FROM \(table.quotedName) ORDER BY \"id\"") { statement in
                guard let id = columnUUID(statement, 0) else {
                    problems.append(
                        StoredValueProblem(
                            entityName: table.name, attribute: "id", objectID: UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)),
                            problem: "a row's id \(columnText(statement, 0).debugDescription) is not a UUID; fix or delete the row with SQL"))
                    return
                }
                for (index, type) in table.columnTypes.enumerated() {
                    let name = table.columnNames[index]
                    switch AttributeValue.read(statement, column: Int32(index + 1), as: type) {
                    case nil:
                        problems.append(
                            StoredValueProblem(
                                entityName: table.name, attribute: name, objectID: id,
                                problem: "holds \(columnText(statement, Int32(index + 1)).debugDescription), which is not \(article(type.rawValue)) \(type.rawValue); \(Self.repair(table.name, name, id))"))
                    case .null? where !table.columns[index].isOptional:
                        problems.append(
                            StoredValueProblem(
                                entityName: table.name, attribute: name, objectID: id,
                                problem: "null, but the attribute is required (\(EntityError.nullCause)); \(Self.repair(table.name, name, id))"))
                    default:
                        continue
                    }
                }
            }
        }
        return problems
    }

    /// What to do about a value of `entity.attribute` of object `id` that does not read.
    static func repair(_ entity: String, _ attribute: String, _ id: UUID) -> String {
        "give it a value with context.update(EntitySnapshot(entityName: \"\(entity)\", id: UUID(uuidString: \"\(id.uuidString)\")!, values: [\"\(attribute)\": …])), or make the attribute optional"
    }
}
