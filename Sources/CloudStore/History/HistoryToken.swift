import Foundation

/// A bookmark in a store's persistent history: the position just after one committed transaction.
///
/// Tokens of one store compare in commit order. Save the token of the last transaction you
/// processed and pass it back to ``PersistentStore/history(after:matching:)`` or
/// ``PersistentStore/transactions(after:matching:)`` to resume where you left off, across restarts:
///
/// ```swift
/// let data = try JSONEncoder().encode(transaction.token)   // save it
/// let token = try JSONDecoder().decode(HistoryToken.self, from: data)
/// for try await transaction in store.transactions(after: token) { … }
/// ```
///
/// A token also names its store, so a token saved for a store file that was since deleted and
/// re-created is refused (``StoreError/Code/historyTokenExpired``) instead of silently skipping
/// the new file's first transactions. Its text form is `<transaction>@<store identifier>`.
public struct HistoryToken: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The store the token belongs to.
    let storeIdentifier: UUID
    /// The transaction's number: increases with every transaction the store commits.
    let transactionNumber: Int64

    init(storeIdentifier: UUID, transactionNumber: Int64) {
        self.storeIdentifier = storeIdentifier
        self.transactionNumber = transactionNumber
    }

    /// Reads the text form, `42@6A2F…`, as ``description`` writes it.
    public init(_ text: String) throws {
        let parts = text.split(separator: "@", omittingEmptySubsequences: false)
        guard parts.count == 2, let number = Int64(parts[0]), number >= 0, let store = UUID(text: String(parts[1]))
        else {
            throw StoreError(
                .invalidHistoryToken,
                "\"\(text)\" is not a history token (expected <transaction>@<store identifier>, as a token's description writes it)")
        }
        self.init(storeIdentifier: store, transactionNumber: number)
    }

    /// The text form, `<transaction>@<store identifier>`, which ``init(_:)`` reads back.
    public var description: String { "\(transactionNumber)@\(storeIdentifier.uuidString)" }

    /// Orders tokens of the same store by commit order.
    public static func < (lhs: HistoryToken, rhs: HistoryToken) -> Bool {
        (lhs.transactionNumber, lhs.storeIdentifier.uuidString) < (rhs.transactionNumber, rhs.storeIdentifier.uuidString)
    }
}

/// Encoded as its text form, a single string.
extension HistoryToken: Codable {
    /// Decodes the text form; text that is not a token throws `DecodingError.dataCorrupted`.
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        do {
            try self.init(text)
        } catch let error as StoreError {
            throw DecodingError.dataCorrupted(
                DecodingError.Context(codingPath: decoder.codingPath, debugDescription: error.message))
        }
    }

    /// Encodes the text form, as a single string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}
