import Foundation

/// A translated expression: its SQL (with `?` for its arguments, in order) and what it is. A
/// class: terms are passed around and captured by their parents' spellings, and a reference is
/// cheaper to copy than their fields.
final class SQLTerm {
    enum Kind {
        /// The object itself: the predicate's variable.
        case object
        /// A Swift value the predicate carries, converted once it meets what it is compared with.
        case value(Any)
        /// `nil`.
        case null
        /// A stored value or an expression of one attribute type.
        case column(AttributeType, isEnum: Bool, isExternal: Bool)
        /// A to-many relationship of the object.
        case toMany(RelationshipLayout)
        /// A condition.
        case boolean
    }

    let kind: Kind
    let sql: String
    /// Whether the SQL may be NULL.
    let isOptional: Bool
    let arguments: [AttributeValue]
    /// The expression as Swift writes it, for messages: spelled only when a message needs it (a
    /// key path's or a value's text costs more than translating it).
    let spelling: Spelling
    var description: String { spelling.text }

    init(
        _ kind: Kind, _ sql: String, isOptional: Bool = false, arguments: [AttributeValue] = [], spelling: Spelling
    ) {
        self.kind = kind
        self.sql = sql
        self.isOptional = isOptional
        self.arguments = arguments
        self.spelling = spelling
    }

    convenience init(
        _ kind: Kind, _ sql: String, isOptional: Bool = false, arguments: [AttributeValue] = [],
        description: @autoclosure @escaping () -> String
    ) {
        self.init(kind, sql, isOptional: isOptional, arguments: arguments, spelling: .lazy(description))
    }

    var isValueOrNull: Bool {
        switch kind {
        case .value, .null: true
        default: false
        }
    }
}

/// How Swift writes an expression, kept as its parts and spelled out only for a message.
enum Spelling {
    case text(String)
    case value(Any)
    /// `root.property`.
    case member(SQLTerm, AnyKeyPath)
    /// `lhs op rhs`.
    case infix(SQLTerm, String, SQLTerm)
    /// `op operand`.
    case prefix(String, SQLTerm)
    case lazy(() -> String)

    var text: String {
        switch self {
        case .text(let text): text
        case .value(let value): String(reflecting: value)
        case .member(let root, let keyPath): "\(root.description)\(PredicateCompiler.memberSpelling(keyPath))"
        case .infix(let lhs, let op, let rhs): "\(lhs.description) \(op) \(rhs.description)"
        case .prefix(let op, let operand): "\(op)\(operand.description)"
        case .lazy(let spell): spell()
        }
    }
}

/// The comparisons a predicate makes.
enum ComparisonOperator: Equatable {
    case equal, notEqual, less, lessOrEqual, greater, greaterOrEqual

    init(_ op: PredicateExpressions.ComparisonOperator) {
        switch op {
        case .lessThan: self = .less
        case .lessThanOrEqual: self = .lessOrEqual
        case .greaterThan: self = .greater
        case .greaterThanOrEqual: self = .greaterOrEqual
        @unknown default: self = .equal
        }
    }

    var isOrdering: Bool { self != .equal && self != .notEqual }

    /// The operator with its operands swapped.
    var flipped: ComparisonOperator {
        switch self {
        case .less: .greater
        case .lessOrEqual: .greaterOrEqual
        case .greater: .less
        case .greaterOrEqual: .lessOrEqual
        default: self
        }
    }

    var sql: String {
        switch self {
        case .equal: "="
        case .notEqual: "<>"
        case .less: "<"
        case .lessOrEqual: "<="
        case .greater: ">"
        case .greaterOrEqual: ">="
        }
    }
}

/// `Optional`, seen without knowing its wrapped type.
protocol AnyOptional {
    var anyWrapped: Any? { get }
    static var wrappedType: Any.Type { get }
}

extension Optional: AnyOptional {
    var anyWrapped: Any? { self.map { $0 } }
    static var wrappedType: Any.Type { Wrapped.self }
}
