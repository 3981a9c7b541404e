import Foundation
import Synchronization

/// Turns a `#Predicate` and `SortDescriptor`s of a model type into SQL for its table: a pure
/// translation, checked against the model, whose result selects exactly the objects
/// `Predicate.evaluate` accepts and orders them as `SortDescriptor.compare` does.
///
/// Every SQL condition it writes is true or false, never NULL, so `!` and `||` mean in SQL what
/// they mean in Swift: equality is null-safe (`IS`), a comparison that may meet a null is wrapped
/// in `COALESCE(…, 0)`. Values are bound as arguments, converted to the attribute type of what they
/// are compared with. Dates, stored to the millisecond, are compared through the millisecond
/// bounds of the Swift date (``DateBounds``), so a date with a fraction of a millisecond selects
/// what it selects in memory. Decimals compare as numbers, through ``QueryFunctions``.
///
/// An expression with no SQL form throws ``StoreError/Code/unsupportedQuery``, naming it as Swift
/// writes it and what to write instead.
///
/// A class, used for one translation: every node of the expression is handed the compiler, and a
/// reference is cheaper to hand down than the layouts it holds.
final class PredicateCompiler {
    let model: ModelLayout
    let layout: StoreLayout
    let table: EntityTable
    private(set) var arguments: [AttributeValue] = []
    /// What each variable of the predicate stands for: the object, or the unwrapped value of an
    /// optional (`flatMap`, `if let`); innermost last. (A list: there are one or two.)
    private(set) var variables: [(id: PredicateExpressions.VariableID, term: SQLTerm)] = []

    /// The term a variable stands for.
    func variable(_ id: PredicateExpressions.VariableID) -> SQLTerm? {
        variables.last { $0.id == id }?.term
    }

    /// Binds a variable to a term for the duration of `body`.
    func binding<T>(_ id: PredicateExpressions.VariableID, to term: SQLTerm, _ body: (PredicateCompiler) throws -> T) rethrows -> T {
        variables.append((id, term))
        defer { variables.removeLast() }
        return try body(self)
    }

    init(model: ModelLayout, layout: StoreLayout) {
        self.model = model
        self.layout = layout
        self.table = model.table
    }

    /// The SQL condition of a predicate's expression, whose variable is the object.
    func condition(
        _ expression: any StandardPredicateExpression<Bool>, variable: PredicateExpressions.VariableID
    ) throws -> String {
        // Opens the existential, so that `term` sees the expression's own type.
        func root(_ expression: some StandardPredicateExpression<Bool>) throws -> SQLTerm {
            try binding(variable, to: SQLTerm(.object, "", spelling: .text("$0"))) { try $0.term(expression) }
        }
        let condition = try boolean(root(expression))
        arguments += condition.arguments
        return condition.sql
    }

    /// The `ORDER BY` terms of sort descriptors, then the id.
    func order(_ sortBy: [SortDescriptor<some PersistentModel>]) throws -> String {
        var terms: [String] = []
        for descriptor in sortBy {
            guard let keyPath = descriptor.keyPath, let index = model.modelTable.index(of: keyPath) else {
                throw unsupported(
                    "the sort \(descriptor.keyPath.map { "\($0)" } ?? "with a comparator")",
                    "sort by a stored property of \(table.name), as SortDescriptor(\\.title)")
            }
            let column = model.propertyTerms[index]
            guard case .column(let type, _, let isExternal) = column.kind, !isExternal else {
                throw unsupported("the sort by \\\(Self.memberSpelling(keyPath))", "sort by an attribute or a to-one relationship")
            }
            var sql = column.sql
            if type == .decimal { sql += " COLLATE \(QueryFunctions.decimalCollation)" }
            if type == .string, let comparator = descriptor.stringComparator, comparator != .lexical {
                throw unsupported(
                    "the sort by \\\(Self.memberSpelling(keyPath)) with a String.StandardComparator other than .lexical",
                    "sort with SortDescriptor(\\.property) (strings by Unicode scalars)")
            }
            terms.append("\(sql) \(descriptor.order == .forward ? "ASC" : "DESC")")
        }
        terms.append("\(table.quotedName).\"id\" ASC")
        return terms.joined(separator: ", ")
    }

    // MARK: Terms

