import Foundation

/// A `#Predicate` expression the store can turn into SQL. Each conforming expression translates
/// itself and asks the compiler for its operands' terms, so an operand the store cannot translate
/// is reported as itself, not as the expression around it.
protocol SQLTranslatable: SendableMetatype {
    func sqlTerm(_ compiler: PredicateCompiler) throws -> SQLTerm
}

extension PredicateExpressions.Variable: SQLTranslatable {
    func sqlTerm(_ compiler: PredicateCompiler) throws -> SQLTerm {
        guard let term = compiler.variable(key) else {
            throw compiler.unsupported("a variable of a nested closure", "use the predicate's own object ($0)")
        }
        return term
    }
}

extension PredicateExpressions.KeyPath: SQLTranslatable {
    func sqlTerm(_ compiler: PredicateCompiler) throws -> SQLTerm {
        let root = try compiler.term(root)
        // A property of a captured value (`folder.id`) is a value.
        if case .value = root.kind, let value = PredicateCompiler.constant(self) {
            return PredicateCompiler.valueTerm(value)
        }
        return try compiler.member(of: root, keyPath: keyPath)
    }
}

extension PredicateExpressions.Value: SQLTranslatable {
    func sqlTerm(_ compiler: PredicateCompiler) throws -> SQLTerm {
        PredicateCompiler.valueTerm(value)
    }
}

extension PredicateExpressions.NilLiteral: SQLTranslatable {
    func sqlTerm(_ compiler: PredicateCompiler) throws -> SQLTerm {
        SQLTerm(.null, "", spelling: .text("nil"))
    }
}

extension PredicateExpressions.Equal: SQLTranslatable {
    func sqlTerm(_ compiler: PredicateCompiler) throws -> SQLTerm {
        let (left, right) = (try compiler.term(lhs), try compiler.term(rhs))
        return try compiler.compare(left, .equal, right, spelling: .infix(left, "==", right))
    }
}

extension PredicateExpressions.NotEqual: SQLTranslatable {
    func sqlTerm(_ compiler: PredicateCompiler) throws -> SQLTerm {
        let (left, right) = (try compiler.term(lhs), try compiler.term(rhs))
        return try compiler.compare(left, .notEqual, right, spelling: .infix(left, "!=", right))
    }
}

extension PredicateExpressions.Comparison: SQLTranslatable {
    func sqlTerm(_ compiler: PredicateCompiler) throws -> SQLTerm {
        let (left, right) = (try compiler.term(lhs), try compiler.term(rhs))
        let op = ComparisonOperator(self.op)
        return try compiler.compare(left, op, right, spelling: .infix(left, op.sql, right))
    }
}

extension PredicateExpressions.Conjunction: SQLTranslatable {
    func sqlTerm(_ compiler: PredicateCompiler) throws -> SQLTerm {
        try compiler.junction(compiler.term(lhs), "AND", "&&", compiler.term(rhs))
    }
}

extension PredicateExpressions.Disjunction: SQLTranslatable {
    func sqlTerm(_ compiler: PredicateCompiler) throws -> SQLTerm {
        try compiler.junction(compiler.term(lhs), "OR", "||", compiler.term(rhs))
    }
}

extension PredicateCompiler {
    /// `&&` or `||` of two boolean terms: `(left AND right)`, spelled with Swift's operator. The
    /// right side is translated after the left is known to be a condition, so the first problem
    /// reported is the left's.
    func junction(
        _ lhs: SQLTerm, _ sqlOperator: String, _ swiftOperator: String, _ rhs: @autoclosure () throws -> SQLTerm
    ) throws -> SQLTerm {
        let left = try boolean(lhs)
        let right = try boolean(rhs())
        return SQLTerm(
            .boolean, "(\(left.sql) \(sqlOperator) \(right.sql))", arguments: left.arguments + right.arguments,
            spelling: .infix(left, swiftOperator, right))
    }
}

extension PredicateExpressions.Negation: SQLTranslatable {
    func sqlTerm(_ compiler: PredicateCompiler) throws -> SQLTerm {
        let inner = try compiler.boolean(compiler.term(wrapped))
        return SQLTerm(.boolean, "(NOT \(inner.sql))", arguments: inner.arguments, spelling: .prefix("!", inner))
    }
}

