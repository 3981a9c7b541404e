import Foundation

/// A `#Predicate` expression the store can turn into SQL. Each conforming expression translates
/// itself and asks the compiler for its operands' terms, so an operand the store cannot translate
/// is reported as itself, not as the expression around it.
protocol SQLTranslatable {
    func sqlTerm(_ compiler: inout PredicateCompiler) throws -> SQLTerm
}

extension PredicateExpressions.Variable: SQLTranslatable {
    func sqlTerm(_ compiler: inout PredicateCompiler) throws -> SQLTerm {
        guard let term = compiler.variables[key] else {
            throw compiler.unsupported("a variable of a nested closure", "use the predicate's own object ($0)")
        }
        return term
    }
}

extension PredicateExpressions.KeyPath: SQLTranslatable {
    func sqlTerm(_ compiler: inout PredicateCompiler) throws -> SQLTerm {
        let root = try compiler.term(root)
        // A property of a captured value (`folder.id`) is a value.
        if case .value = root.kind, let value = PredicateCompiler.constant(self) {
            return PredicateCompiler.valueTerm(value)
        }
        return try compiler.member(of: root, keyPath: keyPath, outputType: Output.self)
    }
}

extension PredicateExpressions.Value: SQLTranslatable {
    func sqlTerm(_ compiler: inout PredicateCompiler) throws -> SQLTerm {
        PredicateCompiler.valueTerm(value)
    }
}

extension PredicateExpressions.NilLiteral: SQLTranslatable {
    func sqlTerm(_ compiler: inout PredicateCompiler) throws -> SQLTerm {
        SQLTerm(.null, "", description: "nil")
    }
}

extension PredicateExpressions.Equal: SQLTranslatable {
    func sqlTerm(_ compiler: inout PredicateCompiler) throws -> SQLTerm {
        let (left, right) = (try compiler.term(lhs), try compiler.term(rhs))
        return try compiler.compare(left, .equal, right, description: "\(left.description) == \(right.description)")
    }
}

extension PredicateExpressions.NotEqual: SQLTranslatable {
    func sqlTerm(_ compiler: inout PredicateCompiler) throws -> SQLTerm {
        let (left, right) = (try compiler.term(lhs), try compiler.term(rhs))
        return try compiler.compare(left, .notEqual, right, description: "\(left.description) != \(right.description)")
    }
}

extension PredicateExpressions.Comparison: SQLTranslatable {
    func sqlTerm(_ compiler: inout PredicateCompiler) throws -> SQLTerm {
        let (left, right) = (try compiler.term(lhs), try compiler.term(rhs))
        let op = ComparisonOperator(self.op)
        return try compiler.compare(left, op, right, description: "\(left.description) \(op.sql) \(right.description)")
    }
}

extension PredicateExpressions.Conjunction: SQLTranslatable {
    func sqlTerm(_ compiler: inout PredicateCompiler) throws -> SQLTerm {
        let (left, right) = (try compiler.boolean(compiler.term(lhs)), try compiler.boolean(compiler.term(rhs)))
        return SQLTerm(
            .boolean, "(\(left.sql) AND \(right.sql))", arguments: left.arguments + right.arguments,
            description: "\(left.description) && \(right.description)")
    }
}

extension PredicateExpressions.Disjunction: SQLTranslatable {
    func sqlTerm(_ compiler: inout PredicateCompiler) throws -> SQLTerm {
        let (left, right) = (try compiler.boolean(compiler.term(lhs)), try compiler.boolean(compiler.term(rhs)))
        return SQLTerm(
            .boolean, "(\(left.sql) OR \(right.sql))", arguments: left.arguments + right.arguments,
            description: "\(left.description) || \(right.description)")
    }
}

extension PredicateExpressions.Negation: SQLTranslatable {
    func sqlTerm(_ compiler: inout PredicateCompiler) throws -> SQLTerm {
        let inner = try compiler.boolean(compiler.term(wrapped))
        return SQLTerm(.boolean, "(NOT \(inner.sql))", arguments: inner.arguments, description: "!\(inner.description)")
    }
}