    /// The term of any predicate expression, through its ``SQLTranslatable`` conformance.
    func term<Expression>(_ expression: Expression) throws -> SQLTerm {
        // An expression's children have their own types (`Conjunction<LHS, RHS>`), so the
        // translation of a type is found once and then called with the value where it is,
        // without boxing it in `Any` and casting it back: several times cheaper per node.
        let isConcrete = type(of: expression) == Expression.self
        if isConcrete, let translate = Self.translators.withLock({ $0[ObjectIdentifier(Expression.self)] }) {
            return try withUnsafePointer(to: expression) { try translate(UnsafeRawPointer($0), self) }
        }
        guard let translatable = expression as? any SQLTranslatable else {
            if let value = Self.constant(expression) { return Self.valueTerm(value) }
            throw unsupported(Self.spelling(of: expression), Self.advice(for: expression))
        }
        if isConcrete {
            let translate = Self.translator(for: translatable)
            Self.translators.withLock { $0[ObjectIdentifier(Expression.self)] = translate }
        }
        return try translatable.sqlTerm(self)
    }

    /// How to translate an expression of one type, given a pointer to it: made for that type and
    /// kept under its `ObjectIdentifier`, so the pointer always points to a value of the type the
    /// translator was made for (an existential's content is never kept: `term` checks that the
    /// static type is the dynamic one).
    typealias Translator = @Sendable (UnsafeRawPointer, PredicateCompiler) throws -> SQLTerm
    private static let translators = Mutex<[ObjectIdentifier: Translator]>([:])

    private static func translator<Translatable: SQLTranslatable>(for expression: Translatable) -> Translator {
        { pointer, compiler in try pointer.assumingMemoryBound(to: Translatable.self).pointee.sqlTerm(compiler) }
    }

    /// The term of `object.keyPath`.
    func member(of root: SQLTerm, keyPath: AnyKeyPath) throws -> SQLTerm {
        switch root.kind {
        case .object:
            guard let index = model.modelTable.index(of: keyPath) else {
                throw unsupported(
                    Spelling.member(root, keyPath).text,
                    "query stored properties of \(table.name) (computed and @Transient ones are not in the store)")
            }
            return model.propertyTerms[index]
        case .column(.string, _, _) where keyPath == (\String.isEmpty as AnyKeyPath):
            return SQLTerm(.boolean, "(\(root.sql) = '')", isOptional: root.isOptional, arguments: root.arguments,
                           description: "\(root.description).isEmpty")
        case .toMany(let relationship) where keyPath == (\[UUID].isEmpty as AnyKeyPath):
            return SQLTerm(.boolean, "NOT \(try membersExist(relationship))", description: "\(root.description).isEmpty")
        case .toMany(let relationship) where keyPath == (\[UUID].count as AnyKeyPath):
            return SQLTerm(
                .column(.int64, isEnum: false, isExternal: false), "(SELECT count(*) \(try membersFrom(relationship)))",
                description: "\(root.description).count")
        default:
            throw unsupported(
                "\(root.description)\(Self.memberSpelling(keyPath))",
                "compare the stored property itself (only .isEmpty of a String, and .isEmpty and .count of a to-many relationship, have SQL forms)")
        }
    }

    // MARK: Conditions

    /// A term as a condition: a boolean, or a `Bool` property.
    func boolean(_ term: SQLTerm) throws -> SQLTerm {
        switch term.kind {
        case .boolean:
            guard term.isOptional else { return term }
            return SQLTerm(.boolean, "COALESCE(\(term.sql), 0)", arguments: term.arguments, spelling: term.spelling)
        case .column(.bool, _, _):
            let sql = term.isOptional ? "COALESCE(\(term.sql) <> 0, 0)" : "(\(term.sql) <> 0)"
            return SQLTerm(.boolean, sql, arguments: term.arguments, spelling: term.spelling)
        case .value(let value):
            guard let bool = value as? Bool else { break }
            return SQLTerm(.boolean, bool ? "1" : "0", spelling: term.spelling)
        default:
            break
        }
        throw unsupported(term.description, "a predicate's result is a Bool")
    }

