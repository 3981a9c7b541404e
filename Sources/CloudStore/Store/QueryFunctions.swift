import Foundation
import GRDB

/// The SQL collations and functions queries use where SQLite's own would give other answers than
/// Swift: decimals compared as numbers (they are stored as exact text), and
/// `localizedStandardContains`. Registered on every
/// connection of a store; each calls the Swift function a query's in-memory form calls, so the
/// store and `Predicate.evaluate` agree by construction.
enum QueryFunctions {
    static let decimalCollation = "cloudstore_decimal"
    static let localizedStandardContains = "cloudstore_localized_standard_contains"

    static func register(in db: Database) {
        db.add(collation: DatabaseCollation(decimalCollation) { lhs, rhs in
            let locale = Locale(identifier: "en_US_POSIX")
            guard let left = Decimal(string: lhs, locale: locale), let right = Decimal(string: rhs, locale: locale) else {
                return lhs < rhs ? .orderedAscending : lhs == rhs ? .orderedSame : .orderedDescending
            }
            return left < right ? .orderedAscending : left == right ? .orderedSame : .orderedDescending
        })
        db.add(function: DatabaseFunction(localizedStandardContains, argumentCount: 2, pure: true) { values in
            guard let base = String.fromDatabaseValue(values[0]), let other = String.fromDatabaseValue(values[1]) else {
                return nil
            }
            return base.cloudStoreLocalizedStandardContains(other)
        })
    }
}

extension StringProtocol {
    /// Whether `other` is in the string, ignoring case and diacritics: what
    /// `localizedStandardContains` in a typed query means, in the store and in memory.
    func cloudStoreLocalizedStandardContains(_ other: some StringProtocol) -> Bool {
        let options: String.CompareOptions = [.caseInsensitive, .diacriticInsensitive]
        return String(self).range(of: String(other), options: options) != nil || other.isEmpty
    }
}

#if !canImport(Darwin)
/// The `localizedStandardContains` expression CloudStore adds to `#Predicate` on Linux.
extension PredicateExpressions {
    /// `localizedStandardContains` in a `#Predicate`, which Foundation on Linux does not offer:
    /// whether a string contains another, ignoring case and diacritics. The store evaluates it
    /// with the same Swift function, so a query and `Predicate.evaluate` agree.
    public struct StringLocalizedStandardContains<Root: PredicateExpression, Other: PredicateExpression>:
        StandardPredicateExpression
    where Root.Output: StringProtocol, Other.Output: StringProtocol, Root: StandardPredicateExpression,
        Other: StandardPredicateExpression
    {
        /// Whether `other` is in `root`.
        public typealias Output = Bool
        /// The string searched.
        public let root: Root
        /// The string searched for.
        public let other: Other

        /// The expression `root.localizedStandardContains(other)`; `#Predicate` builds it.
        public init(root: Root, other: Other) {
            self.root = root
            self.other = other
        }

        /// Whether `other` is in `root`, ignoring case and diacritics; an empty `other` is in
        /// every string.
        public func evaluate(_ bindings: PredicateBindings) throws -> Bool {
            try root.evaluate(bindings).cloudStoreLocalizedStandardContains(try other.evaluate(bindings))
        }
    }

    /// What `#Predicate` calls for `localizedStandardContains` in a predicate's body.
    public static func build_localizedStandardContains<Root, Other>(
        _ root: Root, _ other: Other
    ) -> StringLocalizedStandardContains<Root, Other> {
        StringLocalizedStandardContains(root: root, other: other)
    }
}
#endif