extension PredicateExpressions.NilCoalesce: SQLTranslatable {
    func sqlTerm(_ compiler: PredicateCompiler) throws -> SQLTerm {
        let (left, right) = (try compiler.term(lhs), try compiler.term(rhs))
        let spelling = Spelling.lazy { "(\(left.description) ?? \(right.description))" }
        switch left.kind {
        case .column(let type, let isEnum, let isExternal) where !isExternal:
            let fallback: (sql: String, arguments: [AttributeValue], isOptional: Bool)
            switch PredicateCompiler.normalized(right).kind {
            case .value(let value):
                var stored = try compiler.attributeValue(value, as: type, for: left, spelling: spelling)
                if case .date(let date) = stored { stored = .date(milliseconds: date) }
                fallback = ("?", [stored], false)
            case .column(type, _, false):
                fallback = (right.sql, right.arguments, right.isOptional)
            case .null:
                fallback = ("NULL", [], true)
            default:
                throw compiler.unsupported(spelling.text, "give ?? a value of the property's type")
            }
            return SQLTerm(
                .column(type, isEnum: isEnum, isExternal: false), "COALESCE(\(left.sql), \(fallback.sql))",
                isOptional: fallback.isOptional, arguments: left.arguments + fallback.arguments, spelling: spelling)
        case .boolean:
            guard case .value(let value) = right.kind, let bool = value as? Bool else {
                throw compiler.unsupported(spelling.text, "give ?? true or false")
            }
            return SQLTerm(
                .boolean, "COALESCE(\(left.sql), \(bool ? 1 : 0))", arguments: left.arguments, spelling: spelling)
        default:
            throw compiler.unsupported(spelling.text, "use ?? on an optional stored property")
        }
    }
}

extension PredicateExpressions.OptionalFlatMap: SQLTranslatable {
    func sqlTerm(_ compiler: PredicateCompiler) throws -> SQLTerm {
        let optional = try compiler.term(wrapped)
        let unwrapped = SQLTerm(
            optional.kind, optional.sql, isOptional: false, arguments: optional.arguments, spelling: optional.spelling)
        let result = try compiler.binding(variable.key, to: unwrapped) { try $0.term(transform) }
        let spelling = Spelling.lazy { "\(optional.description).flatMap { \(result.description) }" }
        guard optional.isOptional else { return result }
        switch result.kind {
        case .boolean, .column:
            // NULL where the optional is nil, else the transform.
            return SQLTerm(
                result.kind, "(CASE WHEN \(optional.sql) IS NULL THEN NULL ELSE \(result.sql) END)", isOptional: true,
                arguments: optional.arguments + result.arguments, spelling: spelling)
        default:
            throw compiler.unsupported(spelling.text, "unwrap an optional stored property into a condition or a value")
        }
    }
}

extension PredicateExpressions.SequenceContains: SQLTranslatable {
    func sqlTerm(_ compiler: PredicateCompiler) throws -> SQLTerm {
        let (collection, member) = (try compiler.term(sequence), try compiler.term(element))
        let spelling = Spelling.lazy { "\(collection.description).contains(\(member.description))" }
        switch collection.kind {
        case .toMany(let relationship):
            return try compiler.toManyContains(relationship, element: member, spelling: spelling)
        case .value(let value):
            guard let values = value as? any Sequence else { break }
            return try compiler.listContains(Self.elements(of: values), element: member, spelling: spelling)
        default:
            break
        }
        throw compiler.unsupported(
            spelling.text,
            "test membership of an id in a to-many relationship ($0.tags.contains(id)), or of a stored property in a list of values (ids.contains($0.id))")
    }
}

extension PredicateExpressions.SequenceContains {
    /// The elements of a sequence the predicate carries.
    fileprivate static func elements(of values: some Sequence) -> [Any] { values.map { $0 as Any } }
}

extension PredicateExpressions.SequenceStartsWith: SQLTranslatable {
    func sqlTerm(_ compiler: PredicateCompiler) throws -> SQLTerm {
        let (string, start) = (try compiler.term(base), try compiler.term(prefix))
        let spelling = Spelling.lazy { "\(string.description).starts(with: \(start.description))" }
        guard case .column(.string, _, _) = string.kind else {
            throw compiler.unsupported(spelling.text, "use starts(with:) on a String property")
        }
        switch PredicateCompiler.normalized(start).kind {
        case .value(let value):
            guard let text = PredicateCompiler.unwrapped(value) as? String else { break }
            // GLOB: case-sensitive, and an index on the property can serve it.
            return SQLTerm(
                .boolean, string.isOptional ? "COALESCE(\(string.sql) GLOB ?, 0)" : "(\(string.sql) GLOB ?)",
                arguments: string.arguments + [.string(QueryCompiler.globPrefix(text))], spelling: spelling)
        case .column(.string, _, _):
            let test = "instr(\(string.sql), \(start.sql)) = 1"
            return SQLTerm(
                .boolean, string.isOptional || start.isOptional ? "COALESCE(\(test), 0)" : "(\(test))",
                arguments: string.arguments + start.arguments, spelling: spelling)
        default:
            break
        }
        throw compiler.unsupported(spelling.text, "give starts(with:) a String")
    }
}