    /// `lhs op rhs`: a column or expression against a value, nil, or another column.
    func compare(_ lhs: SQLTerm, _ op: ComparisonOperator, _ rhs: SQLTerm, spelling: Spelling) throws -> SQLTerm {
        // The stored side on the left.
        if lhs.isValueOrNull && !rhs.isValueOrNull { return try compare(rhs, op.flipped, lhs, spelling: spelling) }
        guard !lhs.isValueOrNull else {
            throw unsupported(spelling.text, "compare a stored property with a value (two values can be compared before the predicate)")
        }
        if case .boolean = lhs.kind {
            // `flag.flatMap { … } == true` and the like: a condition compared with a Bool.
            guard op == .equal || op == .notEqual, case .value(let value) = rhs.kind, let bool = Self.unwrapped(value) as? Bool? else {
                throw unsupported(spelling.text, "compare a condition only with true, false or nil")
            }
            let target = bool.map { $0 ? "1" : "0" } ?? "NULL"
            return SQLTerm(.boolean, "(\(lhs.sql) \(op == .equal ? "IS" : "IS NOT") \(target))", arguments: lhs.arguments, spelling: spelling)
        }
        guard case .column(let type, let isEnum, let isExternal) = lhs.kind else {
            throw unsupported(spelling.text, "compare stored properties and values")
        }
        if op.isOrdering {
            if isEnum {
                throw unsupported(
                    spelling.text,
                    "\(lhs.description) is stored by raw value, whose order need not be the enum's; compare with == or !=, or test membership in a list of cases")
            }
            if [.bool, .data, .json, .url].contains(type) {
                throw unsupported(spelling.text, "\(lhs.description) is \(article(type.rawValue)) \(type.rawValue), which has no order in the store; compare it with == or !=")
            }
        }
        if isExternal {
            guard case .null = Self.normalized(rhs).kind else {
                throw unsupported(spelling.text, "\(lhs.description) keeps its bytes in a file; compare it only with nil")
            }
        }
        // A value converts first: nil (`.null`) compares as nil.
        var right = rhs
        var stored: AttributeValue?
        if case .value(let value) = rhs.kind {
            let converted = try attributeValue(value, as: type, for: lhs, spelling: spelling)
            if converted.isNull { right = SQLTerm(.null, "", spelling: .text("nil")) } else { stored = converted }
        }
        switch right.kind {
        case .null:
            guard op == .equal || op == .notEqual else { throw unsupported(spelling.text, "compare nil only with == or !=") }
            return SQLTerm(.boolean, "(\(lhs.sql) \(op == .equal ? "IS NULL" : "IS NOT NULL"))", arguments: lhs.arguments, spelling: spelling)
        case .value:
            let stored = stored!
            if case .date(let date) = stored { return compareDate(lhs, op, date, spelling: spelling) }
            if case .double(let number) = stored, number.isNaN {
                // NaN equals nothing and orders with nothing; SQLite would bind it as NULL.
                return SQLTerm(.boolean, op == .notEqual ? "1" : "0", spelling: spelling)
            }
            let collation = type == .decimal ? " COLLATE \(QueryFunctions.decimalCollation)" : ""
            return comparison(lhs, op, "?\(collation)", [stored], spelling: spelling)
        case .column(let otherType, _, _):
            guard otherType == type else {
                throw unsupported(spelling.text, "compare properties of the same type (\(lhs.description) is \(article(type.rawValue)) \(type.rawValue))")
            }
            let collation = type == .decimal ? " COLLATE \(QueryFunctions.decimalCollation)" : ""
            return comparison(lhs, op, "\(rhs.sql)\(collation)", rhs.arguments, spelling: spelling, rightIsOptional: rhs.isOptional)
        default:
            throw unsupported(spelling.text, "compare a stored property with a value, nil or another stored property")
        }
    }

    /// `lhs op <right>` as a condition that is never NULL.
    private func comparison(
        _ lhs: SQLTerm, _ op: ComparisonOperator, _ right: String, _ rightArguments: [AttributeValue],
        spelling: Spelling, rightIsOptional: Bool = false
    ) -> SQLTerm {
        let mayBeNull = lhs.isOptional || rightIsOptional
        let sql: String
        switch op {
        case .equal: sql = mayBeNull ? "(\(lhs.sql) IS \(right))" : "(\(lhs.sql) = \(right))"
        case .notEqual: sql = mayBeNull ? "(\(lhs.sql) IS NOT \(right))" : "(\(lhs.sql) <> \(right))"
        default:
            let plain = "\(lhs.sql) \(op.sql) \(right)"
            sql = mayBeNull ? "COALESCE(\(plain), 0)" : "(\(plain))"
        }
        return SQLTerm(.boolean, sql, arguments: lhs.arguments + rightArguments, spelling: spelling)
    }