extension PredicateExpressions.NilCoalesce: SQLTranslatable {
    func sqlTerm(_ compiler: inout PredicateCompiler) throws -> SQLTerm {
        let (left, right) = (try compiler.term(lhs), try compiler.term(rhs))
        let description = "(\(left.description) ?? \(right.description))"
        switch left.kind {
        case .column(let type, let isEnum, let isExternal) where !isExternal:
            let fallback: (sql: String, arguments: [AttributeValue], isOptional: Bool)
            switch PredicateCompiler.normalized(right).kind {
            case .value(let value):
                var stored = try compiler.attributeValue(value, as: type, for: left, description: description)
                if case .date(let date) = stored { stored = .date(milliseconds: date) }
                fallback = ("?", [stored], false)
            case .column(type, _, false):
                fallback = (right.sql, right.arguments, right.isOptional)
            case .null:
                fallback = ("NULL", [], true)
            default:
                throw compiler.unsupported(description, "give ?? a value of the property's type")
            }
            return SQLTerm(
                .column(type, isEnum: isEnum, isExternal: false), "COALESCE(\(left.sql), \(fallback.sql))",
                isOptional: fallback.isOptional, arguments: left.arguments + fallback.arguments, description: description)
        case .boolean:
            guard case .value(let value) = right.kind, let bool = value as? Bool else {
                throw compiler.unsupported(description, "give ?? true or false")
            }
            return SQLTerm(
                .boolean, "COALESCE(\(left.sql), \(bool ? 1 : 0))", arguments: left.arguments, description: description)
        default:
            throw compiler.unsupported(description, "use ?? on an optional stored property")
        }
    }
}

extension PredicateExpressions.OptionalFlatMap: SQLTranslatable {
    func sqlTerm(_ compiler: inout PredicateCompiler) throws -> SQLTerm {
        var unwrapped = try compiler.term(wrapped)
        let optional = unwrapped
        unwrapped.isOptional = false
        compiler.variables[variable.key] = unwrapped
        defer { compiler.variables[variable.key] = nil }
        let result = try compiler.term(transform)
        let description = "\(optional.description).flatMap { \(result.description) }"
        guard optional.isOptional else { return result }
        switch result.kind {
        case .boolean, .column:
            // NULL where the optional is nil, else the transform.
            return SQLTerm(
                result.kind, "(CASE WHEN \(optional.sql) IS NULL THEN NULL ELSE \(result.sql) END)", isOptional: true,
                arguments: optional.arguments + result.arguments, description: description)
        default:
            throw compiler.unsupported(description, "unwrap an optional stored property into a condition or a value")
        }
    }
}

extension PredicateExpressions.SequenceContains: SQLTranslatable {
    func sqlTerm(_ compiler: inout PredicateCompiler) throws -> SQLTerm {
        let (collection, member) = (try compiler.term(sequence), try compiler.term(element))
        let description = "\(collection.description).contains(\(member.description))"
        switch collection.kind {
        case .toMany(let relationship):
            return try compiler.toManyContains(relationship, element: member, description: description)
        case .value(let value):
            guard let values = value as? any Sequence else { break }
            return try compiler.listContains(Self.elements(of: values), element: member, description: description)
        default:
            break
        }
        throw compiler.unsupported(
            description,
            "test membership of an id in a to-many relationship ($0.tags.contains(id)), or of a stored property in a list of values (ids.contains($0.id))")
    }
}

extension PredicateExpressions.SequenceContains {
    /// The elements of a sequence the predicate carries.
    fileprivate static func elements(of values: some Sequence) -> [Any] { values.map { $0 as Any } }
}