extension PredicateExpressions.CollectionContainsCollection: SQLTranslatable {
    func sqlTerm(_ compiler: PredicateCompiler) throws -> SQLTerm {
        let (string, part) = (try compiler.term(base), try compiler.term(other))
        let spelling = Spelling.lazy { "\(string.description).contains(\(part.description))" }
        guard case .column(.string, _, _) = string.kind else {
            throw compiler.unsupported(spelling.text, "use contains on a String property (a to-many relationship takes one id)")
        }
        let (partSQL, partArguments) = try compiler.string(part, spelling: spelling, "give contains a String")
        // instr: case-sensitive, by Unicode scalars; an empty string is in every string.
        let test = "instr(\(string.sql), \(partSQL)) > 0"
        return SQLTerm(
            .boolean, string.isOptional || part.isOptional ? "COALESCE(\(test), 0)" : "(\(test))",
            arguments: string.arguments + partArguments, spelling: spelling)
    }
}

#if !canImport(Darwin)
extension PredicateExpressions.StringLocalizedStandardContains: SQLTranslatable {
    func sqlTerm(_ compiler: PredicateCompiler) throws -> SQLTerm {
        let (string, part) = (try compiler.term(root), try compiler.term(other))
        let spelling = Spelling.lazy { "\(string.description).localizedStandardContains(\(part.description))" }
        guard case .column(.string, _, _) = string.kind else {
            throw compiler.unsupported(spelling.text, "use localizedStandardContains on a String property")
        }
        let (partSQL, partArguments) = try compiler.string(
            part, spelling: spelling, "give localizedStandardContains a String")
        let test = "\(QueryFunctions.localizedStandardContains)(\(string.sql), \(partSQL))"
        return SQLTerm(
            .boolean, "COALESCE(\(test), 0)", arguments: string.arguments + partArguments, spelling: spelling)
    }
}
#endif

extension PredicateExpressions.RangeExpressionContains: SQLTranslatable {
    func sqlTerm(_ compiler: PredicateCompiler) throws -> SQLTerm {
        let (bounds, value) = (try compiler.term(range), try compiler.term(element))
        let spelling = Spelling.lazy { "(\(bounds.description)).contains(\(value.description))" }
        guard case .value(let bound) = bounds.kind, let range = bound as? any AnyRange else {
            throw compiler.unsupported(spelling.text, "test a stored property against a range of values")
        }
        let (lower, upper, isClosed) = (range.lower, range.upper, range.isClosed)
        let low = try compiler.compare(value, .greaterOrEqual, SQLTerm(.value(lower), "", spelling: .value(lower)), spelling: spelling)
        let high = try compiler.compare(
            value, isClosed ? .lessOrEqual : .less, SQLTerm(.value(upper), "", spelling: .value(upper)), spelling: spelling)
        return SQLTerm(.boolean, "(\(low.sql) AND \(high.sql))", arguments: low.arguments + high.arguments, spelling: spelling)
    }
}

extension PredicateCompiler {
    /// A string operand: a `?` with the value, or a String property's SQL.
    func string(_ term: SQLTerm, spelling: Spelling, _ advice: String) throws -> (sql: String, arguments: [AttributeValue]) {
        if case .value(let value) = term.kind, let text = value as? String { return ("?", [.string(text)]) }
        switch Self.normalized(term).kind {
        case .value(let value):
            if let text = Self.unwrapped(value) as? String { return ("?", [.string(text)]) }
        case .column(.string, _, _):
            return (term.sql, term.arguments)
        default:
            break
        }
        throw unsupported(spelling.text, advice)
    }

    /// The term of a value the predicate carries.
    static func valueTerm(_ value: Any) -> SQLTerm {
        SQLTerm(.value(value), "", spelling: .value(value))
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