    /// A date property against a Swift date, through the millisecond bounds of the date.
    private func compareDate(_ lhs: SQLTerm, _ op: ComparisonOperator, _ date: Date, spelling: Spelling) -> SQLTerm {
        let bounds = DateBounds(date)
        let column = lhs.sql
        switch op {
        case .equal, .notEqual:
            guard bounds.first < bounds.afterLast else {
                // No millisecond reads back as this date: nothing stored equals it.
                return SQLTerm(.boolean, op == .equal ? "0" : "1", spelling: spelling)
            }
            let test = "\(column) >= ? AND \(column) < ?"
            let arguments = lhs.arguments + [.int64(bounds.first)] + lhs.arguments + [.int64(bounds.afterLast)]
            let equal = lhs.isOptional ? "COALESCE(\(test), 0)" : "(\(test))"
            return SQLTerm(.boolean, op == .equal ? equal : "NOT \(equal)", arguments: arguments, spelling: spelling)
        case .less: return dateBound(lhs, "<", bounds.first, spelling)
        case .lessOrEqual: return dateBound(lhs, "<", bounds.afterLast, spelling)
        case .greater: return dateBound(lhs, ">=", bounds.afterLast, spelling)
        case .greaterOrEqual: return dateBound(lhs, ">=", bounds.first, spelling)
        }
    }

    private func dateBound(_ lhs: SQLTerm, _ op: String, _ bound: Int64, _ spelling: Spelling) -> SQLTerm {
        let plain = "\(lhs.sql) \(op) ?"
        return SQLTerm(.boolean, lhs.isOptional ? "COALESCE(\(plain), 0)" : "(\(plain))",
                       arguments: lhs.arguments + [.int64(bound)], spelling: spelling)
    }

    /// Whether a to-many relationship of the object relates `element` (a `?` or an expression).
    func toManyContains(
        _ relationship: RelationshipLayout, element: SQLTerm, spelling: Spelling
    ) throws -> SQLTerm {
        let elementSQL: String
        var elementArguments: [AttributeValue] = []
        switch Self.normalized(element).kind {
        case .value(let value):
            let id = try attributeValue(value, as: .uuid, for: element, spelling: spelling)
            guard !id.isNull else { return SQLTerm(.boolean, "0", spelling: spelling) }
            elementSQL = "?"
            elementArguments = [id]
        case .column(.uuid, _, _):
            elementSQL = element.sql
            elementArguments = element.arguments
        default:
            throw unsupported(spelling.text, "test a to-many relationship's membership with an id")
        }
        let sql = try QueryCompiler.containsSQL(relationship, in: table, layout: layout, element: elementSQL)
        return SQLTerm(.boolean, sql, arguments: elementArguments, spelling: spelling)
    }

    private func membersFrom(_ relationship: RelationshipLayout) throws -> String {
        try QueryCompiler.membersSQL(relationship, in: table, layout: layout).from
    }

    private func membersExist(_ relationship: RelationshipLayout) throws -> String {
        "EXISTS (SELECT 1 \(try membersFrom(relationship)))"
    }

    /// `element IN (values…)`: membership in a list the predicate carries.
    func listContains(_ values: [Any], element: SQLTerm, spelling: Spelling) throws -> SQLTerm {
        guard case .column(let type, _, let isExternal) = element.kind, !isExternal else {
            throw unsupported(spelling.text, "test whether a stored property is in a list of values")
        }
        var placeholders: [String] = []
        var listArguments: [AttributeValue] = []
        var matchesNull = false
        for value in values {
            let stored = try attributeValue(value, as: type, for: element, spelling: spelling)
            if stored.isNull {
                matchesNull = true
            } else if case .date(let date) = stored {
                // Only a date that is a whole millisecond can equal a stored one.
                let bounds = DateBounds(date)
                if bounds.first < bounds.afterLast {
                    placeholders.append("?")
                    listArguments.append(.int64(bounds.first))
                }
            } else if case .double(let number) = stored, number.isNaN {
                continue
            } else {
                placeholders.append("?")
                listArguments.append(stored)
            }
        }
        let collation = type == .decimal ? " COLLATE \(QueryFunctions.decimalCollation)" : ""
        var parts: [String] = []
        var arguments: [AttributeValue] = []
        if !placeholders.isEmpty {
            let test = "\(element.sql)\(collation) IN (\(placeholders.joined(separator: ", ")))"
            parts.append(element.isOptional ? "COALESCE(\(test), 0)" : test)
            arguments += element.arguments + listArguments
        }
        if matchesNull && element.isOptional {
            parts.append("\(element.sql) IS NULL")
            arguments += element.arguments
        }
        let sql = parts.isEmpty ? "0" : "(" + parts.joined(separator: " OR ") + ")"
        return SQLTerm(.boolean, sql, arguments: arguments, spelling: spelling)
    }

