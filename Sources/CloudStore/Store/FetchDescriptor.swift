import Foundation

/// A typed query of a model type, in SwiftData's shape: Foundation's `#Predicate` and
/// `SortDescriptor`, a limit and an offset. Fetch, count, fetch ids and delete take the same
/// descriptor, and ``PersistentStore/results(for:)`` keeps its results live.
///
/// ```swift
/// let recent = FetchDescriptor<Note>(
///     predicate: #Predicate { $0.folder == folderID && !$0.title.isEmpty },
///     sortBy: [SortDescriptor(\.created, order: .reverse)],
///     fetchLimit: 20)
/// let notes = try store.read { try $0.fetch(recent) }
/// ```
///
/// The predicate and the sort become SQL, checked against the model when the query runs; an
/// expression that has no SQL form is a ``StoreError`` with the code
/// ``StoreError/Code/unsupportedQuery`` that names it and says what to write instead, never a
/// silent load of the whole table. <doc:TypedQueries> lists what a predicate can hold.
public struct FetchDescriptor<Model: PersistentModel>: Sendable {
    /// Which objects: all of them when nil.
    public var predicate: Predicate<Model>?
    /// Their order; unspecified when empty. Objects that compare equal come in the order of their
    /// ids, so that pages (``fetchOffset``) never repeat or skip an object.
    public var sortBy: [SortDescriptor<Model>]
    /// At most this many objects.
    public var fetchLimit: Int?
    /// Skip this many objects first.
    public var fetchOffset: Int?

    /// A query of `Model`: every object, in no particular order, unless told otherwise.
    public init(
        predicate: Predicate<Model>? = nil, sortBy: [SortDescriptor<Model>] = [], fetchLimit: Int? = nil,
        fetchOffset: Int? = nil
    ) {
        self.predicate = predicate
        self.sortBy = sortBy
        self.fetchLimit = fetchLimit
        self.fetchOffset = fetchOffset
    }
}

extension ReadContext {
    /// The objects a descriptor selects, in its order.
    ///
    /// ```swift
    /// let pinned = try context.fetch(FetchDescriptor<Note>(predicate: #Predicate { $0.pinned }))
    /// ```
    public func fetch<Model: PersistentModel>(_ descriptor: FetchDescriptor<Model>) throws -> [Model] {
        try fetch(try compile(descriptor), Model.self)
    }

    /// How many objects a descriptor selects (after its offset, at most its limit).
    public func fetchCount<Model: PersistentModel>(_ descriptor: FetchDescriptor<Model>) throws -> Int {
        let query = try compile(descriptor, sorted: false)
        let sql = descriptor.fetchLimit == nil && descriptor.fetchOffset == nil
            ? "SELECT count(*) \(query.sql)"
            : "SELECT count(*) FROM (SELECT 1 \(query.sql))"
        return Int(try db.integer(sql, query.arguments) ?? 0)
    }

    /// The ids of the objects a descriptor selects, in its order.
    public func fetchIDs<Model: PersistentModel>(_ descriptor: FetchDescriptor<Model>) throws -> [UUID] {
        let query = try compile(descriptor)
        return try db.uuids("SELECT \(query.model.table.quotedName).\"id\" \(query.sql)", query.arguments)
    }

    /// The objects of a compiled query (``compile(_:sorted:)``), in its order.
    func fetch<Model: PersistentModel>(_ query: CompiledFetch, _ type: Model.Type) throws -> [Model] {
        let fetch = EntityFetch(
            context: self, table: query.model.table, sql: "SELECT \(query.model.table.selectList) \(query.sql)",
            arguments: query.arguments)
        return try fetch.models(Model.self, layout: query.model)
    }

    /// Whether one of the objects `ids` matches a compiled query's predicate (all do without one).
    func anyMatches(_ query: CompiledFetch, among ids: [UUID]) throws -> Bool {
        let table = query.model.table
        var sql = "SELECT 1 FROM \(table.quotedName) WHERE \"id\" IN (\(Array(repeating: "?", count: ids.count).joined(separator: ", ")))"
        if let condition = query.condition { sql += " AND (\(condition))" }
        return try db.integer(sql + " LIMIT 1", ids.map(AttributeValue.uuid) + query.conditionArguments) != nil
    }

    /// The query of a descriptor: `FROM … WHERE … ORDER BY … LIMIT … OFFSET …` and its arguments.
    func compile<Model: PersistentModel>(_ descriptor: FetchDescriptor<Model>, sorted: Bool = true) throws -> CompiledFetch {
        let model = try layout.models.layout(Model.self, in: layout)
        let compiler = PredicateCompiler(model: model, layout: layout)
        var sql = "FROM \(model.table.quotedName)"
        var condition: String?
        if let predicate = descriptor.predicate {
            condition = try compiler.condition(predicate.expression, variable: predicate.variable.key)
            sql += " WHERE " + condition!
        }
        let conditionArguments = compiler.arguments
        if sorted && !descriptor.sortBy.isEmpty {
            sql += " ORDER BY " + (try compiler.order(descriptor.sortBy))
        }
        if let limit = descriptor.fetchLimit {
            precondition(limit >= 0, "a fetch limit cannot be negative")
            sql += " LIMIT \(limit)"
        }
        if let offset = descriptor.fetchOffset {
            precondition(offset >= 0, "a fetch offset cannot be negative")
            sql += (descriptor.fetchLimit == nil ? " LIMIT -1" : "") + " OFFSET \(offset)"
        }
        return CompiledFetch(
            model: model, sql: sql, arguments: compiler.arguments, condition: condition, conditionArguments: conditionArguments)
    }
}

/// A descriptor as SQL, for its model's table.
struct CompiledFetch: Sendable {
    let model: ModelLayout
    /// `FROM … WHERE … ORDER BY … LIMIT … OFFSET …`.
    let sql: String
    let arguments: [AttributeValue]
    /// The predicate's SQL and its arguments; nil without a predicate.
    let condition: String?
    let conditionArguments: [AttributeValue]
}

extension WriteContext {
    /// Deletes the objects a descriptor selects, applying delete rules to each, and returns how
    /// many it selected.
    ///
    /// ```swift
    /// try context.delete(FetchDescriptor<Note>(predicate: #Predicate { $0.folder == nil }))
    /// ```
    @discardableResult
    public func delete<Model: PersistentModel>(_ descriptor: FetchDescriptor<Model>) throws -> Int {
        let ids = try fetchIDs(descriptor)
        for id in ids where try exists(entityName: Model.entityName, id: id) {
            // An earlier delete's cascade may have removed it already.
            try delete(entityName: Model.entityName, id: id)
        }
        return ids.count
    }
}