extension PredicateExpressions.SequenceStartsWith: SQLTranslatable {
    func sqlTerm(_ compiler: inout PredicateCompiler) throws -> SQLTerm {
        let (string, start) = (try compiler.term(base), try compiler.term(prefix))
        let description = "\(string.description).starts(with: \(start.description))"
        guard case .column(.string, _, _) = string.kind else {
            throw compiler.unsupported(description, "use starts(with:) on a String property")
        }
        switch PredicateCompiler.normalized(start).kind {
        case .value(let value):
            guard let text = PredicateCompiler.unwrapped(value) as? String else { break }
            // GLOB: case-sensitive, and an index on the property can serve it.
            return SQLTerm(
                .boolean, string.isOptional ? "COALESCE(\(string.sql) GLOB ?, 0)" : "(\(string.sql) GLOB ?)",
                arguments: string.arguments + [.string(QueryCompiler.globPrefix(text))], description: description)
        case .column(.string, _, _):
            let test = "instr(\(string.sql), \(start.sql)) = 1"
            return SQLTerm(
                .boolean, string.isOptional || start.isOptional ? "COALESCE(\(test), 0)" : "(\(test))",
                arguments: string.arguments + start.arguments, description: description)
        default:
            break
        }
        throw compiler.unsupported(description, "give starts(with:) a String")
    }
}

extension PredicateExpressions.CollectionContainsCollection: SQLTranslatable {
    func sqlTerm(_ compiler: inout PredicateCompiler) throws -> SQLTerm {
        let (string, part) = (try compiler.term(base), try compiler.term(other))
        let description = "\(string.description).contains(\(part.description))"
        guard case .column(.string, _, _) = string.kind else {
            throw compiler.unsupported(description, "use contains on a String property (a to-many relationship takes one id)")
        }
        let (partSQL, partArguments) = try compiler.string(part, description: description, "give contains a String")
        // instr: case-sensitive, by Unicode scalars; an empty string is in every string.
        let test = "instr(\(string.sql), \(partSQL)) > 0"
        return SQLTerm(
            .boolean, string.isOptional || part.isOptional ? "COALESCE(\(test), 0)" : "(\(test))",
            arguments: string.arguments + partArguments, description: description)
    }
}

#if !canImport(Darwin)
extension PredicateExpressions.StringLocalizedStandardContains: SQLTranslatable {
    func sqlTerm(_ compiler: inout PredicateCompiler) throws -> SQLTerm {
        let (string, part) = (try compiler.term(root), try compiler.term(other))
        let description = "\(string.description).localizedStandardContains(\(part.description))"
        guard case .column(.string, _, _) = string.kind else {
            throw compiler.unsupported(description, "use localizedStandardContains on a String property")
        }
        let (partSQL, partArguments) = try compiler.string(
            part, description: description, "give localizedStandardContains a String")
        let test = "\(QueryFunctions.localizedStandardContains)(\(string.sql), \(partSQL))"
        return SQLTerm(
            .boolean, "COALESCE(\(test), 0)", arguments: string.arguments + partArguments, description: description)
    }
}
#endif

extension PredicateExpressions.RangeExpressionContains: SQLTranslatable {
    func sqlTerm(_ compiler: inout PredicateCompiler) throws -> SQLTerm {
        let (bounds, value) = (try compiler.term(range), try compiler.term(element))
        let description = "(\(bounds.description)).contains(\(value.description))"
        guard case .range(let lower, let upper, let isClosed) = bounds.kind else {
            throw compiler.unsupported(description, "test a stored property against a range of values")
        }
        let low = try compiler.compare(value, .greaterOrEqual, SQLTerm(.value(lower), "", description: "\(lower)"), description: description)
        let high = try compiler.compare(
            value, isClosed ? .lessOrEqual : .less, SQLTerm(.value(upper), "", description: "\(upper)"), description: description)
        return SQLTerm(.boolean, "(\(low.sql) AND \(high.sql))", arguments: low.arguments + high.arguments, description: description)
    }
}

extension PredicateCompiler {
    /// A string operand: a `?` with the value, or a String property's SQL.
    func string(_ term: SQLTerm, description: String, _ advice: String) throws -> (sql: String, arguments: [AttributeValue]) {
        switch Self.normalized(term).kind {
        case .value(let value):
            if let text = Self.unwrapped(value) as? String { return ("?", [.string(text)]) }
        case .column(.string, _, _):
            return (term.sql, term.arguments)
        default:
            break
        }
        throw unsupported(description, advice)
    }