    // MARK: Values

    /// A Swift value of a predicate as the attribute value it is compared as.
    func attributeValue(_ value: Any, as type: AttributeType, for term: SQLTerm, spelling: Spelling) throws -> AttributeValue {
        // The common values first, by casts to concrete types (which also see through an
        // optional that holds a value), cheaper than the protocol casts below.
        switch type {
        case .string: if let string = value as? String { return .string(string) }
        case .int64:
            if let integer = value as? Int64 { return .int64(integer) }
            if let integer = value as? Int { return .int64(Int64(integer)) }
        case .double: if let double = value as? Double { return .double(double) }
        case .bool: if let bool = value as? Bool { return .bool(bool) }
        case .date: if let date = value as? Date { return .date(date) }  // not rounded: compared through its bounds
        case .uuid: if let uuid = value as? UUID { return .uuid(uuid) }
        case .decimal: if let decimal = value as? Decimal { return .decimal(decimal) }
        default: break
        }
        guard let value = Self.unwrapped(value) else { return .null }
        if type == .json, let encodable = value as? any Encodable {
            return .json(try AttributeValue.canonicalJSON(encodable))
        }
        if let storable = value as? any AttributeStorable {
            let stored: AttributeValue
            if let date = value as? Date {
                stored = .date(date)  // not rounded: compared through its bounds
            } else {
                stored = storable.attributeValue
            }
            if stored.type == type { return stored }
            if type == .double, case .int64(let integer) = stored { return .double(Double(integer)) }
        } else if let raw = value as? any RawRepresentable, let storable = raw.rawValue as? any AttributeStorable,
            storable.attributeValue.type == type
        {
            return storable.attributeValue
        }
        throw unsupported(
            spelling.text,
            "\(term.description) is \(article(type.rawValue)) \(type.rawValue) and cannot be compared with \(String(reflecting: value))")
    }

    // MARK: Errors

    func unsupported(_ expression: String, _ advice: String) -> StoreError {
        StoreError(
            .unsupportedQuery,
            "a query of \(table.name) uses \(expression), which the store cannot turn into SQL; \(advice)")
    }
}

extension PredicateCompiler {
    /// A value without its optional wrapping; nil for nil.
    static func unwrapped(_ value: Any) -> Any? {
        if let optional = value as? any AnyOptional { return optional.anyWrapped.flatMap(unwrapped) }
        return value
    }

    /// A value term that holds nil, as nil.
    static func normalized(_ term: SQLTerm) -> SQLTerm {
        if case .value(let value) = term.kind, unwrapped(value) == nil { return SQLTerm(.null, "", spelling: term.spelling) }
        return term
    }

    /// Whether a property's Swift type is stored by raw value (an enum), not directly.
    static func isEnum(_ type: Any.Type) -> Bool {
        let wrapped = (type as? any AnyOptional.Type)?.wrappedType ?? type
        return !(wrapped is any AttributeStorable.Type) && wrapped is any RawRepresentable.Type
    }

    /// `.title` from `\Note.title`. A computed property's key path does not say its name, so the
    /// common ones are looked up.
    static func memberSpelling(_ keyPath: AnyKeyPath) -> String {
        if let known = knownMembers[keyPath] { return known }
        let text = "\(keyPath)"
        guard let dot = text.firstIndex(of: ".") else { return ".\(text)" }
        let member = text[dot...]
        if member.contains("<computed"), let open = member.lastIndex(of: "(") {
            return ".(a computed property of type \(member[member.index(after: open)...].dropLast(2)))"
        }
        return String(member)
    }

    // Unsafe: immutable, its key paths are literals.
    nonisolated(unsafe) private static let knownMembers: [AnyKeyPath: String] = [
        \String.count: ".count", \String.isEmpty: ".isEmpty", \String.first: ".first", \String.last: ".last",
        \String.utf8.count: ".utf8.count", \[UUID].count: ".count", \[UUID].isEmpty: ".isEmpty",
        \[UUID].first: ".first", \Date.timeIntervalSince1970: ".timeIntervalSince1970",
        \Date.timeIntervalSinceReferenceDate: ".timeIntervalSinceReferenceDate", \UUID.uuidString: ".uuidString",
        \URL.absoluteString: ".absoluteString",
    ]
}