    /// The term of a value the predicate carries: a range, or a value to compare with.
    static func valueTerm(_ value: Any) -> SQLTerm {
        if let range = value as? any AnyRange {
            return SQLTerm(.range(lower: range.lower, upper: range.upper, isClosed: range.isClosed), "", description: "\(value)")
        }
        return SQLTerm(.value(value), "", description: String(reflecting: value))
    }

    /// The value of an expression that does not involve the object (`-1`, `0...42`, `ids[0]`,
    /// `limit + 1`), computed as `Predicate.evaluate` computes it; nil when it involves the object.
    static func constant(_ expression: Any) -> Any? {
        guard let expression = expression as? any PredicateExpression else { return nil }
        return evaluate(expression)
    }

    private static func evaluate<Expression: PredicateExpression>(_ expression: Expression) -> Any? {
        try? expression.evaluate(PredicateBindings())
    }

    /// How Swift writes an expression the store has no SQL for.
    static func spelling(of expression: Any) -> String {
        let name = String(describing: type(of: expression))
        let base = name.prefix { $0 != "<" }
        let spellings: [String: String] = [
            "Arithmetic": "arithmetic (+, -, *)", "UnaryMinus": "a negation (-x)", "IntDivision": "a division",
            "FloatDivision": "a division", "IntRemainder": "a remainder (%)", "ForcedUnwrap": "a forced unwrap (!)",
            "Conditional": "a conditional (?:, if)", "TypeCheck": "a type check (is)",
            "ConditionalCast": "a cast (as?)", "ForceCast": "a cast (as!)", "SequenceContainsWhere": "contains(where:)",
            "SequenceAllSatisfy": "allSatisfy", "Filter": "filter", "SequenceMaximum": "max()", "SequenceMinimum": "min()",
            "StringContainsRegex": "a regular expression", "CollectionIndexSubscript": "a subscript",
            "CollectionRangeSubscript": "a subscript", "DictionaryKeySubscript": "a subscript",
            "DictionaryKeyDefaultValueSubscript": "a subscript", "PredicateEvaluate": "a nested predicate",
            "ExpressionEvaluate": "a nested expression", "StringCaseInsensitiveCompare": "caseInsensitiveCompare",
            "StringLocalizedCompare": "localizedCompare",
        ]
        return "\(spellings[String(base)] ?? String(base)) (PredicateExpressions.\(name))"
    }

    /// What to write instead of an expression the store has no SQL for.
    static func advice(for expression: Any) -> String {
        let base = String(describing: type(of: expression)).prefix { $0 != "<" }
        switch base {
        case "Arithmetic", "UnaryMinus", "IntDivision", "FloatDivision", "IntRemainder":
            return "compute the value before the predicate and compare the stored property with it"
        case "ForcedUnwrap":
            return "compare the optional with == nil or != nil, or unwrap it with ?? value"
        case "SequenceContainsWhere", "SequenceAllSatisfy", "Filter":
            return "test membership of one id ($0.tags.contains(id)), or combine several with ||"
        case "StringCaseInsensitiveCompare", "StringLocalizedCompare", "StringContainsRegex":
            return "use localizedStandardContains for a search that ignores case and diacritics, or contains / starts(with:) for an exact one"
        default:
            return "write it with comparisons, &&, ||, !, ?? and contains / starts(with:) on stored properties"
        }
    }
}

/// A range of the predicate's values, seen without knowing its bound type.
protocol AnyRange {
    var lower: Any { get }
    var upper: Any { get }
    var isClosed: Bool { get }
}

extension Range: AnyRange {
    var lower: Any { lowerBound }
    var upper: Any { upperBound }
    var isClosed: Bool { false }
}

extension ClosedRange: AnyRange {
    var lower: Any { lowerBound }
    var upper: Any { upperBound }
    var isClosed: Bool { true }
}
